//! Newtypes for the numbers that must never mix: log offsets, timestamps, positions in a segment.

use std::fmt;

/// A Kafka log offset: the position of a record in a partition's log (0-based, dense).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

impl Offset {
    /// The offset `delta` records after this one.
    pub fn plus(self, delta: i64) -> Offset {
        assert!(delta >= 0);
        Offset(self.0.checked_add(delta).expect("offset overflow"))
    }

    /// The offset relative to a segment's base offset (fits u32 by the segment roll rule).
    pub fn relative_to(self, base: Offset) -> RelativeOffset {
        assert!(self >= base);
        let delta = self.0 - base.0;
        assert!(delta <= i64::from(u32::MAX));
        RelativeOffset(delta as u32)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Milliseconds since the Unix epoch, as Kafka timestamps are. -1 means "none".
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimestampMs(pub i64);

impl TimestampMs {
    /// Kafka's "no timestamp" value.
    pub const NONE: TimestampMs = TimestampMs(-1);
}

/// An offset relative to its segment's base offset, as stored in `.index` / `.timeindex`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RelativeOffset(pub u32);

impl RelativeOffset {
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
        let rel = Offset(1_042).relative_to(base);
        assert_eq!(rel, RelativeOffset(42));
        assert_eq!(rel.absolute(base), Offset(1_042));
    }

    #[test]
    #[should_panic]
    fn relative_below_base_panics() {
        let _ = Offset(5).relative_to(Offset(6));
    }
}
