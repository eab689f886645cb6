//! What a handler asks a transactional id's coordinator, and its answers. All `Send`: a request
//! that arrives on one shard for an id coordinated by another crosses cores.

use rill_protocol::ErrorCode;
use rill_types::{DurationMs, ProducerEpoch, ProducerId, TimestampMs, TopicPartition};

use crate::group::offsets::CommittedOffset;
use crate::group::ops::MemberRef;

/// A transaction's offsets for one group: (topic, partition, offset).
pub type TxnOffsets = Vec<(String, i32, CommittedOffset)>;

/// The transaction a request speaks for: the producer id and epoch InitProducerId handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    /// Producer id.
    pub id: ProducerId,
    /// Producer epoch.
    pub epoch: ProducerEpoch,
}

/// An operation on one transactional id, run on its coordinator shard.
#[derive(Debug)]
pub enum TxnOp {
    /// InitProducerId with a transactional id.
    InitProducerId {
        /// The producer's `transaction.timeout.ms`.
        timeout_ms: i32,
        /// v3+ (KIP-360): the producer id and epoch the client had, if any.
        expected: Option<(ProducerId, ProducerEpoch)>,
    },
    /// AddPartitionsToTxn (`verify_only`: KIP-890's check, nothing added).
    AddPartitions {
        /// Who asks.
        producer: TxnProducer,
        /// The partitions.
        partitions: Vec<TopicPartition>,
        /// Only report whether each partition is in the transaction.
        verify_only: bool,
    },
    /// AddOffsetsToTxn.
    AddOffsets {
        /// Who asks.
        producer: TxnProducer,
        /// The consumer group.
        group: String,
    },
    /// TxnOffsetCommit (checked against the transaction, then stored as pending by the group).
    CommitOffsets {
        /// Who asks.
        producer: TxnProducer,
        /// The consumer group.
        group: String,
        /// The member committing (generation -1 and no member id: not checked).
        member: MemberRef,
        /// The offsets.
        offsets: TxnOffsets,
    },
    /// EndTxn.
    End {
        /// Who asks.
        producer: TxnProducer,
        /// Commit (true) or abort.
        commit: bool,
    },
    /// DescribeTransactions (one id).
    Describe,
    /// ListTransactions: the ids on the receiving shard (the id of the message is ignored).
    List(TxnListFilter),
}

/// ListTransactions filters (empty = everything).
#[derive(Debug, Clone, Default)]
pub struct TxnListFilter {
    /// Kafka state names.
    pub states: Vec<String>,
    /// Producer ids.
    pub producer_ids: Vec<ProducerId>,
    /// v1: only transactions running at least this long (negative: no filter).
    pub min_duration_ms: DurationMs,
}

/// One transactional id as DescribeTransactions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnDescription {
    /// Kafka state name.
    pub state: String,
    /// `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// When the current transaction began ([`TimestampMs::NONE`]: none).
    pub start_ms: TimestampMs,
    /// Producer id.
    pub producer_id: ProducerId,
    /// Producer epoch.
    pub producer_epoch: ProducerEpoch,
    /// Partitions in the transaction, offsets partitions of its groups included.
    pub partitions: Vec<TopicPartition>,
}

/// One transactional id as ListTransactions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnListing {
    /// Transactional id.
    pub transactional_id: String,
    /// Producer id.
    pub producer_id: ProducerId,
    /// Kafka state name.
    pub state: String,
}

/// The answer to a [`TxnOp`].
#[derive(Debug, PartialEq)]
pub enum TxnReply {
    /// InitProducerId.
    Init(Result<(ProducerId, ProducerEpoch), ErrorCode>),
    /// AddPartitionsToTxn: one error per partition, request order.
    Partitions(Vec<ErrorCode>),
    /// AddOffsetsToTxn and EndTxn.
    Done(ErrorCode),
    /// TxnOffsetCommit: one error per offset, request order.
    Offsets(Vec<ErrorCode>),
    /// DescribeTransactions.
    Describe(Result<TxnDescription, ErrorCode>),
    /// ListTransactions.
    List(Vec<TxnListing>),
    /// The coordinator could not be reached: this error for everything.
    Unavailable(ErrorCode),
}

/// A transaction operation for the shard that coordinates its transactional id.
#[derive(Debug)]
pub struct TxnCall {
    /// The transactional id ("" for [`TxnOp::List`]).
    pub transactional_id: String,
    /// What to do.
    pub op: TxnOp,
}

/// `code` as a client at `version` of an API knows it: PRODUCER_FENCED exists from
/// `fenced_from` on (older clients get INVALID_PRODUCER_EPOCH), TRANSACTION_ABORTABLE from
/// `abortable_from` (older ones get INVALID_TXN_STATE), as Kafka answers them.
pub fn for_client(
    code: ErrorCode,
    version: i16,
    fenced_from: i16,
    abortable_from: i16,
) -> ErrorCode {
    match code {
        ErrorCode::ProducerFenced if version < fenced_from => ErrorCode::InvalidProducerEpoch,
        ErrorCode::TransactionAbortable if version < abortable_from => ErrorCode::InvalidTxnState,
        other => other,
    }
}
