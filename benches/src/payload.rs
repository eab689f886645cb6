//! The message value: a 16-byte stamp (run id, intended send time) then filler.
//!
//! The stamp lets the consumer side of `latency` measure produce→consume from the time the message
//! was *meant* to be sent, and ignore messages from other runs on the same topic.

/// Bytes at the start of every value taken by the stamp.
pub const STAMP_BYTES: usize = 16;

/// What each benchmark message carries at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Random per run; messages with another id are ignored.
    pub run_id: u64,
    /// Intended send time, ns since the run's base instant.
    pub intended_ns: u64,
}

impl Stamp {
    /// Writes the stamp into the first [`STAMP_BYTES`] of `value`.
    pub fn write(self, value: &mut [u8]) {
        assert!(value.len() >= STAMP_BYTES, "value shorter than the stamp");
        value[..8].copy_from_slice(&self.run_id.to_le_bytes());
        value[8..16].copy_from_slice(&self.intended_ns.to_le_bytes());
    }

    /// Reads a stamp back; `None` if the value is too short.
    pub fn read(value: &[u8]) -> Option<Stamp> {
        let run_id = u64::from_le_bytes(value.get(..8)?.try_into().ok()?);
        let intended_ns = u64::from_le_bytes(value.get(8..16)?.try_into().ok()?);
        Some(Stamp {
            run_id,
            intended_ns,
        })
    }
}

/// A value template of `size_bytes`: random lowercase letters (about 4.7 bits of entropy per
/// byte, so codecs compress it somewhat, as with real text, but cannot collapse it to nothing).
pub fn template(size_bytes: usize, seed: u64) -> Vec<u8> {
    assert!(
        size_bytes >= STAMP_BYTES,
        "--size must be at least {STAMP_BYTES}"
    );
    let mut state = seed | 1;
    (0..size_bytes)
        .map(|_| {
            // xorshift64: fast, deterministic filler; quality is irrelevant here.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            b'a' + (state % 26) as u8
        })
        .collect()
}

/// A run id that differs between runs (time-derived; uniqueness across runs is all we need).
pub fn new_run_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_round_trips() {
        let mut value = template(64, 7);
        let stamp = Stamp {
            run_id: 0xdead_beef,
            intended_ns: 123_456_789,
        };
        stamp.write(&mut value);
        assert_eq!(Stamp::read(&value), Some(stamp));
    }

    #[test]
    fn short_value_has_no_stamp() {
        assert_eq!(Stamp::read(&[0u8; 15]), None);
    }

    #[test]
    fn template_has_requested_size_and_letters_only() {
        let value = template(1024, 1);
        assert_eq!(value.len(), 1024);
        assert!(value.iter().all(u8::is_ascii_lowercase));
    }
}
