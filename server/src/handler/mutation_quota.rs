//! Controller mutation quotas at CreateTopics, CreatePartitions and DeleteTopics (KIP-599), as
//! Kafka's `ControllerMutationQuota` applies them: each topic, in request order, asks its
//! client's bucket for its mutations (partitions created or deleted) before the request is
//! handled; refused topics (strict versions only) are answered THROTTLING_QUOTA_EXCEEDED and
//! left out of it; a topic that fails anyway gets its mutations back. The response then
//! carries the throttle time and the connection is muted for it, as for the other quotas.
//! `validate_only` requests, and clients no `controller_mutation_rate` applies to, skip all of
//! it ([`Gate::open`] is `None`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rill_metadata::client_quota::{ClientQuotas, CONTROLLER_MUTATION_RATE};
use rill_protocol::ErrorCode;

use super::{Broker, RequestContext};
use crate::client_quotas::mutation::{MutationBuckets, Verdict};
use crate::client_quotas::Client;
use crate::security::session::Session;

/// Kafka's message for THROTTLING_QUOTA_EXCEEDED (`Errors.THROTTLING_QUOTA_EXCEEDED`), which
/// its controller answers a refused topic with.
pub const THROTTLED_MESSAGE: &str = "The throttling quota has been exceeded.";

/// One request's view of its client's bucket.
pub struct Gate<'a> {
    buckets: &'a MutationBuckets,
    quotas: Arc<ClientQuotas>,
    user: String,
    client_id: &'a str,
    session: &'a Session,
    strict: bool,
    now: Instant,
    /// The throttle at the first refusal (strict: Kafka's `lastThrottleTimeMs`).
    refused: Option<Duration>,
    /// Mutations taken per topic name, to give back for a topic that failed.
    taken: Vec<(String, u32)>,
}

impl<'a> Gate<'a> {
    /// The gate for a request of `cx`; `strict` for the versions that know
    /// THROTTLING_QUOTA_EXCEEDED. `None` (nothing to do) for `validate_only`, without client
    /// rates, or when no `controller_mutation_rate` applies to the client.
    pub fn open<B: Broker>(
        broker: &'a B,
        cx: &RequestContext<'a>,
        strict: bool,
        validate_only: bool,
    ) -> Option<Self> {
        if validate_only {
            return None;
        }
        let buckets = broker.client_rates()?.mutations();
        let quotas = super::quota_store::current(broker);
        // The fast path: no entity sets the key, so no principal to copy or entity to resolve.
        if !quotas.sets(CONTROLLER_MUTATION_RATE) {
            return None;
        }
        let user = cx.session.principal();
        let client = Client {
            user: &user,
            client_id: cx.client_id,
        };
        MutationBuckets::bound(&quotas, client)?;
        Some(Gate {
            buckets,
            quotas,
            user,
            client_id: cx.client_id,
            session: cx.session,
            strict,
            now: broker.now(),
            refused: None,
            taken: Vec::new(),
        })
    }

    fn client(&self) -> Client<'_> {
        Client {
            user: &self.user,
            client_id: self.client_id,
        }
    }

    /// Whether topic `name`, of `mutations`, goes ahead (its mutations taken); `false`: answer
    /// it [`throttled`]. A topic of no mutations (one that will fail: unknown, no growth) is
    /// let through unmeasured, to get its own error.
    pub fn admit(&mut self, name: &str, mutations: u32) -> bool {
        if mutations == 0 {
            return true;
        }
        let client = self.client();
        match self
            .buckets
            .admit(&self.quotas, client, mutations, self.strict, self.now)
        {
            Verdict::Accepted(_) => {
                self.taken.push((name.to_string(), mutations));
                true
            }
            Verdict::Throttled(throttle) => {
                self.refused.get_or_insert(throttle);
                false
            }
        }
    }

    /// Gives back what topic `name` took: it failed, so it mutated nothing.
    pub fn failed(&mut self, name: &str) {
        if let Some(i) = self.taken.iter().position(|(n, _)| n == name) {
            let (_, mutations) = self.taken.swap_remove(i);
            let client = self.client();
            self.buckets
                .refund(&self.quotas, client, mutations, self.now);
        }
    }

    /// The response's throttle time, the connection muted for it: strict, the throttle at the
    /// first refusal (none without one, as Kafka's `StrictControllerMutationQuota`);
    /// permissive, how long the bucket now is below 0.
    pub fn finish(self) -> i32 {
        let throttle = if self.strict {
            self.refused.unwrap_or(Duration::ZERO)
        } else {
            self.buckets.throttle(&self.quotas, self.client(), self.now)
        };
        if throttle.is_zero() {
            return 0;
        }
        self.session.mute_until(self.now + throttle);
        i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX)
    }
}

/// Topic `name`'s partition count (`None`: no such topic): a cluster's from its image, a
/// single node's from its registry, the mutations a deletion or growth is measured against.
pub fn partitions_of<B: Broker>(broker: &B, name: &str) -> Option<i32> {
    match broker.cluster() {
        Some(cluster) => cluster
            .image()
            .topics
            .get(name)
            .map(|t| i32::try_from(t.partitions.len()).unwrap_or(i32::MAX)),
        None => broker.topics().get(name).map(|m| m.partitions),
    }
}

/// The name of the topic of id `id`, as [`partitions_of`] finds topics.
pub fn name_of<B: Broker>(broker: &B, id: uuid::Uuid) -> Option<String> {
    match broker.cluster() {
        Some(cluster) => cluster.image().topic_by_id(id).map(|t| t.name.clone()),
        None => broker.topics().by_id(id).map(|(name, _)| name),
    }
}

/// THROTTLING_QUOTA_EXCEEDED's code and Kafka's message, for a refused topic's result.
pub fn throttled() -> (i16, &'static str) {
    (ErrorCode::ThrottlingQuotaExceeded.code(), THROTTLED_MESSAGE)
}
