//! The request-path fuzz harness shared by the targets: one frame body goes through the broker's
//! real [`dispatch`] (header + body decode, handler planning and execution, response encode)
//! against the in-memory [`FakeBroker`], and the outcome is checked the way a client would see it.
//!
//! Invariants checked on every input (a violation is a crash the fuzzer reports):
//! - nothing panics or aborts (handlers, codec, fake broker, group coordinator);
//! - a response frame's size prefix matches its length and it carries the request's correlation id;
//! - a response decodes with the client-side codec at the request's version, leaving no bytes over
//!   (a response a client cannot parse drops its connection);
//! - only Produce (acks=0) may be answered with silence.
//!
//! Time is kept out of it so that every input is deterministic and fast: a Fetch's `max_wait_ms`
//! is rewritten to 0 (the fake has no appends to wait for, so a long poll would only spin until
//! its deadline), and a request that is still pending after [`POLLS_MAX`] polls (a JoinGroup
//! waiting for its rebalance) is dropped — which also exercises cancellation.

pub mod segment;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures::task::noop_waker_ref;
use rill_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseHeader, ResponseKind};
use rill_protocol::kafka_protocol::protocol::Decodable;
use rill_protocol::request::{decode_request, peek_header_prefix, HeaderPrefix};
use rill_server::dispatch::{dispatch, Outcome};
use rill_server::handler::fake::FakeBroker;
use rill_server::handler::Broker;

pub use rill_protocol::frame::frame_len;

/// Polls (with a group-coordinator tick between them) before a pending request is abandoned.
pub const POLLS_MAX: usize = 16;

/// A fresh in-memory broker (auto-create on, default config).
pub fn broker() -> FakeBroker {
    FakeBroker::new()
}

/// The largest request body the broker accepts (`socket.request.max.bytes`).
pub fn request_bytes_max(broker: &FakeBroker) -> usize {
    broker.config().request_bytes_max
}

/// What the connection does after one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// Keep reading requests.
    Continue,
    /// The broker closed the connection (or the harness gave up on this input).
    Stop,
}

/// A fresh in-memory broker whose coordinators write membership and encode every record as
/// the on-disk logs would ([`FakeBroker::writing_records`]): what `stateful_sequence` runs on.
pub fn broker_writing_records() -> FakeBroker {
    FakeBroker::writing_records()
}

/// Dispatches one frame body (without its size prefix) and checks the outcome.
pub fn run_frame(broker: &FakeBroker, body: Bytes) -> Next {
    run_frame_answer(broker, body).0
}

/// [`run_frame`], also handing back the response frame (after its size prefix), if any.
pub fn run_frame_answer(broker: &FakeBroker, body: Bytes) -> (Next, Option<Vec<u8>>) {
    let Some(body) = tame(body) else {
        return (Next::Stop, None);
    };
    let outcome = drive(broker, dispatch(broker, body.clone(), &rill_server::security::session::Session::plaintext_default()));
    let frame = match outcome {
        None => return (Next::Stop, None), // still waiting for a rebalance: dropped, as a closed connection would
        Some(Outcome::Close) => return (Next::Stop, None),
        Some(Outcome::Silent) => {
            let prefix = peek_header_prefix(&body).expect("a silent answer needs a decoded header");
            assert_eq!(
                prefix.api_key,
                ApiKey::Produce as i16,
                "only acks=0 Produce is silent"
            );
            return (Next::Continue, None);
        }
        Some(Outcome::Respond(frame)) => frame.to_vec(),
        // A failed SASL exchange answers, then the connection closes.
        Some(Outcome::RespondThenClose(frame)) => {
            check_response(&body, &frame);
            return (Next::Stop, Some(frame[4..].to_vec()));
        }
        // The zero-copy Fetch path: the parts, written in order, are one response frame.
        Some(Outcome::RespondParts(parts, _)) => parts.concat(),
    };
    check_response(&body, &frame);
    (Next::Continue, Some(frame[4..].to_vec()))
}

/// Polls `fut` to completion without a runtime; `None` if it is still pending after
/// [`POLLS_MAX`] polls (ticking the group coordinator between polls, as its timer would).
fn drive<F: Future>(broker: &FakeBroker, fut: F) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(noop_waker_ref());
    for _ in 0..POLLS_MAX {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return Some(out);
        }
        broker.groups.tick();
    }
    None
}

/// The body with a Fetch's `max_wait_ms` set to 0; other requests unchanged. `None` when a
/// Fetch with a wait cannot be re-encoded (then the input is skipped rather than spun on).
fn tame(body: Bytes) -> Option<Bytes> {
    let Ok(mut request) = decode_request(body.clone()) else {
        return Some(body);
    };
    let RequestKind::Fetch(fetch) = &mut request.body else {
        return Some(body);
    };
    if fetch.max_wait_ms <= 0 {
        return Some(body);
    }
    fetch.max_wait_ms = 0;
    request.encode().ok().map(BytesMut::freeze)
}

/// A response frame as a client reads it: size prefix, correlation id, header and body.
fn check_response(request_body: &[u8], frame: &[u8]) {
    assert!(frame.len() >= 8, "response frame of {} bytes", frame.len());
    let size = i32::from_be_bytes(frame[..4].try_into().expect("4 bytes"));
    assert_eq!(
        size as usize,
        frame.len() - 4,
        "size prefix disagrees with the frame"
    );
    let prefix = peek_header_prefix(request_body).expect("answered requests have a header");
    let correlation_id = i32::from_be_bytes(frame[4..8].try_into().expect("4 bytes"));
    assert_eq!(
        correlation_id, prefix.correlation_id,
        "response to the wrong request"
    );
    let (api_key, version) = response_key_version(request_body, prefix);
    let mut buf = Bytes::copy_from_slice(&frame[4..]);
    ResponseHeader::decode(&mut buf, api_key.response_header_version(version))
        .unwrap_or_else(|e| panic!("{api_key:?} v{version}: response header undecodable: {e:#}"));
    ResponseKind::decode(api_key, &mut buf, version)
        .unwrap_or_else(|e| panic!("{api_key:?} v{version}: response body undecodable: {e:#}"));
    assert!(
        buf.is_empty(),
        "{api_key:?} v{version}: {} bytes left after the response body",
        buf.len()
    );
}

/// The API and version the response was encoded at: the request's, except that an ApiVersions
/// at a version the broker cannot decode is answered with a v0 body.
fn response_key_version(request_body: &[u8], prefix: HeaderPrefix) -> (ApiKey, i16) {
    let api_key = ApiKey::try_from(prefix.api_key).expect("only known APIs are answered");
    let decodes = decode_request(Bytes::copy_from_slice(request_body)).is_ok();
    if api_key == ApiKey::ApiVersions && !decodes {
        return (api_key, 0);
    }
    (api_key, prefix.api_version)
}
