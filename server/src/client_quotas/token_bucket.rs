//! Kafka's `TokenBucket` stat (KIP-599), which controller mutation quotas are measured with.
//! Runtime-free: handed the time, in milliseconds of a monotonic clock.
//!
//! A bucket holds at most a burst of `quota × quota.window.num × quota.window.size.seconds`
//! tokens, starts full and refills at `quota` per second. A record takes its tokens even when
//! that drives the bucket negative (the request that crossed it is not cut short); the bucket
//! is exhausted while it is below 0, and a client waits `−tokens / quota` seconds for it to be
//! back at 0 (Kafka's `ControllerMutationQuotaManager.throttleTimeMs`).

use super::rate::{MonotonicMs, Window};

/// One client's mutation tokens (Kafka's `TokenBucket`).
#[derive(Clone, Debug, Default)]
pub struct TokenBucket {
    tokens: f64,
    /// When it was last refilled (`None`: never used, so full).
    last: Option<MonotonicMs>,
}

/// The most tokens a bucket of `quota` per second holds over `window`.
pub fn burst(window: Window, quota: f64) -> f64 {
    quota * f64::from(window.samples) * (window.window_ms as f64 / 1000.0)
}

impl TokenBucket {
    /// Adds what `quota` refilled since the last update, up to the burst. A clock that went
    /// back refills nothing (the monotonic clock does not, but a caller's time may).
    fn refill(&mut self, window: Window, quota: f64, now: MonotonicMs) {
        let burst = burst(window, quota);
        self.tokens = match self.last {
            None => burst,
            Some(at) => {
                let elapsed_s = now.0.saturating_sub(at.0) as f64 / 1000.0;
                (self.tokens + quota * elapsed_s).min(burst)
            }
        };
        self.last = Some(self.last.map_or(now, |at| at.max(now)));
    }

    /// The tokens at `now` (negative: exhausted).
    pub fn tokens(&mut self, window: Window, quota: f64, now: MonotonicMs) -> f64 {
        self.refill(window, quota, now);
        self.tokens
    }

    /// Takes `permits` tokens at `now`, below 0 if need be; negative permits give tokens back,
    /// never past the burst (Kafka's `TokenBucket.record`).
    pub fn record(&mut self, window: Window, quota: f64, permits: f64, now: MonotonicMs) {
        self.refill(window, quota, now);
        self.tokens = (self.tokens - permits).min(burst(window, quota));
    }

    /// How long until the bucket is back at 0, in milliseconds; 0 when it is not negative.
    pub fn throttle_ms(&mut self, window: Window, quota: f64, now: MonotonicMs) -> u64 {
        let tokens = self.tokens(window, quota, now);
        if tokens >= 0.0 {
            return 0;
        }
        let ms = (-tokens / quota * 1000.0).round();
        // A quota is positive (AlterClientQuotas refuses 0 and below), so this is finite.
        if ms.is_finite() {
            ms as u64
        } else {
            u64::MAX
        }
    }

    /// When it was last used (`None`: never).
    pub fn last_event(&self) -> Option<MonotonicMs> {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 windows of 1 s: a quota of 2/s has a burst of 4.
    const W: Window = Window {
        samples: 2,
        window_ms: 1000,
    };

    fn at(ms: u64) -> MonotonicMs {
        MonotonicMs(ms)
    }

    #[test]
    fn a_new_bucket_is_full() {
        let mut bucket = TokenBucket::default();
        assert_eq!(bucket.tokens(W, 2.0, at(5)), 4.0);
        assert_eq!(bucket.throttle_ms(W, 2.0, at(5)), 0);
        assert_eq!(burst(Window::default(), 2.0), 22.0);
    }

    #[test]
    fn exactly_the_burst_empties_it_without_a_throttle() {
        let mut bucket = TokenBucket::default();
        bucket.record(W, 2.0, 4.0, at(0));
        assert_eq!(bucket.tokens(W, 2.0, at(0)), 0.0);
        // Empty is not exhausted: 0 is not below 0.
        assert_eq!(bucket.throttle_ms(W, 2.0, at(0)), 0);
    }

    #[test]
    fn one_over_the_burst_is_half_a_second_at_two_per_second() {
        let mut bucket = TokenBucket::default();
        bucket.record(W, 2.0, 5.0, at(0));
        assert_eq!(bucket.tokens(W, 2.0, at(0)), -1.0);
        assert_eq!(bucket.throttle_ms(W, 2.0, at(0)), 500);
    }

    #[test]
    fn a_crossing_record_takes_all_its_tokens() {
        let mut bucket = TokenBucket::default();
        bucket.record(W, 2.0, 3.0, at(0));
        // One left; a request of 10 is taken whole and leaves the bucket 9 below 0.
        bucket.record(W, 2.0, 10.0, at(0));
        assert_eq!(bucket.tokens(W, 2.0, at(0)), -9.0);
        assert_eq!(bucket.throttle_ms(W, 2.0, at(0)), 4500);
        assert_eq!(bucket.throttle_ms(W, 2.0, at(4000)), 500);
        assert_eq!(bucket.throttle_ms(W, 2.0, at(4500)), 0);
    }

    #[test]
    fn it_refills_at_the_quota_up_to_the_burst() {
        let mut bucket = TokenBucket::default();
        bucket.record(W, 2.0, 4.0, at(0));
        assert_eq!(bucket.tokens(W, 2.0, at(500)), 1.0);
        assert_eq!(bucket.tokens(W, 2.0, at(1500)), 3.0);
        assert_eq!(bucket.tokens(W, 2.0, at(60_000)), 4.0);
        // A clock going back refills nothing and takes nothing.
        assert_eq!(bucket.tokens(W, 2.0, at(10)), 4.0);
    }

    #[test]
    fn given_back_tokens_stop_at_the_burst() {
        let mut bucket = TokenBucket::default();
        bucket.record(W, 2.0, 3.0, at(0));
        bucket.record(W, 2.0, -3.0, at(0));
        assert_eq!(bucket.tokens(W, 2.0, at(0)), 4.0);
        bucket.record(W, 2.0, -3.0, at(0));
        assert_eq!(bucket.tokens(W, 2.0, at(0)), 4.0);
    }

    #[test]
    fn a_lower_quota_caps_the_tokens_at_its_burst() {
        let mut bucket = TokenBucket::default();
        assert_eq!(bucket.tokens(W, 10.0, at(0)), 20.0);
        assert_eq!(bucket.tokens(W, 1.0, at(0)), 2.0);
    }
}
