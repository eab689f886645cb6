//! Open-loop send schedule: message `i` is due at `start + i / rate`, whatever the broker does.
//!
//! Latency is measured from these intended times, so when the broker (or the client) stalls, the
//! messages that should have gone out during the stall carry the stall in their latency instead of
//! silently being sent later (no coordinated omission).

use std::ops::Range;
use std::time::{Duration, Instant};

/// Below this the pacer yields instead of sleeping (sleep granularity is ~50-100 µs).
const SPIN_BELOW: Duration = Duration::from_micros(200);

/// Fixed-rate schedule of `total_messages` starting at `start`.
#[derive(Debug, Clone)]
pub struct Pacer {
    start: Instant,
    interval_ns: f64,
    total_messages: u64,
    next_index: u64,
}

impl Pacer {
    /// A schedule of `rate_per_s` messages per second for `total_messages` messages.
    pub fn new(start: Instant, rate_per_s: u64, total_messages: u64) -> Pacer {
        assert!(rate_per_s > 0, "rate must be positive");
        Pacer {
            start,
            interval_ns: 1e9 / rate_per_s as f64,
            total_messages,
            next_index: 0,
        }
    }

    /// Intended send time of message `index`, as an offset from the start.
    pub fn intended(&self, index: u64) -> Duration {
        Duration::from_nanos((index as f64 * self.interval_ns) as u64)
    }

    /// The messages due by `now` that have not been handed out yet (possibly empty).
    pub fn take_due(&mut self, now: Instant) -> Range<u64> {
        let elapsed_ns = now.saturating_duration_since(self.start).as_nanos() as f64;
        let due = ((elapsed_ns / self.interval_ns) as u64 + 1).min(self.total_messages);
        let range = self.next_index..due.max(self.next_index);
        self.next_index = range.end;
        range
    }

    /// True once every message has been handed out.
    pub fn finished(&self) -> bool {
        self.next_index >= self.total_messages
    }

    /// Blocks until the next message is due (returns at once if it already is).
    pub fn wait_next(&self) {
        let due_at = self.start + self.intended(self.next_index);
        loop {
            let now = Instant::now();
            if now >= due_at {
                return;
            }
            let left = due_at - now;
            if left > SPIN_BELOW {
                std::thread::sleep(left - SPIN_BELOW / 2);
            } else {
                std::thread::yield_now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_each_message_once_in_order() {
        let start = Instant::now();
        let mut pacer = Pacer::new(start, 1000, 10);
        assert_eq!(pacer.take_due(start), 0..1);
        assert_eq!(pacer.take_due(start), 1..1);
        assert_eq!(pacer.take_due(start + Duration::from_micros(3500)), 1..4);
        assert_eq!(pacer.take_due(start + Duration::from_secs(60)), 4..10);
        assert!(pacer.finished());
    }

    #[test]
    fn intended_times_are_evenly_spaced() {
        let pacer = Pacer::new(Instant::now(), 4, 8);
        assert_eq!(pacer.intended(0), Duration::ZERO);
        assert_eq!(pacer.intended(3), Duration::from_millis(750));
    }

    #[test]
    fn a_late_caller_gets_the_backlog_not_a_shifted_schedule() {
        let start = Instant::now();
        let mut pacer = Pacer::new(start, 100, 1000);
        // A 1 s stall: the 100 messages due in it are all due now, with their original times.
        assert_eq!(pacer.take_due(start + Duration::from_millis(1000)), 0..101);
        assert_eq!(pacer.intended(50), Duration::from_millis(500));
    }
}
