//! Client quota enforcement (KIP-13, KIP-124), process-wide: every shard serves connections of
//! the same clients, so their measured rates are shared by all shards in one [`ClientRates`],
//! behind one mutex taken once per Produce or Fetch request (never per record), and only while
//! some entity sets that kind of quota.
//!
//! - [`rate`]: one sensor's windows and Kafka's throttle time (runtime-free, handed the time).
//! - [`token_bucket`], [`mutation`]: controller mutation quotas (KIP-599), a token bucket per
//!   entity, kept beside the rates ([`ClientRates::mutations`]).
//! - [`ClientRates`]: the sensors by quota kind and Kafka's metric tags (which connections
//!   share a rate: `rill_metadata::client_quota::ClientQuotas::resolve`).
//!
//! What is measured, as Kafka's `KafkaApis` records it: a Produce's request size (its frame,
//! acks=0 included); a Fetch's response size; and for `request_percentage` (KIP-124) the
//! time each request spends on a shard's thread, as a percentage of one thread
//! ([`thread_time`]). A throttled client gets `throttle_time_ms` in the response and its
//! connection reads nothing more until the time is over (KIP-219).

pub mod mutation;
pub mod rate;
pub mod thread_time;
pub mod token_bucket;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rill_metadata::client_quota::{
    ClientQuotas, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};

use rate::{MonotonicMs, SampledRate, Window};

/// Sensors kept at most; past it, new clients share one overflow sensor of their kind (a flood
/// of client ids stays bounded and throttled, not unmeasured).
pub const SENSORS_MAX: usize = 100_000;

/// Which quota a request counts against.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    /// `producer_byte_rate`: Produce request bytes.
    Produce,
    /// `consumer_byte_rate`: Fetch response bytes.
    Fetch,
    /// `request_percentage`: a request's thread time, in percent of one thread-second
    /// ([`thread_time::percent`]).
    Request,
}

impl QuotaKind {
    /// The quota key that sets its bound.
    pub fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => PRODUCER_BYTE_RATE,
            QuotaKind::Fetch => CONSUMER_BYTE_RATE,
            QuotaKind::Request => REQUEST_PERCENTAGE,
        }
    }
}

/// Who a request is from, as quotas see it.
#[derive(Copy, Clone, Debug)]
pub struct Client<'a> {
    /// The principal's name (`ANONYMOUS` on PLAINTEXT).
    pub user: &'a str,
    /// The request header's client id.
    pub client_id: &'a str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SensorKey {
    kind: QuotaKind,
    user_tag: String,
    client_id_tag: String,
}

#[derive(Debug, Default)]
struct Sensors {
    by_key: HashMap<SensorKey, SampledRate>,
    /// When idle sensors were last dropped.
    swept: Option<MonotonicMs>,
}

/// Every client's measured rates, shared by all shards.
#[derive(Debug)]
pub struct ClientRates {
    window: Window,
    epoch: Instant,
    sensors: Mutex<Sensors>,
    mutations: mutation::MutationBuckets,
}

impl ClientRates {
    /// No rate measured yet; `window` is Kafka's `quota.window.num` × `quota.window.size.seconds`.
    pub fn new(window: Window) -> Self {
        ClientRates {
            window,
            epoch: Instant::now(),
            sensors: Mutex::new(Sensors::default()),
            mutations: mutation::MutationBuckets::new(Window::default()),
        }
    }

    /// The same, its controller mutation buckets over `window` (Kafka's own settings for them,
    /// `controller.quota.window.num` and `controller.quota.window.size.seconds`).
    pub fn with_controller_window(mut self, window: Window) -> Self {
        self.mutations = mutation::MutationBuckets::new(window);
        self
    }

    /// The controller mutation buckets (KIP-599).
    pub fn mutations(&self) -> &mutation::MutationBuckets {
        &self.mutations
    }

    fn millis(&self, now: Instant) -> MonotonicMs {
        MonotonicMs(now.saturating_duration_since(self.epoch).as_millis() as u64)
    }

    /// Records `bytes` of `kind` for `client` at `now` and returns how long it must be
    /// throttled (zero within its quota, or when no quota of `kind` applies to it). Nothing is
    /// recorded while no entity sets a quota of `kind` (Kafka's `quotasEnabled`).
    pub fn record(
        &self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        client: Client<'_>,
        bytes: u64,
        now: Instant,
    ) -> Duration {
        self.record_value(quotas, kind, client, bytes as f64, now)
    }

