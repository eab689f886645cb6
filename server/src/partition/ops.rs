//! Messages to a partition's owner and its answers.
//!
//! Both are `Send`: a request made on one shard for a partition owned by another crosses cores in
//! the channel mesh. Record bytes travel as `BytesMut`/`Bytes` (moved, not copied again).
//! Offsets, timestamps and positions are typed; raw integers exist only in the handlers' wire
//! messages.

use bytes::Bytes;
use rill_engine::Positions;
use rill_types::batch::ValidatedBatch;
use rill_types::{ErrorCode, Offset, TimestampMs};

/// Kafka's `acks`: how much of the append the producer waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acks {
    /// acks=0: nobody waits; the append still happens.
    None,
    /// acks=1: answered once appended to the log (not yet durable).
    Leader,
    /// acks=all (-1): answered once durable per the topic's flush policy.
    All,
}

impl Acks {
    /// Kafka's wire value → `Acks`; `None` for anything but 0, 1, -1.
    pub fn from_wire(acks: i16) -> Option<Acks> {
        match acks {
            0 => Some(Acks::None),
            1 => Some(Acks::Leader),
            -1 => Some(Acks::All),
            _ => None,
        }
    }
}

/// What a shard asks a partition to do.
#[derive(Debug)]
pub enum PartitionOp {
    /// Append validated v2 record batches, in order.
    Append {
        /// One or more whole batches, each checked once by the Produce handler.
        batches: Vec<ValidatedBatch>,
        /// When to answer.
        acks: Acks,
    },
    /// Whole batches from `from`, below the high watermark, up to `max_bytes` (at least one).
    Read {
        /// The consumer's position.
        from: Offset,
        /// Partition byte budget (Kafka's partition_max_bytes).
        max_bytes: usize,
    },
    /// Log start, high watermark and log end.
    Offsets,
    /// The first offset whose batch max timestamp is >= `timestamp` (ListOffsets by time).
    OffsetForTimestamp {
        /// The target time.
        timestamp: TimestampMs,
    },
    /// Resolve once the high watermark passes `from` or `wait_ms` elapses (Fetch long poll).
    WaitForData {
        /// The consumer's position: data is "there" when high_watermark > from.
        from: Offset,
        /// Upper bound of the wait.
        wait_ms: u64,
    },
    /// Close the log and delete its directory (DeleteTopics).
    Delete,
    /// Release what an idle partition does not need: caches, preallocation, open files (sent by
    /// the shard to keep its open files within budget; the next request reopens them).
    Release,
}

/// A partition's answer: a result, or the Kafka error it failed with.
#[derive(Debug)]
pub enum PartitionReply {
    /// Answer to [`PartitionOp::Append`].
    Appended {
        /// Offset of the first record of the first batch.
        base_offset: Offset,
        /// Broker time for LogAppendTime topics, else `TimestampMs::NONE`.
        log_append_time: TimestampMs,
        /// Log start after the append.
        log_start_offset: Offset,
    },
    /// Answer to [`PartitionOp::Read`].
    Read {
        /// Positions when the read was served.
        positions: Positions,
        /// Whole record batches, ready to send as they are.
        chunks: Vec<Bytes>,
    },
    /// Answer to [`PartitionOp::Offsets`].
    Offsets(Positions),
    /// Answer to [`PartitionOp::OffsetForTimestamp`]: `(offset, timestamp)` if any.
    OffsetForTimestamp(Option<(Offset, TimestampMs)>, Positions),
    /// Answer to [`PartitionOp::WaitForData`] (whether data arrived or time ran out).
    Waited,
    /// Answer to [`PartitionOp::Delete`].
    Deleted,
    /// Answer to [`PartitionOp::Release`].
    Released,
    /// The operation failed with this Kafka error code.
    Error(ErrorCode),
}

impl PartitionReply {
    /// The Kafka error code this reply carries (`ErrorCode::None` for success).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            PartitionReply::Error(code) => *code,
            _ => ErrorCode::None,
        }
    }
}

/// A cross-shard request: the partition, what to do, and where to send the answer.
#[derive(Debug)]
pub struct ShardMsg {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The operation.
    pub op: PartitionOp,
    /// Completed on the owner shard; wakes the asking task on its own shard.
    pub reply: futures::channel::oneshot::Sender<PartitionReply>,
}
