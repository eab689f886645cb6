//! The Kafka vocabulary that both `rill-protocol` (the wire) and `rill-engine` (the disk) speak,
//! defined once: the floor both crates stand on. Pure data and checks: no I/O, no runtime, no
//! codecs (compression and record decoding stay in `rill-protocol`). Dependencies: bytes,
//! crc32c, zerocopy and thiserror, which both crates already used.
//!
//! # Map
//! - [`error_code`]: [`ErrorCode`], Kafka's error codes as a typed enum; an `i16` only at the wire.
//! - [`offset`]: [`Offset`], a record's position in a partition's log; [`RelativeOffset`].
//! - [`timestamp`]: [`TimestampMs`], record and batch timestamps, and the wall-clock instants
//!   the coordinators keep; [`duration`]: [`DurationMs`], spans between them.
//! - [`leader_epoch`]: [`LeaderEpoch`], which leadership wrote a batch.
//! - [`topic_partition`]: [`PartitionIndex`], a partition's number in its topic, and the
//!   topic-partition key, owned ([`TopicPartition`]) and borrowed ([`TopicPartitionRef`]).
//! - [`producer`]: [`ProducerId`], [`ProducerEpoch`], [`Sequence`] of idempotent producers.
//! - [`batch`]: the v2 record batch header, its checks, and [`batch::ValidatedBatch`], the one
//!   thing the engine appends.
//! - [`limits`]: the one table of limits on client-sent names and ids (topic names, group,
//!   member, instance and transactional ids, ...), bound to Kafka's and to Rill's record formats.
//!
//! Each typed value wraps the wire integer (`.0`); the conversion happens where a request is
//! decoded or a response encoded, never in between.
//!
//! # Why a crate of its own
//! The engine stores Kafka's on-disk format and answers in Kafka's error codes, but must not
//! depend on the wire protocol (its codec, its message types). Putting the shared concepts in
//! `rill-protocol` would pull the codec into the engine; duplicating them in the engine is what
//! this crate replaced (one definition of each wire concept).
#![forbid(unsafe_code)]

pub mod batch;
pub mod duration;
pub mod error_code;
pub mod leader_epoch;
pub mod limits;
pub mod offset;
pub mod producer;
pub mod timestamp;
pub mod topic_partition;

pub use duration::DurationMs;
pub use error_code::{ErrorCode, UnknownErrorCode};
pub use leader_epoch::LeaderEpoch;
pub use offset::{Offset, RelativeOffset};
pub use producer::{ProducerEpoch, ProducerId, Sequence};
pub use timestamp::TimestampMs;
pub use topic_partition::{PartitionIndex, TopicPartition, TopicPartitionKey, TopicPartitionRef};