    /// [`Self::record`] of a value that is not a byte count (a request quota's percent).
    pub fn record_value(
        &self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        client: Client<'_>,
        value: f64,
        now: Instant,
    ) -> Duration {
        debug_assert!(
            value.is_finite() && value >= 0.0,
            "a recorded value: {value}"
        );
        if !quotas.sets(kind.key()) {
            return Duration::ZERO;
        }
        let (key, bound) = sensor_key(quotas, kind, client);
        let now = self.millis(now);
        let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
        let sensor = sensors.get(key, self.window, now);
        let throttle_ms = match bound {
            Some(bound) => sensor.record_and_throttle_ms(self.window, value, bound, now),
            None => {
                sensor.record(self.window, value, now);
                0
            }
        };
        Duration::from_millis(throttle_ms)
    }

    /// The most bytes of `kind` `client` may take in one request: Kafka's
    /// `getMaxValueInQuotaWindow`, its quota over all samples but the current one (`None`
    /// without a quota of `kind` for it). A consumer Fetch's `max_bytes` is capped to it, so
    /// one response cannot carry far more than the window allows.
    pub fn max_in_window(
        &self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        client: Client<'_>,
    ) -> Option<u64> {
        if !quotas.sets(kind.key()) {
            return None;
        }
        let bound = quotas
            .resolve(kind.key(), client.user, client.client_id)
            .bound?;
        let window_s = self.window.window_ms as f64 / 1000.0;
        let max = bound * f64::from(self.window.samples.saturating_sub(1)) * window_s;
        // f64 -> u64 saturates; a quota is finite and positive (AlterClientQuotas checks).
        Some(max as u64)
    }

    /// Takes back `bytes` recorded for `client` (a throttled Fetch whose data is not sent).
    pub fn unrecord(
        &self,
        quotas: &ClientQuotas,
        kind: QuotaKind,
        client: Client<'_>,
        bytes: u64,
        now: Instant,
    ) {
        if !quotas.sets(kind.key()) {
            return;
        }
        let (key, _) = sensor_key(quotas, kind, client);
        let now = self.millis(now);
        let mut sensors = self.sensors.lock().unwrap_or_else(|e| e.into_inner());
        sensors
            .get(key, self.window, now)
            .record(self.window, -(bytes as f64), now);
    }

    /// Sensors held now (for tests and the bound).
    pub fn sensor_count(&self) -> usize {
        self.sensors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_key
            .len()
    }
}

/// The sensor `client`'s `kind` is measured in (Kafka's metric tags) and its bound, if any.
fn sensor_key(
    quotas: &ClientQuotas,
    kind: QuotaKind,
    client: Client<'_>,
) -> (SensorKey, Option<f64>) {
    let resolved = quotas.resolve(kind.key(), client.user, client.client_id);
    let key = SensorKey {
        kind,
        user_tag: resolved.user_tag,
        client_id_tag: resolved.client_id_tag,
    };
    (key, resolved.bound)
}

impl Sensors {
    /// `key`'s sensor, made if new. Sensors idle for a whole quota window are dropped first,
    /// once per window: with every sample expired such a sensor measures as a new one would
    /// (Kafka keeps them an hour for its metrics; the rate is the same).
    fn get(&mut self, key: SensorKey, window: Window, now: MonotonicMs) -> &mut SampledRate {
        let due = self
            .swept
            .is_none_or(|at| now.0.saturating_sub(at.0) >= window.expiry_ms());
        if due {
            let expiry = window.expiry_ms();
            self.by_key.retain(|_, rate| {
                rate.last_event()
                    .is_some_and(|last| now.0.saturating_sub(last.0) < expiry)
            });
            self.swept = Some(now);
        }
        let key = if self.by_key.len() >= SENSORS_MAX && !self.by_key.contains_key(&key) {
            SensorKey {
                kind: key.kind,
                user_tag: String::new(),
                client_id_tag: "<overflow>".to_string(),
            }
        } else {
            key
        };
        self.by_key.entry(key).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_metadata::client_quota::{decide_alter, Alteration, QuotaValue};

    fn quota(client_id: &str, key: &str, value: f64) -> ClientQuotas {
        let mut quotas = ClientQuotas::default();
        let alteration = Alteration {
            entity: [("client-id".to_string(), Some(client_id.to_string()))].into(),
            ops: vec![(key.to_string(), Some(QuotaValue(value)))],
        };
        let (_, changes) = decide_alter(&quotas, &[alteration]);
        rill_metadata::client_quota::apply(&mut quotas, &changes);
        quotas
    }

    fn client(client_id: &str) -> Client<'_> {
        Client {
            user: "ANONYMOUS",
            client_id,
        }
    }

