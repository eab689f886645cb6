//! [`Offset`]: the position of a record in a partition's log, as Kafka numbers them, and
//! [`RelativeOffset`], one relative to a segment's base.

use std::fmt;

/// A Kafka log offset: the position of a record in a partition's log (0-based, dense). Raw
/// `i64` only at the wire, where a client may send anything (a negative fetch offset is simply
/// out of range).
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

/// An offset relative to its segment's base offset, as Kafka's `.index` / `.timeindex` store it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RelativeOffset(pub u32);

impl RelativeOffset {
    /// `offset` relative to a segment starting at `base`: `offset.relative_to(base)`.
    pub fn between(offset: Offset, base: Offset) -> RelativeOffset {
        offset.relative_to(base)
    }

    /// The absolute offset for a segment starting at `base`.
    pub fn absolute(self, base: Offset) -> Offset {
        base.plus(i64::from(self.0))
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plus_moves_forward() {
        assert_eq!(Offset(7).plus(0), Offset(7));
        assert_eq!(Offset(7).plus(3), Offset(10));
    }

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

    #[test]
    #[should_panic]
    fn plus_never_moves_back() {
        let _ = Offset(7).plus(-1);
    }
}
