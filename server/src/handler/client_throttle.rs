//! Client byte-rate quotas at dispatch (KIP-13, KIP-124, KIP-219), as Kafka's `KafkaApis`
//! applies them around the handler:
//!
//! | request | measured | over the quota |
//! |---------|----------|----------------|
//! | Produce (acks=0 included) | the request's size | the response carries `throttle_time_ms`; the connection is muted for that long |
//! | Fetch from a consumer | the response's size (its record bytes, and [`PARTITION_OVERHEAD_BYTES`] per partition) | the bytes are taken back and the response is empty but for `throttle_time_ms`; the connection is muted for that long |
//!
//! | any request but the exempt | its thread time, in percent of one thread (`request_percentage`, KIP-124) | `throttle_time_ms` in the response (the larger of both throttles for a Produce or Fetch; a Fetch is then answered empty); the connection is muted for that long |
//!
//! Exempt, as Kafka exempts them: a follower's Fetch (Kafka's replication quotas are other
//! settings), WriteTxnMarkers (a broker's), SaslHandshake and SaslAuthenticate (their
//! responses have no throttle time). The rates are the process-wide [`ClientRates`]; with no
//! entity setting a quota of that kind, nothing is measured.

use std::time::Duration;

use rill_metadata::client_quota::ClientQuotas;
use rill_protocol::kafka_protocol::messages::{ApiKey, FetchResponse, RequestKind, ResponseKind};

use super::{Answer, Broker};
use crate::client_quotas::{thread_time, Client, ClientRates, QuotaKind};
use crate::security::session::Session;

/// What a Fetch response's size counts per partition beside its record bytes: its index,
/// error code, offsets and lengths (Kafka measures the encoded response).
pub const PARTITION_OVERHEAD_BYTES: u64 = 64;

/// Whether `body`'s thread time counts against a `request_percentage` quota: some entity sets
/// one, and the request is not exempt (module doc).
pub fn request_quota_applies<B: Broker>(broker: &B, api: ApiKey, body: &RequestKind) -> bool {
    let exempt = match body {
        RequestKind::Fetch(_) => kind(body).is_none(),
        _ => matches!(
            api,
            ApiKey::WriteTxnMarkers | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
        ),
    };
    !exempt
        && broker.client_rates().is_some()
        && super::quota_store::current(broker).sets(QuotaKind::Request.key())
}

/// The byte-rate quota `body` counts against, if any.
pub fn kind(body: &RequestKind) -> Option<QuotaKind> {
    match body {
        RequestKind::Produce(_) => Some(QuotaKind::Produce),
        RequestKind::Fetch(f) => {
            let follower = f.replica_id.0 >= 0 || f.replica_state.replica_id.0 >= 0;
            (!follower).then_some(QuotaKind::Fetch)
        }
        _ => None,
    }
}

/// Caps a consumer Fetch's `max_bytes` (v3+) to what its quota window allows, as Kafka's
/// `KafkaApis.handleFetchRequest` does (`ClientRates::max_in_window`).
pub fn cap_fetch<B: Broker>(
    broker: &B,
    session: &Session,
    client_id: &str,
    version: i16,
    body: &mut RequestKind,
) {
    let (RequestKind::Fetch(fetch), Some(rates)) = (body, broker.client_rates()) else {
        return;
    };
    if version < 3 {
        return;
    }
    let quotas = super::quota_store::current(broker);
    let user = session.principal();
    let client = Client {
        user: &user,
        client_id,
    };
    if let Some(max) = rates.max_in_window(&quotas, QuotaKind::Fetch, client) {
        let max = i32::try_from(max).unwrap_or(i32::MAX).max(1);
        fetch.max_bytes = fetch.max_bytes.min(max);
    }
}

/// Records what `answer` counts against its quotas and throttles the connection if it is over
/// one: the table in the module doc. `request_bytes` is the request frame's size (without its
/// size prefix, as Kafka's `sizeInBytes`); `thread_time` the request's time on the shard's
/// thread when a request quota applies to it ([`request_quota_applies`]).
#[allow(clippy::too_many_arguments)] // one call site, dispatch; each is a different measure
pub fn apply<B: Broker>(
    broker: &B,
    session: &Session,
    client_id: &str,
    kind: Option<QuotaKind>,
    request_bytes: usize,
    thread_time: Option<Duration>,
    answer: Answer,
) -> Answer {
    // Most requests count against no quota: nothing to look up for them.
    let (true, Some(rates)) = (
        kind.is_some() || thread_time.is_some(),
        broker.client_rates(),
    ) else {
        return answer;
    };
    let quotas = super::quota_store::current(broker);
    let user = session.principal();
    let client = Client {
        user: &user,
        client_id,
    };
    let now = broker.now();
    // Kafka records the request's time first and throttles by the larger of both.
    let request_throttle = thread_time.map_or(Duration::ZERO, |spent| {
        let percent = thread_time::percent(spent);
        let throttle = rates.record_value(&quotas, QuotaKind::Request, client, percent, now);
        limited(session, &quotas, QuotaKind::Request, client);
        throttle
    });
    let measured = Measured {
        rates,
        quotas: &quotas,
        session,
        client,
        now,
        request_throttle,
    };
    match (kind, answer) {
        (
            Some(QuotaKind::Produce),
            answer @ (Answer::Body(ResponseKind::Produce(_)) | Answer::Silent),
        ) => measured.produce(request_bytes, answer),
        (Some(QuotaKind::Fetch), Answer::Fetch(fetched)) => measured.fetch(fetched),
        (_, answer) => measured.throttled(request_throttle, answer),
    }
}

