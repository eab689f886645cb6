//! The bandwidth bound of a shard's copies (Kafka's
//! `remote.log.manager.copy.max.bytes.per.second`, split evenly among the shards): after each
//! object put, a copy waits until the shard's copies are back under the rate.
//!
//! A debt clock: every put moves `free_at` forward by `bytes / rate`, from now if it was in the
//! past (idle time is not saved up beyond one put), and the putter sleeps until `free_at`.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// A shard's copy bandwidth bound.
#[derive(Debug)]
pub struct CopyPacer {
    /// Bytes per second (`None`: no bound).
    rate: Option<u64>,
    /// When the bytes put so far have been paid for.
    free_at: Cell<Option<Instant>>,
}

impl CopyPacer {
    /// A pacer of `rate` bytes per second (`None`: unbounded).
    pub fn new(rate: Option<u64>) -> Self {
        CopyPacer {
            rate: rate.filter(|r| *r > 0),
            free_at: Cell::new(None),
        }
    }

    /// How long a putter that just put `bytes` at `now` waits.
    pub fn debt(&self, now: Instant, bytes: u64) -> Duration {
        let Some(rate) = self.rate else {
            return Duration::ZERO;
        };
        let start = self.free_at.get().map_or(now, |t| t.max(now));
        let cost = Duration::from_secs_f64(bytes as f64 / rate as f64);
        let free_at = start + cost;
        self.free_at.set(Some(free_at));
        free_at.saturating_duration_since(now)
    }

    /// Waits out the debt of a put of `bytes`.
    pub async fn pace(&self, bytes: u64) {
        let wait = self.debt(Instant::now(), bytes);
        if !wait.is_zero() {
            glommio::timer::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn puts_wait_for_the_rate_and_idle_time_is_not_saved_up() {
        let pacer = CopyPacer::new(Some(1_000));
        let t0 = Instant::now();
        assert_eq!(pacer.debt(t0, 500), Duration::from_millis(500));
        assert_eq!(
            pacer.debt(t0, 500),
            Duration::from_millis(1000),
            "debts add up"
        );
        let later = t0 + Duration::from_secs(10);
        assert_eq!(
            pacer.debt(later, 100),
            Duration::from_millis(100),
            "no credit for idling"
        );
        assert_eq!(CopyPacer::new(None).debt(t0, 1 << 30), Duration::ZERO);
    }
}
