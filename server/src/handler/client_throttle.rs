//! Client byte-rate quotas at dispatch (KIP-13, KIP-124, KIP-219), as Kafka's `KafkaApis`
//! applies them around the handler:
//!
//! | request | measured | over the quota |
//! |---------|----------|----------------|
//! | Produce (acks=0 included) | the request's size | the response carries `throttle_time_ms`; the connection is muted for that long |
//! | Fetch from a consumer | the response's size (its record bytes, and [`PARTITION_OVERHEAD_BYTES`] per partition) | the bytes are taken back and the response is empty but for `throttle_time_ms`; the connection is muted for that long |
//!
//! A follower's Fetch is never throttled (Kafka's replication quotas are other settings). The
//! rates are the process-wide [`ClientRates`]; with no entity setting a quota of that kind,
//! nothing is measured.

use std::time::Duration;

use rill_metadata::client_quota::ClientQuotas;
use rill_protocol::kafka_protocol::messages::{FetchResponse, RequestKind, ResponseKind};

use super::{Answer, Broker};
use crate::client_quotas::{Client, ClientRates, QuotaKind};
use crate::security::session::Session;

/// What a Fetch response's size counts per partition beside its record bytes: its index,
/// error code, offsets and lengths (Kafka measures the encoded response).
pub const PARTITION_OVERHEAD_BYTES: u64 = 64;

/// The quota `body` counts against, if any.
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

/// Records what `answer` counts against its quota and throttles the connection if it is over:
/// the table in the module doc. `request_bytes` is the request frame's size (without its size
/// prefix, as Kafka's `sizeInBytes`).
pub fn apply<B: Broker>(
    broker: &B,
    session: &Session,
    client_id: &str,
    kind: Option<QuotaKind>,
    request_bytes: usize,
    answer: Answer,
) -> Answer {
    let (Some(kind), Some(rates)) = (kind, broker.client_rates()) else {
        return answer;
    };
    match (kind, answer) {
        (
            QuotaKind::Produce,
            answer @ (Answer::Body(ResponseKind::Produce(_)) | Answer::Silent),
        ) => produce(broker, rates, session, client_id, request_bytes, answer),
        (QuotaKind::Fetch, Answer::Fetch(fetched)) => {
            fetch(broker, rates, session, client_id, fetched)
        }
        (_, answer) => answer,
    }
}

fn produce<B: Broker>(
    broker: &B,
    rates: &ClientRates,
    session: &Session,
    client_id: &str,
    request_bytes: usize,
    mut answer: Answer,
) -> Answer {
    let quotas = super::quota_store::current(broker);
    let user = session.principal();
    let client = Client {
        user: &user,
        client_id,
    };
    let now = broker.now();
    let throttle = rates.record(
        &quotas,
        QuotaKind::Produce,
        client,
        request_bytes as u64,
        now,
    );
    limited(session, &quotas, QuotaKind::Produce, client);
    if throttle.is_zero() {
        return answer;
    }
    session.mute_until(now + throttle);
    if let Answer::Body(ResponseKind::Produce(response)) = &mut answer {
        response.throttle_time_ms = wire_ms(throttle);
    }
    answer
}

fn fetch<B: Broker>(
    broker: &B,
    rates: &ClientRates,
    session: &Session,
    client_id: &str,
    fetched: super::fetch::Fetched,
) -> Answer {
    let quotas = super::quota_store::current(broker);
    let user = session.principal();
    let client = Client {
        user: &user,
        client_id,
    };
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
    let now = broker.now();
    let throttle = rates.record(&quotas, QuotaKind::Fetch, client, bytes, now);
    limited(session, &quotas, QuotaKind::Fetch, client);
    if throttle.is_zero() {
        return Answer::Fetch(fetched);
    }
    // Kafka takes the bytes back and answers empty: the client asks again from the same
    // offsets once the throttle is over.
    rates.unrecord(&quotas, QuotaKind::Fetch, client, bytes, now);
    session.mute_until(now + throttle);
    let response = FetchResponse::default()
        .with_throttle_time_ms(wire_ms(throttle))
        .with_error_code(0)
        .with_session_id(0);
    Answer::Body(ResponseKind::Fetch(response))
}

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
