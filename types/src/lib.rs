//! The Kafka vocabulary that both `rill-protocol` (the wire) and `rill-engine` (the disk) speak,
//! defined once: the floor both crates stand on. Pure data and checks: no I/O, no runtime, no
//! codecs (compression and record decoding stay in `rill-protocol`).
//!
//! # Map
//! - [`error_code`]: [`ErrorCode`], Kafka's error codes as a typed enum; an `i16` only at the wire.
//!
//! # Why a crate of its own
//! The engine stores Kafka's on-disk format and answers in Kafka's error codes, but must not
//! depend on the wire protocol (its codec, its message types). Putting the shared concepts in
//! `rill-protocol` would pull the codec into the engine; duplicating them in the engine is what
//! this crate replaced (one definition of each wire concept, GUIDE.md).

pub mod error_code;

pub use error_code::{ErrorCode, UnknownErrorCode};
