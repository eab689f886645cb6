//! One request frame in, one response frame out (or none, or "close the connection").
//!
//! | decode outcome                         | what the client gets                         |
//! |----------------------------------------|----------------------------------------------|
//! | ApiVersions at an unsupported version  | error 35 with a v0 body                      |
//! | unknown api key / unsupported version  | connection closed (as Kafka does)            |
//! | malformed header or body               | connection closed                            |
//! | API not implemented by this broker     | connection closed                            |
//! | Produce with acks=0                    | no response                                  |
//! | Produce with acks=0, a partition failed| connection closed (as Kafka does)            |
//! | the handler (or decoder) panicked      | UNKNOWN_SERVER_ERROR or closed ([`crate::panic_guard`]) |
//! | SASL listener, not authenticated, an API other than ApiVersions / SaslHandshake / SaslAuthenticate (in their order) | connection closed, before decoding (as Kafka does) |
//! | a SASL exchange failed                 | its error response, then closed              |
//!
//! Every request goes through [`handle`]; its [`Answer`] is a response body to encode, or for
//! Fetch the body plus each partition's record chunks, which the vectored encoder splices in
//! without copying them.

use std::panic::AssertUnwindSafe;

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use rill_protocol::fetch_encoder::encode_fetch_response_vectored;
use rill_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use rill_protocol::request::decode_request;
use rill_protocol::response::encode_response;
use rill_protocol::ErrorCode;

use crate::admin::shard::hooks;
use crate::handler::{self, api_versions, Broker};
use crate::memory_budget::Hold;
use crate::panic_guard::{self, RequestHead};
use crate::security::session::Session;

/// What the connection does with a request's outcome.
#[derive(Debug)]
pub enum Outcome {
    /// Write this whole response frame.
    Respond(BytesMut),
    /// Write these buffers in order: one frame whose record bytes were never copied (Fetch);
    /// the hold (of the shard's Fetch budget) is given back once they are written.
    RespondParts(Vec<Bytes>, Hold),
    /// Write nothing (acks=0).
    Silent,
    /// Close the connection (after earlier responses are written).
    Close,
    /// Write this whole response frame, then close the connection.
    RespondThenClose(BytesMut),
}

/// Decode, handle and encode one request frame body (the bytes after the size prefix). A
/// panic on the way is caught here, in the request's own task ([`crate::panic_guard`]).
pub async fn dispatch<B: Broker>(broker: &B, frame_body: Bytes, session: &Session) -> Outcome {
    let head = RequestHead::peek(&frame_body);
    // AssertUnwindSafe: what the unwinding leaves behind is examined in crate::panic_guard.
    let outcome = match AssertUnwindSafe(dispatch_unguarded(broker, frame_body, session))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(panic) => answer_panic(head, &*panic),
    };
    // A Produce or Fetch is answered: its connection may serve the next (client quotas).
    if head
        .is_some_and(|h| h.api_key == ApiKey::Produce as i16 || h.api_key == ApiKey::Fetch as i16)
    {
        session.quota_request(false);
    }
    outcome
}

/// A request whose serving panicked: logged with its API and version, counted, answered
/// UNKNOWN_SERVER_ERROR where its response has a top-level error code, else closed.
fn answer_panic(head: Option<RequestHead>, panic: &(dyn std::any::Any + Send)) -> Outcome {
    let message = panic_guard::message(panic);
    let Some(head) = head else {
        tracing::error!(
            panic = message,
            "request without a header panicked; closing connection"
        );
        return Outcome::Close;
    };
    hooks::request_panicked(head.api_key);
    let api = ApiKey::try_from(head.api_key).ok();
    let body = api
        .and_then(|api| panic_guard::error_body(api, head.version, ErrorCode::UnknownServerError));
    let answer = match (api, body) {
        (Some(api), Some(body)) => {
            let mut out = BytesMut::new();
            encode_response(&mut out, head.correlation_id, api, head.version, &body)
                .ok()
                .map(|()| Outcome::Respond(out))
        }
        _ => None,
    };
    tracing::error!(
        api_key = head.api_key,
        api = ?api,
        version = head.version,
        answered = if answer.is_some() { "UNKNOWN_SERVER_ERROR" } else { "connection closed" },
        panic = message,
        "a request's handler panicked; the shard goes on"
    );
    answer.unwrap_or(Outcome::Close)
}

