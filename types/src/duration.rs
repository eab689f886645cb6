//! [`DurationMs`]: a span of milliseconds between two [`TimestampMs`], and the arithmetic of
//! instants and spans the coordinators' state machines need.
//!
//! Instants stay [`TimestampMs`]: the runtime's clock (`rill_engine::io::Clock`) already reads
//! the wall clock as one, and the instants the state machines keep (a transaction's start, a
//! group's state change) are stored as Kafka stores them, epoch milliseconds with -1 for none.
//! The operators are plain `i64` arithmetic, as the code they replaced; the `saturating_*`
//! methods exist for the places that saturated.

use std::ops::{Add, Sub};

use crate::TimestampMs;

/// A span of time in milliseconds. Signed: the difference of two wall-clock readings may be
/// negative when the clock steps back, and the callers decide what that means.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct DurationMs(pub i64);

impl DurationMs {
    /// No time at all.
    pub const ZERO: DurationMs = DurationMs(0);
}

/// Lossless: Kafka's wire timeouts are `i32` milliseconds.
impl From<i32> for DurationMs {
    fn from(ms: i32) -> Self {
        DurationMs(i64::from(ms))
    }
}

impl std::fmt::Display for DurationMs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Sub for DurationMs {
    type Output = DurationMs;
    fn sub(self, rhs: DurationMs) -> DurationMs {
        DurationMs(self.0 - rhs.0)
    }
}

/// The instant `rhs` after `self`.
impl Add<DurationMs> for TimestampMs {
    type Output = TimestampMs;
    fn add(self, rhs: DurationMs) -> TimestampMs {
        TimestampMs(self.0 + rhs.0)
    }
}

/// The instant `rhs` before `self`.
impl Sub<DurationMs> for TimestampMs {
    type Output = TimestampMs;
    fn sub(self, rhs: DurationMs) -> TimestampMs {
        TimestampMs(self.0 - rhs.0)
    }
}

/// The time from `rhs` to `self` (negative if `rhs` is later).
impl Sub for TimestampMs {
    type Output = DurationMs;
    fn sub(self, rhs: TimestampMs) -> DurationMs {
        DurationMs(self.0 - rhs.0)
    }
}

impl TimestampMs {
    /// The time since `earlier`, saturating at the `i64` bounds (an `earlier` of
    /// [`TimestampMs::NONE`] or a stepped-back clock gives a huge or negative span, never a
    /// panic).
    pub fn saturating_since(self, earlier: TimestampMs) -> DurationMs {
        DurationMs(self.0.saturating_sub(earlier.0))
    }

    /// The instant `span` after `self`, saturating at the `i64` bounds.
    pub fn saturating_add(self, span: DurationMs) -> TimestampMs {
        TimestampMs(self.0.saturating_add(span.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_spans_compose() {
        let t = TimestampMs(1_000);
        let d = DurationMs(250);
        assert_eq!(t + d, TimestampMs(1_250));
        assert_eq!(t - d, TimestampMs(750));
        assert_eq!((t + d) - t, d);
        assert_eq!(t - (t + d), DurationMs(-250));
        assert_eq!(d - DurationMs::from(100), DurationMs(150));
    }

    #[test]
    fn saturating_forms_do_not_overflow() {
        assert_eq!(
            TimestampMs(i64::MAX).saturating_add(DurationMs(1)),
            TimestampMs(i64::MAX)
        );
        assert_eq!(
            TimestampMs(i64::MIN).saturating_since(TimestampMs(1)),
            DurationMs(i64::MIN)
        );
        assert_eq!(
            TimestampMs(5).saturating_since(TimestampMs::NONE),
            DurationMs(6)
        );
    }
}
