//! A byte rate measured as Kafka's quota sensors measure it (`Rate` over a `WindowedSum`,
//! `SampledStat`), and the throttle time Kafka derives from it (`QuotaUtils.throttleTime`).
//! Runtime-free: handed the time, in milliseconds of a monotonic clock.
//!
//! The rate is the sum of `samples` windows of `window_ms` each, over the time they span:
//!
//! | step | what Kafka does |
//! |------|-----------------|
//! | record | add to the current window; a window `window_ms` old is complete, and the next record starts a new one in the slot after it (`samples + 1` slots, the oldest reused) |
//! | purge  | a window whose last record is `samples × window_ms` old is emptied and restarted now |
//! | span   | now − the oldest window's start, but never less than `samples − 1` whole windows (plus what is elapsed of the last): a new client is measured over ~10 s, not over its first millisecond |
//! | throttle | a rate O over the bound B, measured over span W, is back at B after X = (O − B) / B × W more milliseconds without records (O·W / (W + X) = B) |

/// Milliseconds on a monotonic clock (the rate's own time base).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MonotonicMs(pub u64);

/// Kafka's quota window: `quota.window.num` samples of `quota.window.size.seconds` each.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// `quota.window.num` (Kafka's default 11).
    pub samples: u32,
    /// `quota.window.size.seconds` in milliseconds (Kafka's default 1 s).
    pub window_ms: u64,
}

impl Default for Window {
    fn default() -> Self {
        Window {
            samples: 11,
            window_ms: 1000,
        }
    }
}

impl Window {
    /// How long after its last record a window counts no more (and a rate with no record for
    /// that long is a fresh one).
    pub fn expiry_ms(self) -> u64 {
        u64::from(self.samples) * self.window_ms
    }
}

#[derive(Copy, Clone, Debug)]
struct Sample {
    value: f64,
    start: MonotonicMs,
    last_event: MonotonicMs,
}

impl Sample {
    fn new(now: MonotonicMs) -> Self {
        Sample {
            value: 0.0,
            start: now,
            last_event: now,
        }
    }
}

/// One sensor's windows (Kafka's `SampledStat`).
#[derive(Clone, Debug, Default)]
pub struct SampledRate {
    samples: Vec<Sample>,
    current: usize,
}

fn elapsed(now: MonotonicMs, then: MonotonicMs) -> u64 {
    now.0.saturating_sub(then.0)
}