/// A connection whose authentication expired (KIP-368) or that has not authenticated yet may
/// send only the SASL requests it needs (and, before authenticating, ApiVersions): anything
/// else closes it, before its bytes reach a decoder.
fn refuse_before_decoding(frame_body: &Bytes, session: &Session) -> Option<Outcome> {
    if session.authentication_expired(std::time::Instant::now()) {
        // KIP-368: past connections.max.reauth.ms only a re-authentication is served; Kafka's
        // broker closes the connection on anything else.
        let api = RequestHead::peek(frame_body).and_then(|h| ApiKey::try_from(h.api_key).ok());
        if !matches!(api, Some(ApiKey::SaslHandshake | ApiKey::SaslAuthenticate)) {
            tracing::info!(?api, peer = ?session.peer, "closing connection: its SASL authentication expired (connections.max.reauth.ms) and it did not re-authenticate");
            session.with_sasl(|s| *s = crate::security::sasl::SaslState::Failed);
            return Some(Outcome::Close);
        }
    }
    if session.unauthenticated() {
        // As Kafka, before parsing: an unauthenticated client reaches no other decoder.
        let api = RequestHead::peek(frame_body).and_then(|h| ApiKey::try_from(h.api_key).ok());
        if !session.admits(api) {
            tracing::debug!(?api, peer = ?session.peer, "closing connection: request before SASL authentication");
            session.with_sasl(|s| *s = crate::security::sasl::SaslState::Failed);
            return Some(Outcome::Close);
        }
    }
    None
}

async fn dispatch_unguarded<B: Broker>(
    broker: &B,
    frame_body: Bytes,
    session: &Session,
) -> Outcome {
    if let Some(refused) = refuse_before_decoding(&frame_body, session) {
        return refused;
    }
    // A request quota counts the request's decoding too, as Kafka counts network thread time.
    let decode_started = std::time::Instant::now();
    let frame = frame_body.clone(); // Produce takes its records back out of it, uncopied
    let request_bytes = frame_body.len();
    let request = match decode_request(frame_body) {
        Ok(request) => request,
        Err(e) if e.needs_api_versions_fallback() => {
            let body = ResponseKind::ApiVersions(api_versions::unsupported_version_response());
            let correlation_id = e.correlation_id().unwrap_or(0);
            return encode(correlation_id, ApiKey::ApiVersions, 0, &body);
        }
        Err(e) => {
            tracing::debug!(error = %e, "closing connection: undecodable request");
            return Outcome::Close;
        }
    };
    let (api_key, version, correlation_id) =
        (request.api_key, request.api_version, request.correlation_id);
    let client_id = request
        .header
        .client_id
        .as_deref()
        .unwrap_or("")
        .to_string();
    let body = request.body;
    drop(request.header); // its client id is a slice of the frame
    crate::test_hooks::maybe_panic_in_handler(api_key as i16);
    // The ACL check (handler::authz_guard's table): refused resources come back in the answer.
    let (body, patch) = match handler::authz_guard::guard(broker, session, api_key, version, body) {
        handler::authz_guard::Guarded::Serve(body, patch) => (body, patch),
        handler::authz_guard::Guarded::Answer(answer) => {
            return finish(correlation_id, api_key, version, answer)
        }
    };
    let quota = handler::client_throttle::kind(&body);
    let mut body = body;
    if quota == Some(crate::client_quotas::QuotaKind::Fetch) {
        handler::client_throttle::cap_fetch(broker, session, &client_id, version, &mut body);
    }
    let cx = Served {
        version,
        client_id: &client_id,
        frame,
        session,
        decode_started,
    };
    let (answer, thread_time) = serve_measured(broker, api_key, body, cx).await;
    let answer = patch.apply(version, answer);
    // Client quotas: what the request counts, and the throttle if it is over.
    let answer = handler::client_throttle::apply(
        broker,
        session,
        &client_id,
        quota,
        request_bytes,
        thread_time,
        answer,
    );
    finish(correlation_id, api_key, version, answer)
}

