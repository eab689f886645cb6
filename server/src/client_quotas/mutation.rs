//! Controller mutation quotas (KIP-599, `controller_mutation_rate`): one [`TokenBucket`] per
//! quota entity, process-wide as the byte rates are, resolved by Kafka's precedence
//! (`ClientQuotas::resolve`). A mutation is one partition created or deleted.
//!
//! Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic is refused while
//! the bucket is below 0, else its mutations are taken (possibly driving it below 0). Permissive
//! (older versions, whose clients do not know THROTTLING_QUOTA_EXCEEDED): every topic is taken,
//! and only the throttle time tells the client (Kafka's `Strict`/`PermissiveControllerMutationQuota`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rill_metadata::client_quota::{ClientQuotas, CONTROLLER_MUTATION_RATE};

use super::rate::{MonotonicMs, Window};
use super::token_bucket::{burst, TokenBucket};
use super::{Client, SENSORS_MAX};

/// What a topic's mutations met.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Taken; the throttle the bucket asks for now (0 unless it is below 0).
    Accepted(Duration),
    /// Refused (strict mode, the bucket was below 0); how long until it is back at 0.
    Throttled(Duration),
}

#[derive(Debug, Default)]
struct Buckets {
    /// Each bucket with the quota it was last used with (to tell when it is full again).
    by_entity: HashMap<(String, String), (TokenBucket, f64)>,
    /// When idle buckets were last dropped.
    swept: Option<MonotonicMs>,
}

/// Every client's mutation tokens, shared by all shards.
#[derive(Debug)]
pub struct MutationBuckets {
    window: Window,
    epoch: Instant,
    buckets: Mutex<Buckets>,
}

impl MutationBuckets {
    /// Full buckets over `window` (`controller.quota.window.num` × `.size.seconds`).
    pub fn new(window: Window) -> Self {
        MutationBuckets {
            window,
            epoch: Instant::now(),
            buckets: Mutex::new(Buckets::default()),
        }
    }

    /// The quota that applies to `client` (`None`: none does, nothing to measure). The fast
    /// path: without an entity setting `controller_mutation_rate` this is one scan of the
    /// (usually empty) quota map.
    pub fn bound(quotas: &ClientQuotas, client: Client<'_>) -> Option<f64> {
        if !quotas.sets(CONTROLLER_MUTATION_RATE) {
            return None;
        }
        quotas
            .resolve(CONTROLLER_MUTATION_RATE, client.user, client.client_id)
            .bound
    }

    fn millis(&self, now: Instant) -> MonotonicMs {
        MonotonicMs(now.saturating_duration_since(self.epoch).as_millis() as u64)
    }

    /// Asks for `mutations` on behalf of `client` at `now`, strictly or not (module doc).
    /// Without a quota for `client` everything is accepted unmeasured.
    pub fn admit(
        &self,
        quotas: &ClientQuotas,
        client: Client<'_>,
        mutations: u32,
        strict: bool,
        now: Instant,
    ) -> Verdict {
        let Some((key, quota)) = entity(quotas, client) else {
            return Verdict::Accepted(Duration::ZERO);
        };
        let now = self.millis(now);
        let window = self.window;
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.get(key, quota, window, now);
        if strict && bucket.tokens(window, quota, now) < 0.0 {
            let throttle = bucket.throttle_ms(window, quota, now);
            return Verdict::Throttled(Duration::from_millis(throttle));
        }
        bucket.record(window, quota, f64::from(mutations), now);
        Verdict::Accepted(Duration::from_millis(
            bucket.throttle_ms(window, quota, now),
        ))
    }

    /// Gives back `mutations` taken for a topic that then failed (Kafka takes none for it:
    /// it counts a topic's partitions only once the topic is valid).
    pub fn refund(&self, quotas: &ClientQuotas, client: Client<'_>, mutations: u32, now: Instant) {
        let Some((key, quota)) = entity(quotas, client) else {
            return;
        };
        let now = self.millis(now);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.get(key, quota, self.window, now).record(
            self.window,
            quota,
            -f64::from(mutations),
            now,
        );
    }

    /// How long `client` waits now for its bucket to be back at 0 (0: not below it).
    pub fn throttle(&self, quotas: &ClientQuotas, client: Client<'_>, now: Instant) -> Duration {
        let Some((key, quota)) = entity(quotas, client) else {
            return Duration::ZERO;
        };
        let now = self.millis(now);
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.get(key, quota, self.window, now);
        Duration::from_millis(bucket.throttle_ms(self.window, quota, now))
    }

    /// Buckets held now (for tests and the bound).
    pub fn bucket_count(&self) -> usize {
        self.buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .by_entity
            .len()
    }
}

/// The bucket `client` draws from (Kafka's metric tags) and its quota, if one applies.
fn entity(quotas: &ClientQuotas, client: Client<'_>) -> Option<((String, String), f64)> {
    if !quotas.sets(CONTROLLER_MUTATION_RATE) {
        return None;
    }
    let resolved = quotas.resolve(CONTROLLER_MUTATION_RATE, client.user, client.client_id);
    let quota = resolved.bound?;
    Some(((resolved.user_tag, resolved.client_id_tag), quota))
}

