//! [`TimestampMs`]: Kafka's record and batch timestamps, and the wall-clock instants the
//! coordinators keep (the same clock, the same epoch; arithmetic in [`crate::duration`]).

/// Milliseconds since the Unix epoch, as Kafka timestamps are. -1 means "none".
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TimestampMs(pub i64);

impl TimestampMs {
    /// Kafka's "no timestamp" value.
    pub const NONE: TimestampMs = TimestampMs(-1);
}

impl std::fmt::Display for TimestampMs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
