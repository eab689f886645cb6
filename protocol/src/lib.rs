//! Rill's Kafka wire protocol: bytes in, bytes out, no I/O.
//!
//! # Map
//! - [`frame`]: size-prefixed framing, "need more bytes" as `Ok(None)`, named maximum.
//! - [`request`]: header v0-v2 + body decode, checked against the registry first.
//! - [`response`]: size prefix + response header v0/v1 (ApiVersions always v0) + body.
//! - [`api_registry`]: the one table of advertised APIs and version ranges; ApiVersions answers.
//! - [`error_code`]: Kafka error codes as a typed enum (defined in `rill-types`, re-exported).
//! - [`length_guard`]: wire lengths checked against the frame before anything is allocated,
//!   walking Kafka's own JSON request specs ([`schema`], pinned in `protocol/specs/`).
//! - [`record`]: record batch v2 view (header layout and checks from `rill-types`, offset
//!   rewrite, nom record iteration, capped decompression, Produce blob splitting).
//! - [`fetch_encoder`]: Fetch responses as `Vec<Bytes>` for vectored writes; record bytes
//!   are never copied.
//!
//! # Server flow
//! ```text
//! frame_len(buf, max)        -> Ok(None) read more | Ok(Some(n)) | Err: close
//! decode_request(body)       -> Request | RequestError (needs_api_versions_fallback() =>
//!                               answer ApiVersions v0 with ErrorCode::UnsupportedVersion)
//! record::single_batch(recs) -> the one whole batch, as Kafka reads it; checked once as a
//!                               ValidatedBatch (Produce)
//! encode_response(..) / fetch_encoder::encode_fetch_response_vectored(..)
//! ```
//!
//! # Why `kafka-protocol` 0.18
//! Message types come from the `kafka-protocol` crate, generated from Kafka 4.1's JSON message
//! specs: maintained, covers every API, keeps `records` as raw `Bytes` (zero-copy). Kafka 4
//! dropped some old versions (Produce < 3, Fetch < 4, ListOffsets 0, OffsetCommit < 2, ...).
//! Checked against the clients (librdkafka, kafka-python, aiokafka, kafkajs): none of them *sends* a dropped
//! version once it has our ApiVersions answer; librdkafka 2.0.2 only *checks* that some
//! old versions overlap the advertised ranges (OffsetCommit 1-2 overlaps at 2, Produce 0 is
//! advertised-only, as Kafka 4 does since KAFKA-18659). So 0.18 decodes everything the clients
//! send, and an older crate would only add versions nobody uses. See [`api_registry`].
//!
//! One weakness of 0.18 is handled here rather than by forking it: it preallocates
//! `Vec::with_capacity(count)` from wire counts (a tiny frame could abort the process), so
//! every request body first passes [`length_guard`].
//!
//! `kafka_protocol` is re-exported so the server uses exactly this version.

pub mod api_registry;
pub mod error_code;
pub mod fetch_encoder;
pub mod frame;
pub mod length_guard;
pub mod record;
pub mod request;
pub mod response;
pub mod schema;

pub use error_code::ErrorCode;
pub use kafka_protocol;
pub use record::{BatchError, RecordBatchView};
