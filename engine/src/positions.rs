//! [`Positions`]: the named offsets of a partition log and the order they always keep.
//!
//! ```text
//!  log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset
//!                                          durable_offset <= log_end_offset
//! ```
//! All are "next offset" positions (exclusive ends), except `log_start_offset`, the first offset
//! still readable. `durable_offset`: every offset below it survives a crash (fdatasync'ed).
//! `high_watermark`: consumers may read below it; equal to `durable_offset` under
//! `FlushPolicy::EveryAppend` (consumers never see what a crash could take back), equal to
//! `log_end_offset` under an interval policy; in a replicated partition, set by replication
//! ([`Positions::replicated`]): the leader's is the least log end over the in-sync replicas,
//! a follower's the leader's, capped by its own log end. Never "committed": Kafka means
//! something else by it.
//! `last_stable_offset` (LSO): read_committed consumers read below it; the log sets it from its
//! open transactions after every change (`transactions.rs`); a moving log start drags it along.

use crate::types::Offset;

/// The positions of one partition log.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Positions {
    log_start: Offset,
    last_stable: Offset,
    high_watermark: Offset,
    durable: Offset,
    log_end: Offset,
    /// Whether the high watermark follows the durable offset (EveryAppend) or the log end.
    hw_follows_durable: bool,
    /// Replication sets the high watermark ([`Positions::set_high_watermark`]); appends and
    /// flushes leave it alone.
    hw_replicated: bool,
}

impl Positions {
    /// Positions of a freshly opened log: everything recovered is durable and visible.
    pub fn recovered(log_start: Offset, log_end: Offset, hw_follows_durable: bool) -> Self {
        let p = Positions {
            log_start,
            last_stable: log_end,
            high_watermark: log_end,
            durable: log_end,
            log_end,
            hw_follows_durable,
            hw_replicated: false,
        };
        p.check();
        p
    }

    /// From now on replication moves the high watermark. It starts at `high_watermark`
    /// (clamped into the log): a replica that just opened its log does not know how much of it
    /// the other replicas hold, so it exposes no more than it was told.
    pub fn replicated(&mut self, high_watermark: Offset) {
        self.hw_replicated = true;
        self.high_watermark = high_watermark.max(self.log_start).min(self.log_end);
        self.last_stable = self.last_stable.min(self.high_watermark);
        self.check();
    }

    /// Whether replication moves the high watermark.
    pub fn is_replicated(&self) -> bool {
        self.hw_replicated
    }

    /// Replication moved the high watermark (it must be inside the log). A last stable offset
    /// above it comes down to it; the log then recomputes the LSO from its transactions.
    pub fn set_high_watermark(&mut self, high_watermark: Offset) {
        assert!(
            self.hw_replicated,
            "only a replicated log is told its high watermark"
        );
        self.high_watermark = high_watermark;
        self.last_stable = self.last_stable.min(high_watermark);
        self.check();
    }

    /// Asserts the order of the positions.
    pub fn check(&self) {
        assert!(
            self.log_start <= self.high_watermark,
            "log start above high watermark: {self:?}"
        );
        assert!(
            self.log_start <= self.last_stable,
            "log start above last stable offset: {self:?}"
        );
        assert!(
            self.last_stable <= self.high_watermark,
            "last stable offset above high watermark: {self:?}"
        );
        assert!(
            self.high_watermark <= self.log_end,
            "high watermark above log end: {self:?}"
        );
        assert!(
            self.durable <= self.log_end,
            "durable above log end: {self:?}"
        );
        assert!(self.log_start.0 >= 0);
    }

    /// First offset still in the log.
    pub fn log_start(&self) -> Offset {
        self.log_start
    }

    /// Read_committed consumers may read below this.
    pub fn last_stable(&self) -> Offset {
        self.last_stable
    }

    /// The log computed a new last stable offset (within `[log_start, high_watermark]`).
    pub fn set_last_stable(&mut self, last_stable: Offset) {
        self.last_stable = last_stable;
        self.check();
    }

    /// Consumers may read below this.
    pub fn high_watermark(&self) -> Offset {
        self.high_watermark
    }

    /// Everything below this is fdatasync'ed.
    pub fn durable(&self) -> Offset {
        self.durable
    }