/// What [`serve_measured`] needs beside the request's body.
struct Served<'a> {
    version: i16,
    client_id: &'a str,
    frame: Bytes,
    session: &'a Session,
    /// When the request's decoding started: a request quota counts it too.
    decode_started: std::time::Instant,
}

/// [`handle`], and the request's thread time when a `request_percentage` quota applies to it
/// (`client_quotas::thread_time`; nothing is timed otherwise).
async fn serve_measured<B: Broker>(
    broker: &B,
    api_key: ApiKey,
    body: RequestKind,
    cx: Served<'_>,
) -> (Answer, Option<std::time::Duration>) {
    let Served {
        version,
        client_id,
        frame,
        session,
        decode_started,
    } = cx;
    if !handler::client_throttle::request_quota_applies(broker, api_key, &body) {
        let answer = handle(broker, version, client_id, body, frame, session).await;
        return (answer, None);
    }
    let before = decode_started.elapsed();
    let serve = handle(broker, version, client_id, body, frame, session);
    let (answer, polled) = crate::client_quotas::thread_time::polled(serve).await;
    (answer, Some(before + polled))
}

/// The outcome of a handler's answer.
fn finish(correlation_id: i32, api_key: ApiKey, version: i16, answer: Answer) -> Outcome {
    match answer {
        Answer::Body(body) => encode(correlation_id, api_key, version, &body),
        Answer::Fetch(fetched) => encode_fetch(correlation_id, version, fetched),
        Answer::Silent => Outcome::Silent,
        Answer::Close => Outcome::Close,
        Answer::Final(body) => match encode(correlation_id, api_key, version, &body) {
            Outcome::Respond(bytes) => Outcome::RespondThenClose(bytes),
            other => other,
        },
    }
}

pub use crate::handler::Answer;

/// [`handle`], generated from the registry's rows (`rill_protocol::for_each_api!`): each API's
/// request goes to its handler's `serve`.
macro_rules! dispatch_table {
    ($($name:ident $min:literal ..= $max:literal $(decodes $from:literal ..)? => $handler:ident,)*) => {
        /// Run the handler of one decoded request; `frame` is the frame body it was decoded
        /// from, `session` the connection it came on.
        pub async fn handle<B: Broker>(
            broker: &B,
            version: i16,
            client_id: &str,
            body: RequestKind,
            frame: Bytes,
            session: &Session,
        ) -> Answer {
            let cx = handler::RequestContext { version, client_id, frame, session };
            match body {
                $(RequestKind::$name(request) => handler::$handler::serve(broker, cx, request).await,)*
                // The decoder decodes registry APIs only; anything else is closed, as Kafka does.
                _ => {
                    tracing::debug!("closing connection: API not implemented");
                    Answer::Close
                }
            }
        }
    };
}

rill_protocol::for_each_api!(dispatch_table);

/// A Fetch response as buffers: record chunks are spliced in, never copied.
fn encode_fetch(correlation_id: i32, version: i16, fetched: handler::fetch::Fetched) -> Outcome {
    let handler::fetch::Fetched {
        response,
        records,
        hold,
    } = fetched;
    match encode_fetch_response_vectored(correlation_id, version, response, &records) {
        Ok(parts) => Outcome::RespondParts(parts, hold),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode fetch response; closing connection");
            Outcome::Close
        }
    }
}