    #[test]
    fn only_the_client_with_a_quota_is_throttled() {
        let rates = ClientRates::new(Window::default());
        let quotas = quota("slow", PRODUCER_BYTE_RATE, 1000.0);
        let t0 = Instant::now();
        let produce = |id, bytes| rates.record(&quotas, QuotaKind::Produce, client(id), bytes, t0);
        assert_eq!(produce("slow", 10_000), Duration::ZERO);
        assert_eq!(produce("slow", 1000), Duration::from_millis(1000));
        assert_eq!(produce("fast", 1_000_000), Duration::ZERO);
        // A Fetch quota is another sensor, and none is set.
        let fetch = rates.record(&quotas, QuotaKind::Fetch, client("slow"), 1 << 30, t0);
        assert_eq!(fetch, Duration::ZERO);
    }

    #[test]
    fn thread_time_over_a_request_percentage_is_throttled() {
        let rates = ClientRates::new(Window::default());
        // 10% of one thread: a new client's span is the window's 10 s padding, so 1 thread-second
        // is at the bound.
        let quotas = quota("busy", REQUEST_PERCENTAGE, 10.0);
        let t0 = Instant::now();
        let spend = |id, ms| {
            let percent = thread_time::percent(Duration::from_millis(ms));
            rates.record_value(&quotas, QuotaKind::Request, client(id), percent, t0)
        };
        assert_eq!(spend("busy", 1000), Duration::ZERO);
        // 1.1 s of thread time over a 10 s span is 11%: back at 10% after 1 s more.
        assert_eq!(spend("busy", 100), Duration::from_millis(1000));
        assert_eq!(spend("idle", 5000), Duration::ZERO);
        // The byte quotas are other sensors, and none is set.
        let bytes = rates.record(&quotas, QuotaKind::Produce, client("busy"), 1 << 30, t0);
        assert_eq!(bytes, Duration::ZERO);
    }

    #[test]
    fn nothing_is_recorded_without_a_quota_of_the_kind() {
        let rates = ClientRates::new(Window::default());
        let none = ClientQuotas::default();
        let t0 = Instant::now();
        rates.record(&none, QuotaKind::Produce, client("a"), 1, t0);
        assert_eq!(rates.sensor_count(), 0);
    }

    #[test]
    fn idle_sensors_are_dropped_after_a_window() {
        let rates = ClientRates::new(Window::default());
        let quotas = quota("x", PRODUCER_BYTE_RATE, 1000.0);
        let t0 = Instant::now();
        for i in 0..100 {
            let id = format!("c{i}");
            rates.record(&quotas, QuotaKind::Produce, client(&id), 1, t0);
        }
        assert_eq!(rates.sensor_count(), 100);
        let later = t0 + Duration::from_secs(12);
        rates.record(&quotas, QuotaKind::Produce, client("x"), 1, later);
        assert_eq!(rates.sensor_count(), 1);
    }

    #[test]
    fn an_unrecorded_fetch_does_not_count() {
        let rates = ClientRates::new(Window::default());
        let quotas = quota("c", CONSUMER_BYTE_RATE, 1000.0);
        let t0 = Instant::now();
        let over = rates.record(&quotas, QuotaKind::Fetch, client("c"), 20_000, t0);
        assert!(over > Duration::ZERO);
        rates.unrecord(&quotas, QuotaKind::Fetch, client("c"), 20_000, t0);
        let within = rates.record(&quotas, QuotaKind::Fetch, client("c"), 5_000, t0);
        assert_eq!(within, Duration::ZERO);
    }
}