    /// The next offset to assign.
    pub fn log_end(&self) -> Offset {
        self.log_end
    }

    /// Batches up to `new_end` were appended.
    pub fn appended(&mut self, new_end: Offset) {
        assert!(new_end > self.log_end, "log end only grows");
        self.log_end = new_end;
        if !self.hw_follows_durable && !self.hw_replicated {
            self.high_watermark = new_end;
        }
        self.check();
    }

    /// Everything appended so far is durable.
    pub fn flushed(&mut self) {
        assert!(self.durable <= self.log_end);
        self.durable = self.log_end;
        if self.hw_follows_durable && !self.hw_replicated {
            self.high_watermark = self.durable;
        }
        self.check();
    }

    /// Switches the high watermark between following the durable offset (`EveryAppend`) and
    /// the log end (interval flushes). It never moves back: switch to following the durable
    /// offset only when everything appended is durable.
    pub fn set_hw_follows_durable(&mut self, follows: bool) {
        if follows && !self.hw_follows_durable {
            assert_eq!(
                self.durable, self.log_end,
                "flush before the HW follows durability"
            );
        } else if !follows {
            self.high_watermark = self.log_end;
        }
        self.hw_follows_durable = follows;
        self.check();
    }

    /// These positions with the log start lowered to at most `log_start`: a tiered
    /// partition's log starts in the remote tier, below its local log's start.
    pub fn with_log_start_at_most(mut self, log_start: Offset) -> Self {
        assert!(log_start.0 >= 0, "a log start is an offset");
        self.log_start = self.log_start.min(log_start);
        self.check();
        self
    }

    /// The log start moves forward (retention, DeleteRecords); never past the high watermark.
    pub fn advance_log_start(&mut self, new_start: Offset) {
        assert!(new_start >= self.log_start, "log start only moves forward");
        self.log_start = new_start;
        self.last_stable = self.last_stable.max(new_start);
        self.check();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_append_hw_follows_durable() {
        let mut p = Positions::recovered(Offset(0), Offset(10), true);
        p.appended(Offset(15));
        assert_eq!(
            (p.high_watermark(), p.durable(), p.log_end()),
            (Offset(10), Offset(10), Offset(15))
        );
        p.flushed();
        assert_eq!(p.high_watermark(), Offset(15));
    }

    #[test]
    fn interval_hw_follows_log_end() {
        let mut p = Positions::recovered(Offset(0), Offset(0), false);
        p.appended(Offset(3));
        assert_eq!((p.high_watermark(), p.durable()), (Offset(3), Offset(0)));
    }

    #[test]
    fn the_last_stable_offset_stays_between_log_start_and_hw() {
        let mut p = Positions::recovered(Offset(0), Offset(10), true);
        p.set_last_stable(Offset(4));
        p.advance_log_start(Offset(6));
        assert_eq!(p.last_stable(), Offset(6), "dragged along by the log start");
    }

    #[test]
    #[should_panic(expected = "last stable offset above high watermark")]
    fn lso_past_hw_is_a_bug() {
        let mut p = Positions::recovered(Offset(0), Offset(5), true);
        p.set_last_stable(Offset(6));
    }

    #[test]
    fn replicated_hw_is_only_what_replication_says() {
        let mut p = Positions::recovered(Offset(0), Offset(10), true);
        p.replicated(Offset(4));
        assert_eq!(p.high_watermark(), Offset(4));
        p.appended(Offset(15));
        p.flushed();
        assert_eq!(p.high_watermark(), Offset(4));
        p.set_high_watermark(Offset(12));
        assert_eq!(p.high_watermark(), Offset(12));
        p.replicated(Offset(99));
        assert_eq!(p.high_watermark(), Offset(15), "clamped to the log end");
    }

    #[test]
    #[should_panic(expected = "high watermark above log end")]
    fn replicated_hw_past_the_log_end_is_a_bug() {
        let mut p = Positions::recovered(Offset(0), Offset(10), true);
        p.replicated(Offset(0));
        p.set_high_watermark(Offset(11));
    }

    #[test]
    #[should_panic(expected = "log start above high watermark")]
    fn log_start_past_hw_is_a_bug() {
        let mut p = Positions::recovered(Offset(0), Offset(5), true);
        p.advance_log_start(Offset(6));
    }
}
