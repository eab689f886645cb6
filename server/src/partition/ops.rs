//! Messages to a partition's owner and its answers.
//!
//! Both are `Send`: a request made on one shard for a partition owned by another crosses cores in
//! the channel mesh. Record bytes travel as `BytesMut`/`Bytes` (moved, not copied again).
//! Offsets, timestamps and positions are typed; raw integers exist only in the handlers' wire
//! messages.

use std::time::Duration;

use bytes::Bytes;
use rill_engine::{AbortedTxn, Positions, ProducerView, TxnMarker};
use rill_metadata::types::NodeId;
use rill_types::batch::ValidatedBatch;
use rill_types::{
    ErrorCode, LeaderEpoch, Offset, ProducerEpoch, ProducerId, TimestampMs, TopicPartition,
};

/// Kafka's isolation level: which records a reader may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// Everything below the high watermark (aborted and open transactions included).
    #[default]
    ReadUncommitted,
    /// Only below the last stable offset, with the aborted transactions listed beside.
    ReadCommitted,
    /// A follower replica: everything up to the log end (waits wake on appends).
    Replica,
}

impl Isolation {
    /// Kafka's wire value: 0 read_uncommitted, 1 read_committed. `None` for any other, which
    /// Kafka refuses: `IsolationLevel.forId` throws, and the request is answered
    /// UNKNOWN_SERVER_ERROR ([`Isolation::INVALID_CODE`]).
    pub fn from_wire(level: i8) -> Option<Isolation> {
        match level {
            0 => Some(Isolation::ReadUncommitted),
            1 => Some(Isolation::ReadCommitted),
            _ => None,
        }
    }

    /// What Kafka answers a request naming an unknown isolation level (Fetch v4+, ListOffsets
    /// v2+): its handler's IllegalArgumentException becomes UNKNOWN_SERVER_ERROR.
    pub const INVALID_CODE: ErrorCode = ErrorCode::UnknownServerError;
}