fn encode(correlation_id: i32, api_key: ApiKey, version: i16, body: &ResponseKind) -> Outcome {
    let mut out = BytesMut::new();
    match encode_response(&mut out, correlation_id, api_key, version, body) {
        Ok(()) => Outcome::Respond(out),
        Err(e) => {
            tracing::error!(error = %e, "cannot encode response; closing connection");
            Outcome::Close
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use bytes::BufMut;
    use futures::executor::block_on;

    fn frame(api_key: i16, version: i16, correlation_id: i32, rest: &[u8]) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i16(api_key);
        b.put_i16(version);
        b.put_i32(correlation_id);
        b.put_slice(rest);
        b.freeze()
    }

    #[test]
    fn api_versions_at_unsupported_version_gets_error_35_v0() {
        let broker = FakeBroker::new();
        let out = block_on(dispatch(
            &broker,
            frame(18, 99, 7, &[0, 0]),
            &Session::plaintext_default(),
        ));
        let Outcome::Respond(bytes) = out else {
            panic!("expected a response, got {out:?}")
        };
        assert_eq!(&bytes[4..8], &7i32.to_be_bytes());
        assert_eq!(&bytes[8..10], &35i16.to_be_bytes());
    }

    /// Before a SASL connection authenticates, Kafka serves ApiVersions and SaslHandshake, and
    /// closes the connection on anything else, before decoding it.
    #[test]
    fn before_sasl_authentication_only_the_handshake_is_served() {
        let broker = FakeBroker::new();
        let session = Session::sasl_for_tests();
        // (Each frame's first two bytes after the header are its empty client id.)
        // A Metadata v1 for every topic: closed, and the session failed.
        let metadata = frame(3, 1, 2, &[0, 0, 0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(
            block_on(dispatch(&broker, metadata.clone(), &session)),
            Outcome::Close
        ));
        assert!(!session.admits(Some(ApiKey::ApiVersions)));
        let session = Session::sasl_for_tests();
        let api_versions = frame(18, 0, 1, &[0, 0]);
        assert!(matches!(
            block_on(dispatch(&broker, api_versions, &session)),
            Outcome::Respond(_)
        ));
        // SaslHandshake v1 "PLAIN", then SaslAuthenticate v0 with alice's password.
        let handshake = frame(17, 1, 2, &[0, 0, 0, 5, b'P', b'L', b'A', b'I', b'N']);
        assert!(matches!(
            block_on(dispatch(&broker, handshake, &session)),
            Outcome::Respond(_)
        ));
        let mut token = vec![0, 0, 0, 0, 0, 9];
        token.extend_from_slice(b"\0alice\0pw");
        let authenticate = frame(36, 0, 3, &token);
        assert!(matches!(
            block_on(dispatch(&broker, authenticate, &session)),
            Outcome::Respond(_)
        ));
        assert_eq!(session.principal(), "alice");
        assert!(matches!(
            block_on(dispatch(&broker, metadata, &session)),
            Outcome::Respond(_)
        ));
    }

    #[test]
    fn garbage_and_unknown_keys_close() {
        let broker = FakeBroker::new();
        for body in [
            frame(999, 0, 1, &[]),
            frame(3, 9, 1, &[0xff; 3]),
            Bytes::from_static(b"ab"),
        ] {
            assert!(matches!(
                block_on(dispatch(&broker, body, &Session::plaintext_default())),
                Outcome::Close
            ));
        }
    }

    /// Issue 26: a panic while serving is answered UNKNOWN_SERVER_ERROR where the response has
    /// a top-level error code at that version (Kafka's ErrorCode field: JoinGroup 0+,
    /// FindCoordinator 0-3, OffsetFetch 2-7, AddPartitionsToTxn 4+, ...), and closes the
    /// connection elsewhere; never a panic out of the request's task.
    #[test]
    fn a_panic_is_answered_unknown_server_error_or_closes() {
        let head = |api: ApiKey, version| RequestHead {
            api_key: api as i16,
            version,
            correlation_id: 77,
        };
        let answered = [
            (ApiKey::InitProducerId, 0..=4),
            (ApiKey::JoinGroup, 0..=7),
            (ApiKey::SyncGroup, 0..=5),
            (ApiKey::Heartbeat, 0..=4),
            (ApiKey::FindCoordinator, 0..=3),
            (ApiKey::OffsetFetch, 2..=7),
            (ApiKey::AddPartitionsToTxn, 4..=5),
            (ApiKey::EndTxn, 0..=4),
            (ApiKey::ApiVersions, 0..=4),
        ];
        for (api, versions) in answered {
            for v in versions {
                let Outcome::Respond(bytes) = answer_panic(Some(head(api, v)), &"boom") else {
                    panic!("{api:?} v{v} was not answered");
                };
                assert_eq!(&bytes[4..8], &77i32.to_be_bytes(), "{api:?} v{v}");
                let code = (-1i16).to_be_bytes();
                assert!(bytes.windows(2).any(|w| w == code), "{api:?} v{v}: no -1");
            }
        }
        let closed = [
            (ApiKey::Produce, 9),
            (ApiKey::Fetch, 12),
            (ApiKey::Metadata, 12),
            (ApiKey::OffsetCommit, 8),
            (ApiKey::FindCoordinator, 4),
            (ApiKey::OffsetFetch, 8),
            (ApiKey::AddPartitionsToTxn, 3),
        ];
        for (api, v) in closed {
            let outcome = answer_panic(Some(head(api, v)), &String::from("boom"));
            assert!(
                matches!(outcome, Outcome::Close),
                "{api:?} v{v}: {outcome:?}"
            );
        }
        assert!(matches!(answer_panic(None, &"boom"), Outcome::Close));
    }

    #[test]
    fn produced_batches_reach_the_owner_in_the_frame_they_arrived_in() {
        use bytes::{Buf, BufMut};
        use rill_protocol::kafka_protocol::messages::produce_request::{
            PartitionProduceData, TopicProduceData,
        };
        use rill_protocol::kafka_protocol::messages::{ProduceRequest, RequestHeader};
        use rill_protocol::kafka_protocol::protocol::{Encodable, StrBytes};
        let broker = FakeBroker::new();
        let records = crate::handler::fake::batch(50);
        let partition = PartitionProduceData::default()
            .with_index(0)
            .with_records(Some(records));
        let topic = TopicProduceData::default()
            .with_name(crate::handler::topic_name("t"))
            .with_partition_data(vec![partition]);
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![topic]);
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Produce as i16)
            .with_request_api_version(9)
            .with_correlation_id(3)
            .with_client_id(Some(StrBytes::from_static_str("client")));
        // As the connection hands a frame over: size prefix skipped, an allocation of its own.
        let mut frame = BytesMut::new();
        frame.put_i32(0);
        header.encode(&mut frame, 2).unwrap();
        request.encode(&mut frame, 9).unwrap();
        let mut frame = BytesMut::from(&frame[..]);
        frame.advance(4);
        let body = frame.freeze();
        let memory = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
        assert!(matches!(
            block_on(dispatch(&broker, body, &Session::plaintext_default())),
            Outcome::Respond(_)
        ));
        let at = broker.appended_at.borrow().clone();
        assert_eq!(at.len(), 1);
        assert!(memory.contains(&at[0]), "the batch was copied on the way");
    }
}

