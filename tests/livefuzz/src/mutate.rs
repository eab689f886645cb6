//! Byte-level mutations of a well-formed request body: what a buggy client, a torn write or an
//! attacker produces from a valid request. The 8 fixed header bytes (api key, version,
//! correlation id) are left alone unless asked, so the broker can still answer or close
//! knowingly.

use crate::entropy::Entropy;

/// Applies 1-4 mutations to `body` after its first `keep` bytes.
pub fn mutate<E: Entropy>(e: &mut E, body: &mut Vec<u8>, keep: usize) {
    for _ in 0..1 + e.below(4) {
        if body.len() <= keep {
            let n = 1 + e.below(8);
            body.extend_from_slice(&e.bytes(n));
            continue;
        }
        let at = keep + e.below(body.len() - keep);
        match e.below(8) {
            0 => body[at] ^= 1 << e.below(8),
            1 => body[at] = e.pick(&[0x00, 0x01, 0x7f, 0x80, 0xff]),
            2 => {
                // A 16- or 32-bit boundary value over whatever was there (often a length).
                let v: &[u8] = e.pick(&[
                    &[0xff, 0xff][..],
                    &[0x7f, 0xff],
                    &[0x80, 0x00],
                    &[0x7f, 0xff, 0xff, 0xff],
                    &[0x80, 0x00, 0x00, 0x00],
                    &[0xff, 0xff, 0xff, 0xff],
                ]);
                for (i, b) in v.iter().enumerate() {
                    if let Some(x) = body.get_mut(at + i) {
                        *x = *b;
                    }
                }
            }
            3 => body.truncate(at),
            4 => {
                let n = 1 + e.below(16);
                let extra = e.bytes(n);
                body.splice(at..at, extra);
            }
            5 => {
                let end = (at + 1 + e.below(16)).min(body.len());
                body.drain(at..end);
            }
            6 => {
                // Repeat a chunk (a duplicated array element or field).
                let end = (at + 1 + e.below(64)).min(body.len());
                let chunk = body[at..end].to_vec();
                body.splice(at..at, chunk);
            }
            _ => {
                let n = e.below(32);
                let tail = e.bytes(n);
                body.extend_from_slice(&tail);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entropy::Seeded;

    #[test]
    fn kept_prefix_survives_every_mutation() {
        let mut e = Seeded::new(3, 0);
        for _ in 0..2000 {
            let mut body: Vec<u8> = (0..40).collect();
            mutate(&mut e, &mut body, 8);
            assert_eq!(&body[..8], &[0, 1, 2, 3, 4, 5, 6, 7]);
        }
    }
}