/// How long an internal acks=all write (a coordinator's, a transaction marker) waits for the
/// ISR: Kafka's default `request.timeout.ms`.
pub const INTERNAL_ACK_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// Append one validated v2 record batch (a Produce v3+ partition carries exactly one).
    Append {
        /// The whole batch, checked once by the Produce handler.
        batch: ValidatedBatch,
        /// When to answer.
        acks: Acks,
        /// acks=all on a replicated leader: how long to wait for the ISR before answering
        /// REQUEST_TIMED_OUT (the Produce request's `timeout_ms`; the records stay written).
        ack_timeout: Duration,
        /// The verification guard this partition handed out for a transactional producer
        /// ([`PartitionReply::NeedsTxnVerification`]), once its coordinator confirmed that the
        /// partition is in the producer's transaction (KIP-890). `None` on the first try.
        txn_guard: Option<u64>,
    },
    /// Whole batches from `from`, below the high watermark (read_committed: the last stable
    /// offset), up to `max_bytes` (at least one).
    Read {
        /// The consumer's position.
        from: Offset,
        /// Partition byte budget (Kafka's partition_max_bytes).
        max_bytes: usize,
        /// Which records the reader may see.
        isolation: Isolation,
    },
    /// Log start, high watermark and log end.
    Offsets,
    /// The tiers' offsets (ListOffsets -4, -5): the local log start and the highest offset
    /// in the remote tier.
    TierOffsets,
    /// The first offset whose batch max timestamp is >= `timestamp` (ListOffsets by time).
    OffsetForTimestamp {
        /// The target time.
        timestamp: TimestampMs,
    },
    /// The first record holding the log's largest timestamp (ListOffsets -3, KIP-734);
    /// answered as [`PartitionReply::OffsetForTimestamp`].
    MaxTimestamp,
    /// Move the log start to `before` (-1: the high watermark) and delete the segments wholly
    /// below it (DeleteRecords); answered with the new [`PartitionReply::Offsets`].
    DeleteRecords {
        /// The new log start.
        before: Offset,
    },
    /// Resolve once the high watermark (read_committed: the last stable offset) passes `from`
    /// or `wait_ms` elapses (Fetch long poll).
    WaitForData {
        /// The consumer's position: data is "there" when the visible end passes it.
        from: Offset,
        /// Upper bound of the wait.
        wait_ms: u64,
        /// Which end counts.
        isolation: Isolation,
    },
    /// Append a transaction marker and make it durable (the coordinator's decision).
    WriteTxnMarker(TxnMarker),
    /// An append handed `guard` ([`PartitionReply::NeedsTxnVerification`]) will not be sent
    /// again (its verification failed): the guard has one holder less (`txn_guard.rs`).
    /// Answered [`PartitionReply::Released`].
    ReturnTxnGuard {
        /// The producer the guard was handed to.
        producer: ProducerId,
        /// The guard.
        guard: u64,
    },
    /// Every producer this partition knows (DescribeProducers).
    DescribeProducers,
    /// The bytes the log holds and its positions (DescribeLogDirs); served on any replica.
    LogSize,
    /// Close the log and delete its directory (DeleteTopics).
    Delete,
    /// Release what an idle partition does not need: caches, preallocation, open files (sent by
    /// the shard to keep its open files within budget; the next request reopens them).
    Release,
    /// Replication, on the leader: a follower's fetch (`crate::replication`).
    ReplicaFetch {
        /// The follower's node id.
        replica: NodeId,
        /// Its log end: where it wants to read from.
        from: Offset,
        /// Partition byte budget.
        max_bytes: usize,
        /// The leader epoch the follower thinks is current.
        current_leader_epoch: LeaderEpoch,
        /// The epoch of the follower's last batch (KIP-320), if it names one.
        last_fetched_epoch: Option<LeaderEpoch>,
    },
    /// Replication, on a follower: its log end and the epoch of its last batch (its fetcher's
    /// next Fetch).
    FollowerPosition,
    /// Replication, on a follower: batches fetched from the leader at `epoch`, and the leader's
    /// high watermark.
    ReplicaAppend {
        /// The leader epoch the fetch was made at.
        epoch: LeaderEpoch,
        /// Whole batches as the leader sent them.
        records: Bytes,
        /// The leader's high watermark.
        leader_high_watermark: Offset,
        /// The leader's log start (DeleteRecords there moves it here too).
        leader_log_start: Offset,
    },
    /// Replication, on a follower: the leader said the log diverges after `end_offset` of
    /// `diverging_epoch` (KIP-320): cut what follows.
    Truncate {
        /// The leader epoch the fetch was made at.
        epoch: LeaderEpoch,
        /// The largest epoch of the leader's log up to the follower's.
        diverging_epoch: LeaderEpoch,
        /// Where that epoch ends in the leader's log.
        end_offset: Offset,
    },
    /// Replication, on a follower: the leader answered OFFSET_OUT_OF_RANGE because its log
    /// starts past this one's end (DeleteRecords or retention while this replica was away):
    /// empty the log and start it at `leader_log_start` (Kafka's truncateFullyAndStartAt).
    ResetToLeaderStart {
        /// The leader epoch the fetch was made at.
        epoch: LeaderEpoch,
        /// The leader's log start.
        leader_log_start: Offset,
    },
    /// Where `epoch` ended in this log (OffsetForLeaderEpoch).
    EndOffsetForEpoch {
        /// The epoch asked about.
        epoch: LeaderEpoch,
    },
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
        /// read_committed: the aborted transactions among the chunks, in marker order.
        aborted: Vec<AbortedTxn>,
    },
    /// A transactional producer's first write here since its transaction began: its
    /// coordinator must confirm the partition is in the transaction, then the append is sent
    /// again with `guard` (a marker for the producer in between voids the guard).
    NeedsTxnVerification {
        /// The producer to verify.
        producer: (ProducerId, ProducerEpoch),
        /// What to send back with the batch.
        guard: u64,
        /// The batch, handed back unwritten.
        batch: ValidatedBatch,
    },
    /// Answer to [`PartitionOp::WriteTxnMarker`]: the marker is durable.
    MarkerWritten,
    /// Answer to [`PartitionOp::DescribeProducers`].
    Producers(Vec<ProducerView>),
    /// Answer to [`PartitionOp::Offsets`].
    Offsets(Positions),
    /// Answer to [`PartitionOp::TierOffsets`].
    TierOffsets {
        /// The first offset on local disk (the log start when nothing is tiered).
        local_log_start: Offset,
        /// The highest offset the remote tier holds (`None`: nothing tiered).
        highest_tiered: Option<Offset>,
    },
    /// Answer to [`PartitionOp::LogSize`].
    LogSize {
        /// Bytes of whole batches in the log's segments.
        bytes: u64,
        /// The log's positions.
        positions: Positions,
    },
    /// Answer to [`PartitionOp::OffsetForTimestamp`]: `(offset, timestamp)` if any.
    OffsetForTimestamp(Option<(Offset, TimestampMs)>, Positions),
    /// Answer to [`PartitionOp::WaitForData`] (whether data arrived or time ran out).
    Waited,
    /// Answer to [`PartitionOp::Delete`].
    Deleted,
    /// Answer to [`PartitionOp::Release`] and [`PartitionOp::ReturnTxnGuard`].
    Released,
    /// Answer to [`PartitionOp::ReplicaFetch`].
    ReplicaRead {
        /// Positions when the read was served (the leader's high watermark).
        positions: Positions,
        /// Whole record batches from the follower's log end.
        chunks: Vec<Bytes>,
        /// The follower's log diverges after this end of this epoch: nothing is sent, the
        /// follower cuts its log there first (KIP-320).
        diverging: Option<(LeaderEpoch, Offset)>,
    },
    /// Answer to [`PartitionOp::ReplicaFetch`] from an offset outside the leader's log
    /// (OFFSET_OUT_OF_RANGE), with the leader's positions: a follower below its log start
    /// resets to it.
    ReplicaOutOfRange(Positions),
    /// Answer to [`PartitionOp::FollowerPosition`].
    FollowerPosition {
        /// The follower's log end.
        log_end: Offset,
        /// The epoch of its last batch, if its log recorded one.
        last_epoch: Option<LeaderEpoch>,
    },
    /// Answer to [`PartitionOp::ReplicaAppend`], [`PartitionOp::Truncate`] and
    /// [`PartitionOp::ResetToLeaderStart`].
    ReplicaAppended,
    /// Answer to [`PartitionOp::EndOffsetForEpoch`]: the largest epoch `<=` the one asked and
    /// where it ended (`None`: older than every epoch here), and the positions.
    EpochEnd(Option<(LeaderEpoch, Offset)>, Positions),
    /// The operation failed with this Kafka error code.
    Error(ErrorCode),
}

impl PartitionReply {
    /// The Kafka error code this reply carries (`ErrorCode::None` for success).
    pub fn error_code(&self) -> ErrorCode {
        match self {
            PartitionReply::Error(code) => *code,
            PartitionReply::ReplicaOutOfRange(_) => ErrorCode::OffsetOutOfRange,
            _ => ErrorCode::None,
        }
    }
}

/// An operation on one partition, as it crosses to the owning shard.
#[derive(Debug)]
pub struct PartitionCall {
    /// The partition.
    pub tp: TopicPartition,
    /// The operation.
    pub op: PartitionOp,
}