impl SampledRate {
    /// Adds `value` (bytes; negative takes back a record) at `now`.
    pub fn record(&mut self, window: Window, value: f64, now: MonotonicMs) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now));
        }
        if elapsed(now, self.samples[self.current].start) >= window.window_ms {
            self.advance(window, now);
        }
        let sample = &mut self.samples[self.current];
        sample.value += value;
        sample.last_event = now;
    }

    fn advance(&mut self, window: Window, now: MonotonicMs) {
        let slots = window.samples as usize + 1;
        self.current = (self.current + 1) % slots;
        if self.current >= self.samples.len() {
            self.samples.push(Sample::new(now));
        } else {
            self.samples[self.current] = Sample::new(now);
        }
    }

    fn purge_obsolete(&mut self, window: Window, now: MonotonicMs) {
        for sample in &mut self.samples {
            if elapsed(now, sample.last_event) >= window.expiry_ms() {
                *sample = Sample::new(now);
            }
        }
    }

    /// The time the rate is measured over at `now`, in milliseconds (Kafka's
    /// `Rate.windowSize`); at least 1.
    pub fn span_ms(&mut self, window: Window, now: MonotonicMs) -> u64 {
        self.purge_obsolete(window, now);
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now));
        }
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start)
            .min()
            .expect("one sample");
        let mut total = elapsed(now, oldest);
        let full = total / window.window_ms;
        let full_min = u64::from(window.samples.saturating_sub(1));
        if full < full_min {
            total += (full_min - full) * window.window_ms;
        }
        total.max(1)
    }

    /// The rate at `now`, per second (Kafka's `Rate.measure`).
    pub fn measure(&mut self, window: Window, now: MonotonicMs) -> f64 {
        self.purge_obsolete(window, now);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (self.span_ms(window, now) as f64 / 1000.0)
    }

    /// When the last record was made (`None`: never).
    pub fn last_event(&self) -> Option<MonotonicMs> {
        self.samples.iter().map(|s| s.last_event).max()
    }

    /// Records `value` at `now` and, if the rate is then over `bound` (per second), how long
    /// the client must wait for it to be back at the bound: Kafka's `Sensor.record` with its
    /// quota check, then `QuotaUtils.throttleTime`. 0 when within the bound.
    pub fn record_and_throttle_ms(
        &mut self,
        window: Window,
        value: f64,
        bound: f64,
        now: MonotonicMs,
    ) -> u64 {
        self.record(window, value, now);
        self.throttle_ms(window, bound, now)
    }

    /// How long the rate at `now` needs to fall back to `bound`; 0 when it is within it.
    pub fn throttle_ms(&mut self, window: Window, bound: f64, now: MonotonicMs) -> u64 {
        let observed = self.measure(window, now);
        if observed <= bound {
            return 0;
        }
        let span = self.span_ms(window, now) as f64;
        let throttle = ((observed - bound) / bound * span).round();
        // A bound is positive (AlterClientQuotas refuses 0 and below), so this is finite.
        if throttle.is_finite() {
            throttle as u64
        } else {
            u64::MAX
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Window = Window {
        samples: 11,
        window_ms: 1000,
    };

    fn at(ms: u64) -> MonotonicMs {
        MonotonicMs(ms)
    }

    /// A new client is measured over `samples − 1` windows: 10 s worth of the bound passes at
    /// once, the next byte is over.
    #[test]
    fn a_new_client_may_send_ten_windows_of_its_quota_at_once() {
        let mut rate = SampledRate::default();
        assert_eq!(rate.record_and_throttle_ms(W, 10_000.0, 1000.0, at(5)), 0);
        assert_eq!(rate.measure(W, at(5)), 1000.0);
        // 1000 bytes more: 11,000 over 10 s = 1,100/s; back at 1,000/s after 1 s.
        assert_eq!(rate.record_and_throttle_ms(W, 1000.0, 1000.0, at(5)), 1000);
    }

    /// Kafka's ClientQuotaManagerTest.testQuotaViolation: 400 B/s for 10 s against 500 B/s,
    /// then a spike of 2,290 B half a second later: 6,290 B over 10.5 s (9.5 s elapsed, padded
    /// by one window) is 599 B/s, (599 − 500) / 500 × 10,500 ms = 2,080 ms.
    #[test]
    fn kafkas_quota_violation_case() {
        let mut rate = SampledRate::default();
        let mut now = 0;
        for _ in 0..10 {
            assert_eq!(rate.record_and_throttle_ms(W, 400.0, 500.0, at(now)), 0);
            now += 1000;
        }
        now -= 500;
        let throttle = rate.record_and_throttle_ms(W, 2290.0, 500.0, at(now));
        assert_eq!(rate.span_ms(W, at(now)), 10_500);
        assert_eq!(throttle, 2080);
    }

    /// A window whose last record is `samples × window_ms` old counts no more; a rate with no
    /// record for that long starts afresh.
    #[test]
    fn old_windows_fall_out_of_the_rate() {
        let mut rate = SampledRate::default();
        rate.record(W, 12_000.0, at(0));
        for s in 1..=11 {
            rate.record(W, 100.0, at(s * 1000));
        }
        // The first window expired: 11 × 100 B over 10 s.
        assert!(rate.measure(W, at(11_000)) < 200.0);
        let mut idle = SampledRate::default();
        idle.record(W, 1e9, at(0));
        assert_eq!(idle.measure(W, at(11_000)), 0.0);
        assert_eq!(idle.span_ms(W, at(11_000)), 10_000);
    }

    /// The span is measured from the oldest window kept, and never below one millisecond.
    #[test]
    fn the_span_grows_past_the_padding_once_windows_fill() {
        let mut rate = SampledRate::default();
        for s in 0..=10 {
            rate.record(W, 1.0, at(s * 1000));
        }
        assert_eq!(rate.span_ms(W, at(10_500)), 10_500);
        let mut one = SampledRate::default();
        let one_window = Window {
            samples: 1,
            window_ms: 1000,
        };
        one.record(one_window, 1.0, at(7));
        assert_eq!(one.span_ms(one_window, at(7)), 1);
    }

    /// Taking a record back (a throttled Fetch's bytes) leaves the rate as it was.
    #[test]
    fn a_negative_record_takes_bytes_back() {
        let mut rate = SampledRate::default();
        rate.record(W, 5000.0, at(0));
        rate.record(W, 20_000.0, at(0));
        rate.record(W, -20_000.0, at(0));
        assert_eq!(rate.measure(W, at(0)), 500.0);
    }
}