/// One request's client, its quotas and the request quota's throttle, for the byte quotas.
struct Measured<'a> {
    rates: &'a ClientRates,
    quotas: &'a ClientQuotas,
    session: &'a Session,
    client: Client<'a>,
    now: std::time::Instant,
    request_throttle: Duration,
}

impl Measured<'_> {
    fn produce(&self, request_bytes: usize, answer: Answer) -> Answer {
        let bytes = request_bytes as u64;
        let throttle = self.rates.record(
            self.quotas,
            QuotaKind::Produce,
            self.client,
            bytes,
            self.now,
        );
        limited(self.session, self.quotas, QuotaKind::Produce, self.client);
        self.throttled(throttle.max(self.request_throttle), answer)
    }

    fn fetch(&self, fetched: super::fetch::Fetched) -> Answer {
        let partitions: usize = fetched
            .response
            .responses
            .iter()
            .map(|t| t.partitions.len())
            .sum();
        let records: usize = fetched
            .records
            .iter()
            .flatten()
            .map(|chunk| chunk.len())
            .sum();
        let bytes = records as u64 + partitions as u64 * PARTITION_OVERHEAD_BYTES;
        let (rates, quotas, client, now) = (self.rates, self.quotas, self.client, self.now);
        let throttle = rates.record(quotas, QuotaKind::Fetch, client, bytes, now);
        limited(self.session, quotas, QuotaKind::Fetch, client);
        let throttle = throttle.max(self.request_throttle);
        if throttle.is_zero() {
            return Answer::Fetch(fetched);
        }
        // Kafka takes the bytes back and answers empty (over either quota): the client asks
        // again from the same offsets once the throttle is over.
        rates.unrecord(quotas, QuotaKind::Fetch, client, bytes, now);
        self.session.mute_until(now + throttle);
        let response = FetchResponse::default()
            .with_throttle_time_ms(wire_ms(throttle))
            .with_error_code(0)
            .with_session_id(0);
        Answer::Body(ResponseKind::Fetch(response))
    }

    /// `answer` with `throttle` in its `throttle_time_ms` (if it has one and it is smaller),
    /// and the connection muted for that long.
    fn throttled(&self, throttle: Duration, mut answer: Answer) -> Answer {
        if throttle.is_zero() {
            return answer;
        }
        self.session.mute_until(self.now + throttle);
        if let Answer::Body(body) | Answer::Final(body) = &mut answer {
            set_throttle_time(body, wire_ms(throttle));
        }
        answer
    }
}

/// Raises a response's `throttle_time_ms` to `ms`; the three responses without one
/// (SaslHandshake, SaslAuthenticate, WriteTxnMarkers) are exempt from throttling anyway.
macro_rules! throttle_setter {
    ($($name:ident),* $(,)?) => {
        fn set_throttle_time(body: &mut ResponseKind, ms: i32) {
            match body {
                $(ResponseKind::$name(r) => r.throttle_time_ms = r.throttle_time_ms.max(ms),)*
                _ => {}
            }
        }
    };
}

throttle_setter!(
    Produce,
    Fetch,
    ListOffsets,
    Metadata,
    OffsetCommit,
    OffsetFetch,
    FindCoordinator,
    JoinGroup,
    Heartbeat,
    LeaveGroup,
    SyncGroup,
    DescribeGroups,
    ListGroups,
    ApiVersions,
    CreateTopics,
    DeleteTopics,
    DeleteRecords,
    InitProducerId,
    OffsetForLeaderEpoch,
    AddPartitionsToTxn,
    AddOffsetsToTxn,
    EndTxn,
    TxnOffsetCommit,
    DescribeAcls,
    CreateAcls,
    DeleteAcls,
    DescribeConfigs,
    AlterConfigs,
    AlterReplicaLogDirs,
    DescribeLogDirs,
    CreatePartitions,
    DeleteGroups,
    ElectLeaders,
    IncrementalAlterConfigs,
    AlterPartitionReassignments,
    ListPartitionReassignments,
    OffsetDelete,
    DescribeClientQuotas,
    AlterClientQuotas,
    DescribeUserScramCredentials,
    AlterUserScramCredentials,
    DescribeCluster,
    DescribeProducers,
    DescribeTransactions,
    ListTransactions,
    ConsumerGroupHeartbeat,
    ConsumerGroupDescribe,
    DescribeTopicPartitions,
    ShareGroupHeartbeat,
    ShareGroupDescribe,
    ShareFetch,
    ShareAcknowledge,
    DescribeShareGroupOffsets,
    AlterShareGroupOffsets,
    DeleteShareGroupOffsets,
);

/// Marks the connection quota-limited once a quota of `kind` applies to its client: its
/// Produce and Fetch requests are then served one at a time (`crate::net::connection`).
fn limited(session: &Session, quotas: &ClientQuotas, kind: QuotaKind, client: Client<'_>) {
    if session.quota_limited() || !quotas.sets(kind.key()) {
        return;
    }
    if quotas
        .resolve(kind.key(), client.user, client.client_id)
        .bound
        .is_some()
    {
        session.set_quota_limited();
    }
}

/// A throttle as the wire's `throttle_time_ms` (an INT32).
fn wire_ms(throttle: Duration) -> i32 {
    i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX)
}
