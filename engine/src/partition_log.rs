//! [`PartitionLog`]: the log of one partition.

use crate::config::LogConfig;
use crate::error::EngineError;
use crate::io::{Clock, Storage};
use crate::types::{Offset, TimestampMs};
use bytes::{Bytes, BytesMut};
use std::path::PathBuf;
use std::rc::Rc;

/// What an append did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset assigned to the batch's first record.
    pub base_offset: Offset,
    /// Offset of the batch's last record.
    pub last_offset: Offset,
    /// Broker append time for LogAppendTime topics; `TimestampMs::NONE` (CreateTime).
    pub log_append_time: TimestampMs,
    /// The log start offset after the append.
    pub log_start_offset: Offset,
}

/// Whole batches read from the log.
#[derive(Clone, Debug, Default)]
pub struct ReadBatches {
    /// Whole v2 record batches, in offset order, ready to be sent as they are.
    pub chunks: Vec<Bytes>,
    /// High watermark when the read was served.
    pub high_watermark: Offset,
    /// Log start offset when the read was served.
    pub log_start_offset: Offset,
}

impl ReadBatches {
    /// Total bytes of all chunks.
    pub fn bytes_len(&self) -> usize {
        self.chunks.iter().map(|c| c.len()).sum()
    }
}

/// The durable, segmented log of one partition.
pub struct PartitionLog<S: Storage> {
    storage: Rc<S>,
    dir: PathBuf,
    config: LogConfig,
    clock: Rc<dyn Clock>,
}

impl<S: Storage> PartitionLog<S> {
    /// Opens or creates the log in `dir`, recovering it if it was not closed cleanly.
    pub async fn open(
        storage: Rc<S>,
        dir: PathBuf,
        config: LogConfig,
        clock: Rc<dyn Clock>,
    ) -> Result<Self, EngineError> {
        let _ = (&storage, &dir, &config, &clock);
        todo!()
    }

    /// Appends one v2 record batch, assigning offsets by rewriting its baseOffset.
    pub async fn append(
        &mut self,
        batch: BytesMut,
        now: TimestampMs,
    ) -> Result<AppendInfo, EngineError> {
        let _ = (batch, now);
        todo!()
    }

    /// Writes everything appended so far and fdatasyncs it; returns the durable offset.
    pub async fn flush(&mut self) -> Result<Offset, EngineError> {
        todo!()
    }

    /// Whether the flush policy says a flush is owed at `now`.
    pub fn flush_due(&self, now: TimestampMs) -> bool {
        let _ = now;
        todo!()
    }

    /// First offset still in the log.
    pub fn log_start_offset(&self) -> Offset {
        todo!()
    }

    /// Next offset to be assigned.
    pub fn log_end_offset(&self) -> Offset {
        todo!()
    }

    /// Everything below this offset survives a crash.
    pub fn durable_offset(&self) -> Offset {
        todo!()
    }

    /// Consumers may read below this offset.
    pub fn high_watermark(&self) -> Offset {
        todo!()
    }

    /// Whole batches from the one containing `from`, below the high watermark, up to `max_bytes`
    /// (but at least one batch if any).
    pub async fn read(
        &mut self,
        from: Offset,
        max_bytes: usize,
    ) -> Result<ReadBatches, EngineError> {
        let _ = (from, max_bytes);
        todo!()
    }

    /// First batch whose max timestamp is >= `ts`: its base offset and max timestamp.
    pub async fn offset_for_timestamp(
        &mut self,
        ts: TimestampMs,
    ) -> Result<Option<(Offset, TimestampMs)>, EngineError> {
        let _ = ts;
        todo!()
    }

    /// Deletes sealed segments past `retention_ms` / `retention_bytes`.
    pub async fn apply_retention(&mut self, now: TimestampMs) -> Result<(), EngineError> {
        let _ = now;
        todo!()
    }

    /// Moves the log start to `offset` (DeleteRecords); returns the new log start.
    pub async fn delete_records_before(&mut self, offset: Offset) -> Result<Offset, EngineError> {
        let _ = offset;
        todo!()
    }

    /// Flushes, trims preallocation so each `.log` is exactly its batches, and closes.
    pub async fn close(self) -> Result<(), EngineError> {
        todo!()
    }
}
