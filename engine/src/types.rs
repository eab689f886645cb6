//! Newtypes for the numbers that must never mix. Log offsets (absolute and segment-relative),
//! timestamps and the topic-partition key (which names a log's directory) are Kafka's, shared
//! with the protocol through `rill-types` (re-exported here); positions inside a segment file
//! are the engine's own.

pub use rill_types::{Offset, PartitionIndex, RelativeOffset, TimestampMs, TopicPartitionRef};

/// A byte position inside one segment's `.log` file (segments are < 4 GiB by the roll rule).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FilePosition(pub u32);