/// Every handler's response must encode at every version the registry advertises: the codec
/// refuses a field set on a version that lacks it, which would close a client's connection.
#[cfg(test)]
mod every_version_encodes {
    use super::*;
    use crate::handler::fake::{batch, FakeBroker};
    use crate::handler::topic_name;
    use futures::executor::block_on;
    use rill_protocol::api_registry::entry;
    use rill_protocol::kafka_protocol::messages::*;
    use rill_types::{PartitionIndex, TopicPartitionRef};

    fn versions(api_key: ApiKey) -> std::ops::RangeInclusive<i16> {
        let e = entry(api_key).expect("registered");
        e.decodable_min..=e.advertised_max
    }

    fn assert_encodes(api_key: ApiKey, make: impl Fn(&FakeBroker, i16) -> ResponseKind) {
        assert_answer_encodes(api_key, |b, v| Answer::Body(make(b, v)));
    }

    /// Encodes each answer the way [`dispatch`] does (Fetch through the vectored encoder).
    fn assert_answer_encodes(api_key: ApiKey, make: impl Fn(&FakeBroker, i16) -> Answer) {
        let broker = FakeBroker::new();
        broker.topics().create("t", 2, Default::default()).unwrap();
        broker.append(TopicPartitionRef::new("t", PartitionIndex(0)), batch(2));
        for v in versions(api_key) {
            let result = match make(&broker, v) {
                Answer::Body(body) => {
                    encode_response(&mut BytesMut::new(), 1, api_key, v, &body).map(drop)
                }
                Answer::Fetch(f) => {
                    encode_fetch_response_vectored(1, v, f.response, &f.records).map(drop)
                }
                Answer::Final(body) => {
                    encode_response(&mut BytesMut::new(), 1, api_key, v, &body).map(drop)
                }
                Answer::Silent | Answer::Close => Ok(()),
            };
            if let Err(e) = result {
                panic!("{api_key:?} v{v}: {e}");
            }
        }
    }

