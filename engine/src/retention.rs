//! Retention and DeleteRecords: moving the log start forward.
//!
//! Only whole sealed segments are deleted (the active one never is): by time when a segment's
//! max timestamp is older than `retention_ms`, by size while the log without its oldest segment
//! is still at least `retention_bytes` (Kafka's rule). DeleteRecords moves the log start inside
//! a segment; that start is persisted in a checkpoint before any file is removed, so a crash
//! never lets deleted records reappear as readable. A tiered log deletes by retention only what
//! the remote tier holds durably (`tiering.rs`).

use crate::error::EngineError;
use crate::io::Storage;
use crate::partition_log::{PartitionLog, LOG_START_FILE};
use crate::small_file;
use crate::types::{Offset, TimestampMs};

impl<S: Storage> PartitionLog<S> {
    /// Deletes sealed segments past `retention_ms` / `retention_bytes`.
    pub async fn apply_retention(&mut self, now: TimestampMs) -> Result<(), EngineError> {
        self.check_usable()?;
        while self.segments.len() > 1 && self.oldest_segment_expired(now) {
            self.delete_oldest_segment().await?;
        }
        Ok(())
    }

    fn oldest_segment_expired(&self, now: TimestampMs) -> bool {
        let oldest = &self.segments[0];
        if !self.gate_allows(oldest.next_offset) {
            return false; // tiered: not yet durable in the remote tier
        }
        let by_time = self.config.retention_ms.is_some_and(|ms| {
            oldest.max_timestamp != TimestampMs::NONE
                && now.0.saturating_sub(oldest.max_timestamp.0) > ms as i64
        });
        let total: u64 = self.segments.iter().map(|s| s.size_bytes).sum();
        let by_size = self
            .config
            .retention_bytes
            .is_some_and(|max| total.saturating_sub(oldest.size_bytes) >= max);
        by_time || by_size
    }

    /// Deletes the oldest (sealed) segment and moves the log start to the next one.
    async fn delete_oldest_segment(&mut self) -> Result<(), EngineError> {
        assert!(
            self.segments.len() > 1,
            "the active segment is never deleted"
        );
        let next_base = self.segments[1].base;
        assert!(
            next_base <= self.positions.durable(),
            "sealed segments are durable"
        );
        let removed = self.segments.remove(0);
        self.open_sealed.retain(|&base| base != removed.base);
        if next_base > self.positions.log_start() {
            self.positions.advance_log_start(next_base);
            self.refresh_last_stable();
        }
        self.read_cache.forget_below(self.read_cache_log, next_base);
        if let Some(file) = removed.file {
            file.close_quietly().await;
        }
        self.remove_segment_files(removed.base).await?;
        tracing::debug!(dir = %self.dir.display(), base = removed.base.0, "deleted segment");
        Ok(())
    }

    /// Moves the log start to `offset` (DeleteRecords; -1 means the high watermark) and deletes
    /// the sealed segments wholly below it. Returns the new log start.
    pub async fn delete_records_before(&mut self, offset: Offset) -> Result<Offset, EngineError> {
        self.check_usable()?;
        let hw = self.positions.high_watermark();
        let target = if offset.0 == -1 { hw } else { offset };
        if target.0 < 0 || target > hw {
            let (log_start, log_end) = (self.positions.log_start(), self.positions.log_end());
            return Err(EngineError::OffsetOutOfRange {
                requested: offset,
                log_start,
                log_end,
            });
        }
        if target <= self.positions.log_start() {
            return Ok(self.positions.log_start());
        }
        small_file::write_atomic(
            &*self.storage,
            &self.dir,
            LOG_START_FILE,
            &small_file::encode_log_start(target.0),
        )
        .await?;
        self.positions.advance_log_start(target);
        self.refresh_last_stable();
        while self.segments.len() > 1 && self.segments[1].base <= target {
            self.delete_oldest_segment().await?;
        }
        Ok(target)
    }
}

/// Closing a file we are about to delete: errors do not matter.
trait CloseQuietly {
    async fn close_quietly(self);
}

impl<F: crate::io::BlockFile> CloseQuietly for F {
    async fn close_quietly(self) {
        let _ = self.close().await;
    }
}
