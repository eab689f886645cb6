//! [`Offset`]: the position of a record in a partition's log, as Kafka numbers them.

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
    #[should_panic]
    fn plus_never_moves_back() {
        let _ = Offset(7).plus(-1);
    }
}