    #[test]
    fn metadata_produce_fetch_list_offsets() {
        assert_encodes(ApiKey::Metadata, |b, v| {
            let t =
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic_name("t")));
            let req = MetadataRequest::default().with_topics(Some(vec![t]));
            ResponseKind::Metadata(futures::executor::block_on(handler::metadata::handle(
                b, v, &req,
            )))
        });
        assert_encodes(ApiKey::Produce, |b, v| {
            let p = produce_request::PartitionProduceData::default().with_records(Some(batch(1)));
            let t = produce_request::TopicProduceData::default()
                .with_name(topic_name("t"))
                .with_partition_data(vec![p]);
            let req = ProduceRequest::default()
                .with_acks(1)
                .with_topic_data(vec![t]);
            ResponseKind::Produce(
                block_on(handler::produce::handle(b, v, req, Bytes::new(), None))
                    .into_response()
                    .unwrap(),
            )
        });
        assert_answer_encodes(ApiKey::Fetch, |b, v| {
            let p = fetch_request::FetchPartition::default().with_partition_max_bytes(1 << 20);
            let t = fetch_request::FetchTopic::default()
                .with_topic(topic_name("t"))
                .with_partitions(vec![p]);
            let req = FetchRequest::default()
                .with_max_bytes(1 << 20)
                .with_topics(vec![t]);
            Answer::Fetch(block_on(handler::fetch::handle(
                b,
                v,
                &req,
                &Session::plaintext_default(),
            )))
        });
        assert_encodes(ApiKey::ListOffsets, |b, v| {
            let p = list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1);
            let t = list_offsets_request::ListOffsetsTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![p]);
            let req = ListOffsetsRequest::default().with_topics(vec![t]);
            ResponseKind::ListOffsets(block_on(handler::list_offsets::handle(b, v, &req)))
        });
    }

    #[test]
    fn replication_admin_apis() {
        assert_encodes(ApiKey::DescribeLogDirs, |b, _| {
            let req = DescribeLogDirsRequest::default().with_topics(None);
            ResponseKind::DescribeLogDirs(block_on(handler::describe_log_dirs::handle(b, &req)))
        });
        assert_encodes(ApiKey::ElectLeaders, |b, v| {
            let req = ElectLeadersRequest::default().with_topic_partitions(None);
            ResponseKind::ElectLeaders(block_on(handler::elect_leaders::handle(b, v, &req)))
        });
        assert_encodes(ApiKey::AlterPartitionReassignments, |b, _| {
            let req = AlterPartitionReassignmentsRequest::default();
            ResponseKind::AlterPartitionReassignments(block_on(
                handler::alter_partition_reassignments::handle(b, &req),
            ))
        });
        assert_encodes(ApiKey::ListPartitionReassignments, |b, _| {
            let req = ListPartitionReassignmentsRequest::default();
            ResponseKind::ListPartitionReassignments(handler::list_partition_reassignments::handle(
                b, &req,
            ))
        });
    }

    /// Issue 26: an error message that quotes a client's longest string (32767 bytes: a topic
    /// name, a config value) is cut to fit, so the answer encodes at every version, the
    /// non-flexible ones (INT16 strings) included, instead of closing the connection.
    #[test]
    fn messages_quoting_the_longest_client_strings_encode() {
        let longest = "x".repeat(rill_types::limits::WIRE_STRING_BYTES_MAX);
        assert_encodes(ApiKey::CreateTopics, |b, v| {
            let config = create_topics_request::CreatableTopicConfig::default()
                .with_name(handler::str_bytes("retention.ms"))
                .with_value(Some(handler::str_bytes(&longest)));
            let t = create_topics_request::CreatableTopic::default()
                .with_name(topic_name(&format!("quoted-{v}")))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(vec![config]);
            let req = CreateTopicsRequest::default().with_topics(vec![t]);
            let r = block_on(handler::create_topics::handle(b, v, &req));
            assert_ne!(
                r.topics[0].error_code, 0,
                "a non-number retention.ms is refused"
            );
            ResponseKind::CreateTopics(r)
        });
        assert_encodes(ApiKey::CreatePartitions, |b, _| {
            let t = create_partitions_request::CreatePartitionsTopic::default()
                .with_name(topic_name(&longest))
                .with_count(1);
            let req = CreatePartitionsRequest::default().with_topics(vec![t]);
            ResponseKind::CreatePartitions(block_on(handler::create_partitions::handle(b, &req)))
        });
        assert_encodes(ApiKey::DescribeConfigs, |b, v| {
            let r = describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(handler::str_bytes(&longest));
            let req = DescribeConfigsRequest::default().with_resources(vec![r]);
            ResponseKind::DescribeConfigs(handler::describe_configs::handle(b, v, &req))
        });
    }

    #[test]
    fn admin_apis() {
        assert_encodes(ApiKey::CreateTopics, |b, v| {
            let t = create_topics_request::CreatableTopic::default()
                .with_name(topic_name(&format!("new-{v}")))
                .with_num_partitions(1)
                .with_replication_factor(1);
            let req = CreateTopicsRequest::default().with_topics(vec![t]);
            ResponseKind::CreateTopics(block_on(handler::create_topics::handle(b, v, &req)))
        });
        assert_encodes(ApiKey::DeleteTopics, |b, v| {
            let req = DeleteTopicsRequest::default().with_topic_names(vec![topic_name("absent")]);
            ResponseKind::DeleteTopics(block_on(handler::delete_topics::handle(b, v, &req)))
        });
        assert_encodes(ApiKey::CreatePartitions, |b, _| {
            let t = create_partitions_request::CreatePartitionsTopic::default()
                .with_name(topic_name("t"))
                .with_count(1);
            let req = CreatePartitionsRequest::default().with_topics(vec![t]);
            ResponseKind::CreatePartitions(block_on(handler::create_partitions::handle(b, &req)))
        });
        assert_encodes(ApiKey::DescribeConfigs, |b, _| {
            let r = describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(handler::str_bytes("t"));
            let req = DescribeConfigsRequest::default().with_resources(vec![r]);
            ResponseKind::DescribeConfigs(handler::describe_configs::handle(b, 4, &req))
        });
        assert_encodes(ApiKey::DescribeCluster, |b, _| {
            ResponseKind::DescribeCluster(handler::describe_cluster::handle(
                b,
                &DescribeClusterRequest::default(),
            ))
        });
        assert_encodes(ApiKey::OffsetForLeaderEpoch, |b, v| {
            let p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
            let t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                .with_topic(topic_name("t"))
                .with_partitions(vec![p]);
            let req = OffsetForLeaderEpochRequest::default().with_topics(vec![t]);
            let _ = v;
            ResponseKind::OffsetForLeaderEpoch(block_on(handler::offset_for_leader_epoch::handle(
                b, &req,
            )))
        });
        assert_encodes(ApiKey::InitProducerId, |b, v| {
            let req = InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_producer_id(ProducerId(-1));
            ResponseKind::InitProducerId(block_on(handler::init_producer_id::handle(b, v, &req)))
        });
        assert_encodes(ApiKey::ApiVersions, |_, v| {
            ResponseKind::ApiVersions(handler::api_versions::handle(v))
        });
    }

    #[test]
    fn transaction_apis() {
        let tid = || TransactionalId(handler::str_bytes("tx"));
        assert_encodes(ApiKey::AddPartitionsToTxn, |b, v| {
            let t = add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![0]);
            let req = if v >= 4 {
                let txn = add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(tid())
                    .with_verify_only(true)
                    .with_topics(vec![t]);
                AddPartitionsToTxnRequest::default().with_transactions(vec![txn])
            } else {
                AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(tid())
                    .with_v3_and_below_topics(vec![t])
            };
            ResponseKind::AddPartitionsToTxn(block_on(handler::add_partitions_to_txn::handle(
                b, v, &req,
            )))
        });
        assert_encodes(ApiKey::AddOffsetsToTxn, |b, v| {
            let req = AddOffsetsToTxnRequest::default().with_transactional_id(tid());
            ResponseKind::AddOffsetsToTxn(block_on(handler::add_offsets_to_txn::handle(b, v, &req)))
        });
        assert_encodes(ApiKey::EndTxn, |b, v| {
            let req = EndTxnRequest::default().with_transactional_id(tid());
            ResponseKind::EndTxn(block_on(handler::end_txn::handle(b, v, &req)))
        });
        assert_encodes(ApiKey::TxnOffsetCommit, |b, v| {
            let p = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default();
            let t = txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(topic_name("t"))
                .with_partitions(vec![p]);
            let req = TxnOffsetCommitRequest::default()
                .with_transactional_id(tid())
                .with_topics(vec![t]);
            ResponseKind::TxnOffsetCommit(block_on(handler::txn_offset_commit::handle(b, v, &req)))
        });
        assert_encodes(ApiKey::WriteTxnMarkers, |b, _| {
            let t = write_txn_markers_request::WritableTxnMarkerTopic::default()
                .with_name(topic_name("t"))
                .with_partition_indexes(vec![0, 9]);
            let m = write_txn_markers_request::WritableTxnMarker::default().with_topics(vec![t]);
            let req = WriteTxnMarkersRequest::default().with_markers(vec![m]);
            ResponseKind::WriteTxnMarkers(block_on(handler::write_txn_markers::handle(b, &req)))
        });
        assert_encodes(ApiKey::DescribeTransactions, |b, _| {
            let req = DescribeTransactionsRequest::default().with_transactional_ids(vec![tid()]);
            ResponseKind::DescribeTransactions(block_on(handler::describe_transactions::handle(
                b, &req,
            )))
        });
        assert_encodes(ApiKey::ListTransactions, |b, v| {
            let req = ListTransactionsRequest::default().with_duration_filter(-1);
            ResponseKind::ListTransactions(block_on(handler::list_transactions::handle(b, v, &req)))
        });
        assert_encodes(ApiKey::DescribeProducers, |b, _| {
            let t = describe_producers_request::TopicRequest::default()
                .with_name(topic_name("t"))
                .with_partition_indexes(vec![0, 9]);
            let req = DescribeProducersRequest::default().with_topics(vec![t]);
            ResponseKind::DescribeProducers(block_on(handler::describe_producers::handle(b, &req)))
        });
    }
}
