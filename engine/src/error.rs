//! Engine errors and their Kafka error codes.

use crate::types::Offset;
use rill_types::{ErrorCode, ProducerEpoch, Sequence};

/// What can go wrong in the engine. Each variant maps to a Kafka error code.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The requested offset is below the log start or above the log end.
    #[error("offset {requested} out of range [{log_start}, {log_end}]")]
    OffsetOutOfRange {
        /// What the caller asked for.
        requested: Offset,
        /// First offset still in the log.
        log_start: Offset,
        /// Next offset to be assigned.
        log_end: Offset,
    },
    /// A batch failed length, magic or CRC-32C checks.
    #[error("corrupt record batch: {0}")]
    CorruptBatch(String),
    /// A batch is structurally valid but its contents are not acceptable (e.g. no records).
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    /// The underlying storage failed; the partition must be reopened.
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The disk is full.
    #[error("storage full")]
    StorageFull,
    /// An idempotent producer re-sent a batch the log already holds at these offsets.
    #[error("duplicate sequence; batch already at offsets {base_offset}..={last_offset}")]
    DuplicateSequence {
        /// Base offset the original batch got.
        base_offset: Offset,
        /// Last offset the original batch got.
        last_offset: Offset,
    },
    /// An idempotent producer skipped or reordered sequence numbers.
    #[error("out of order sequence: expected {expected}, got {received}")]
    OutOfOrderSequence {
        /// The sequence the log expected next.
        expected: Sequence,
        /// The sequence the batch carried.
        received: Sequence,
    },
    /// An idempotent producer used an epoch older than the current one (fenced).
    #[error("producer epoch {received} is older than current {current}")]
    InvalidProducerEpoch {
        /// The current epoch of the producer id.
        current: ProducerEpoch,
        /// The epoch on the batch.
        received: ProducerEpoch,
    },
    /// A producer's write does not fit its transaction state (e.g. a non-transactional batch
    /// while its transaction is open).
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    /// A transaction marker from an older coordinator than the last marker's.
    #[error("coordinator epoch {received} is older than current {current}")]
    CoordinatorFenced {
        /// The coordinator epoch of the last marker.
        current: i32,
        /// The marker's coordinator epoch.
        received: i32,
    },
    /// An earlier I/O failure left this partition log unusable until it is reopened.
    #[error("partition log failed earlier and must be reopened")]
    Failed,
    /// The partition directory holds something the engine cannot interpret.
    #[error("invalid log layout: {0}")]
    Layout(String),
    /// The configuration is out of the engine's bounds.
    #[error("invalid log config: {0}")]
    InvalidConfig(String),
}

impl EngineError {
    /// The Kafka error code a response should carry for this error (Kafka's `Errors.java`).
    pub fn kafka_error_code(&self) -> ErrorCode {
        match self {
            EngineError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
            EngineError::CorruptBatch(_) => ErrorCode::CorruptMessage,
            EngineError::InvalidRecord(_) => ErrorCode::InvalidRecord,
            EngineError::Io(_) | EngineError::StorageFull | EngineError::Failed => {
                ErrorCode::KafkaStorageError
            }
            EngineError::Layout(_) => ErrorCode::KafkaStorageError,
            EngineError::DuplicateSequence { .. } => ErrorCode::DuplicateSequenceNumber,
            EngineError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequenceNumber,
            EngineError::InvalidProducerEpoch { .. } => ErrorCode::InvalidProducerEpoch,
            EngineError::InvalidConfig(_) => ErrorCode::InvalidConfig,
            EngineError::InvalidTxnState(_) => ErrorCode::InvalidTxnState,
            EngineError::CoordinatorFenced { .. } => ErrorCode::TransactionCoordinatorFenced,
        }
    }

    /// Maps an I/O error, turning ENOSPC into `StorageFull`.
    pub fn from_io(e: std::io::Error) -> EngineError {
        if e.raw_os_error() == Some(28) {
            return EngineError::StorageFull;
        }
        EngineError::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_kafka() {
        let e = EngineError::OffsetOutOfRange {
            requested: Offset(9),
            log_start: Offset(0),
            log_end: Offset(3),
        };
        assert_eq!(e.kafka_error_code().code(), 1);
        assert_eq!(
            EngineError::CorruptBatch("x".into())
                .kafka_error_code()
                .code(),
            2
        );
        assert_eq!(EngineError::StorageFull.kafka_error_code().code(), 56);
        let dup = EngineError::DuplicateSequence {
            base_offset: Offset(1),
            last_offset: Offset(2),
        };
        assert_eq!(dup.kafka_error_code().code(), 46);
        assert_eq!(
            EngineError::from_io(std::io::Error::from_raw_os_error(28))
                .kafka_error_code()
                .code(),
            56
        );
    }
}
