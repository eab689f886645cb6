//! Newtypes for the numbers that must never mix. Log offsets and timestamps are Kafka's, shared
//! with the protocol through `rill-types` (re-exported here); positions inside a segment are the
//! engine's own.

pub use rill_types::{Offset, TimestampMs};

/// An offset relative to its segment's base offset, as stored in `.index` / `.timeindex`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RelativeOffset(pub u32);

impl RelativeOffset {
    /// `offset` relative to a segment starting at `base` (fits u32 by the segment roll rule).
    pub fn between(offset: Offset, base: Offset) -> RelativeOffset {
        assert!(offset >= base);
        let delta = offset.0 - base.0;
        assert!(delta <= i64::from(u32::MAX));
        RelativeOffset(delta as u32)
    }

    /// The absolute offset for a segment starting at `base`.
    pub fn absolute(self, base: Offset) -> Offset {
        base.plus(i64::from(self.0))
    }
}

/// A byte position inside one segment's `.log` file (segments are < 4 GiB by the roll rule).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FilePosition(pub u32);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_round_trip() {
        let base = Offset(1_000);
        let rel = RelativeOffset::between(Offset(1_042), base);
        assert_eq!(rel, RelativeOffset(42));
        assert_eq!(rel.absolute(base), Offset(1_042));
    }

    #[test]
    #[should_panic]
    fn relative_below_base_panics() {
        let _ = RelativeOffset::between(Offset(5), Offset(6));
    }
}