impl Buckets {
    /// `key`'s bucket, made (full) if new. A full bucket is as a new one, so full ones are
    /// dropped, once per window (a bucket below 0 is kept until it has refilled).
    fn get(
        &mut self,
        key: (String, String),
        quota: f64,
        window: Window,
        now: MonotonicMs,
    ) -> &mut TokenBucket {
        if self
            .swept
            .is_none_or(|at| now.0.saturating_sub(at.0) >= window.expiry_ms())
        {
            self.by_entity.retain(|_, (bucket, quota)| {
                bucket.tokens(window, *quota, now) < burst(window, *quota)
            });
            self.swept = Some(now);
        }
        // Past the bound new entities share one bucket: a flood of client ids stays limited.
        let key = if self.by_entity.len() >= SENSORS_MAX && !self.by_entity.contains_key(&key) {
            (String::new(), "<overflow>".to_string())
        } else {
            key
        };
        let entry = self
            .by_entity
            .entry(key)
            .or_insert_with(|| (TokenBucket::default(), quota));
        entry.1 = quota;
        &mut entry.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_metadata::client_quota::{decide_alter, Alteration, QuotaValue};

    /// 2 windows of 1 s: a quota of 2/s has a burst of 4.
    const W: Window = Window {
        samples: 2,
        window_ms: 1000,
    };

    fn quota(client_id: &str, value: f64) -> ClientQuotas {
        let mut quotas = ClientQuotas::default();
        let alteration = Alteration {
            entity: [("client-id".to_string(), Some(client_id.to_string()))].into(),
            ops: vec![(
                CONTROLLER_MUTATION_RATE.to_string(),
                Some(QuotaValue(value)),
            )],
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
    fn strict_refuses_once_below_zero_and_permissive_only_throttles() {
        let buckets = MutationBuckets::new(W);
        let quotas = quota("admin", 2.0);
        let t0 = Instant::now();
        let ask = |n, strict| buckets.admit(&quotas, client("admin"), n, strict, t0);
        assert_eq!(ask(3, true), Verdict::Accepted(Duration::ZERO));
        // One token left: a topic of 3 partitions crosses and is taken whole.
        assert_eq!(ask(3, true), Verdict::Accepted(Duration::from_millis(1000)));
        assert_eq!(
            ask(1, true),
            Verdict::Throttled(Duration::from_millis(1000))
        );
        // Permissive takes it anyway and throttles longer.
        assert_eq!(
            ask(1, false),
            Verdict::Accepted(Duration::from_millis(1500))
        );
        let later = t0 + Duration::from_millis(1500);
        let again = buckets.admit(&quotas, client("admin"), 1, true, later);
        assert_eq!(again, Verdict::Accepted(Duration::from_millis(500)));
    }

    #[test]
    fn a_refund_gives_the_tokens_back() {
        let buckets = MutationBuckets::new(W);
        let quotas = quota("admin", 2.0);
        let t0 = Instant::now();
        buckets.admit(&quotas, client("admin"), 6, true, t0);
        assert_eq!(
            buckets.throttle(&quotas, client("admin"), t0),
            Duration::from_millis(1000)
        );
        buckets.refund(&quotas, client("admin"), 6, t0);
        assert_eq!(
            buckets.throttle(&quotas, client("admin"), t0),
            Duration::ZERO
        );
    }

    #[test]
    fn clients_without_the_quota_are_not_measured() {
        let buckets = MutationBuckets::new(W);
        let t0 = Instant::now();
        let none = ClientQuotas::default();
        let verdict = buckets.admit(&none, client("a"), 1000, true, t0);
        assert_eq!(verdict, Verdict::Accepted(Duration::ZERO));
        let quotas = quota("admin", 2.0);
        let other = buckets.admit(&quotas, client("other"), 1000, true, t0);
        assert_eq!(other, Verdict::Accepted(Duration::ZERO));
        assert_eq!(buckets.bucket_count(), 0);
        assert!(MutationBuckets::bound(&quotas, client("other")).is_none());
        assert_eq!(MutationBuckets::bound(&quotas, client("admin")), Some(2.0));
    }

    #[test]
    fn full_buckets_are_dropped_and_a_negative_one_is_kept() {
        let buckets = MutationBuckets::new(W);
        let quotas = quota("admin", 2.0);
        let t0 = Instant::now();
        buckets.admit(&quotas, client("admin"), 1, true, t0);
        // 10 below 0: 7 s to be full again (6 s refilled by then).
        buckets.admit(&quotas, client("admin"), 13, true, t0);
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(
            buckets.throttle(&quotas, client("other"), at(3)),
            Duration::ZERO
        );
        assert_eq!(buckets.bucket_count(), 1);
        assert_eq!(
            buckets.throttle(&quotas, client("admin"), at(3)),
            Duration::from_millis(2000)
        );
        // Full at 7 s: the sweep at 8 s drops it.
        let quotas_other = quota("other", 2.0);
        buckets.admit(&quotas_other, client("other"), 1, true, at(8));
        assert_eq!(buckets.bucket_count(), 1);
        assert_eq!(
            buckets.admit(&quotas, client("admin"), 4, true, at(8)),
            Verdict::Accepted(Duration::ZERO)
        );
    }
}
