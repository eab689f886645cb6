//! Where the generator's choices come from: a seeded PRNG for the live fuzzer (a run is a pure
//! function of its seed), or the input bytes of a cargo-fuzz target (so that libFuzzer's
//! coverage feedback steers the choices the generator makes).

/// A source of choices. Every helper draws only as many bytes as it needs, so a byte-driven
/// source spends its input slowly and an exhausted one (all zeros) makes the first choice.
pub trait Entropy {
    /// `bytes` (1..=8) fresh bytes as a little-endian number.
    fn take(&mut self, bytes: usize) -> u64;

    /// A number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        let bytes = match n {
            0..=0x100 => 1,
            0x101..=0x1_0000 => 2,
            0x1_0001..=0x1_0000_0000 => 4,
            _ => 8,
        };
        (self.take(bytes) % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: usize) -> bool {
        debug_assert!(percent <= 100);
        self.below(100) < percent
    }

    /// One of `items` (which must not be empty).
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        assert!(!items.is_empty(), "pick from nothing");
        items[self.below(items.len())]
    }

    /// An index into `weights`, each chosen in proportion to its weight.
    fn weighted(&mut self, weights: &[usize]) -> usize {
        let total: usize = weights.iter().sum();
        assert!(total > 0, "weights sum to zero");
        let mut at = self.below(total);
        for (i, w) in weights.iter().enumerate() {
            if at < *w {
                return i;
            }
            at -= w;
        }
        unreachable!("below(total) < total")
    }

    /// A full 64-bit number.
    fn u64(&mut self) -> u64 {
        self.take(8)
    }

    /// `n` arbitrary bytes.
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.take(1) as u8).collect()
    }
}

/// The live fuzzer's source: reproducible from its seed.
pub struct Seeded(fastrand::Rng);

impl Seeded {
    /// The stream of `seed`, lane `lane` (one lane per connection, so that every connection's
    /// requests depend only on the seed and its own index, never on timing).
    pub fn new(seed: u64, lane: u64) -> Self {
        // splitmix64 of the pair: neighbouring lanes get unrelated streams.
        let mut z = seed ^ lane.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Seeded(fastrand::Rng::with_seed(z ^ (z >> 31)))
    }
}

impl Entropy for Seeded {
    fn take(&mut self, bytes: usize) -> u64 {
        debug_assert!((1..=8).contains(&bytes));
        let v = self.0.u64(..);
        if bytes == 8 {
            v
        } else {
            v & ((1u64 << (8 * bytes)) - 1)
        }
    }
}

/// A cargo-fuzz input read as choices; zeros once it is spent.
pub struct FromBytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> FromBytes<'a> {
    /// Choices from `data`.
    pub fn new(data: &'a [u8]) -> Self {
        FromBytes { data, pos: 0 }
    }

    /// Whether every input byte has been used.
    pub fn is_spent(&self) -> bool {
        self.pos >= self.data.len()
    }
}

impl Entropy for FromBytes<'_> {
    fn take(&mut self, bytes: usize) -> u64 {
        debug_assert!((1..=8).contains(&bytes));
        let mut v = 0u64;
        for i in 0..bytes {
            let byte = self.data.get(self.pos).copied().unwrap_or(0);
            self.pos = self.pos.saturating_add(1);
            v |= u64::from(byte) << (8 * i);
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_lanes_repeat_and_differ() {
        let a: Vec<u64> = (0..4).map(|_| Seeded::new(7, 1).u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]), "same seed, same lane");
        let (mut x, mut y) = (Seeded::new(7, 1), Seeded::new(7, 2));
        assert_ne!(x.u64(), y.u64());
    }

    #[test]
    fn spent_bytes_choose_the_first_option() {
        let mut e = FromBytes::new(&[5]);
        assert_eq!(e.below(3), 2);
        assert!(e.is_spent());
        assert_eq!(e.below(1000), 0);
        assert_eq!(e.weighted(&[0, 3, 1]), 1);
    }

    #[test]
    fn below_stays_in_range() {
        let mut e = Seeded::new(1, 0);
        for n in [1, 2, 255, 256, 257, 70_000, 1 << 40] {
            for _ in 0..100 {
                assert!(e.below(n) < n);
            }
        }
    }
}
