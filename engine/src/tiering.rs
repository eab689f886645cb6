//! What tiered storage (KIP-405) asks of a log: which sealed segments may be copied to the
//! remote tier, where their files are, small side files for its metadata, and a gate that
//! keeps local retention from deleting a segment before its copy is durable.
//!
//! The engine does no remote I/O. The broker copies a segment's files (`.log`, `.index`,
//! `.timeindex`, `.txnindex`, and the partition's `producer.snapshot` and
//! `leader-epoch-checkpoint` as they are at copy time) and, once the remote log metadata says
//! `COPY_FINISHED` on disk, moves the gate ([`PartitionLog::set_remote_copied_until`]).
//!
//! | gate                   | what `apply_retention` may delete                                  |
//! |------------------------|--------------------------------------------------------------------|
//! | `None` (not tiered)    | sealed segments past `retention_ms` / `retention_bytes`            |
//! | `Some(copied_until)`   | the same, and only segments whose offsets all lie below `copied_until` |
//!
//! With the gate set, the broker passes the *local* retention (`local.retention.*`) as
//! `retention_ms` / `retention_bytes`: the log on disk is then the local tier only, and its log
//! start is the local log start (Kafka's `localLogStartOffset`).

use crate::error::EngineError;
use crate::io::Storage;
use crate::leader_epochs::LEADER_EPOCH_FILE;
use crate::partition_log::{PartitionLog, PRODUCER_SNAPSHOT_FILE};
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::small_file;
use crate::types::{Offset, TimestampMs};
use bytes::Bytes;
use std::path::PathBuf;

/// A sealed segment's summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SealedSegment {
    /// Its first offset (its file name).
    pub base: Offset,
    /// One past its last offset (the next segment's base).
    pub next_offset: Offset,
    /// Bytes of whole batches in its `.log`.
    pub size_bytes: u64,
    /// Its largest batch max timestamp (`NONE`: empty).
    pub max_timestamp: TimestampMs,
}

/// The local files of one sealed segment, and the partition files copied beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentFiles {
    /// `.log`.
    pub log: PathBuf,
    /// `.index`.
    pub index: PathBuf,
    /// `.timeindex`.
    pub time_index: PathBuf,
    /// `.txnindex` (it may not exist: only a segment with an aborted transaction has one).
    pub txn_index: PathBuf,
    /// `producer.snapshot` (the partition's, as of its latest checkpoint; may not exist).
    pub producer_snapshot: PathBuf,
    /// `leader-epoch-checkpoint` (the partition's; may not exist).
    pub leader_epochs: PathBuf,
}

impl<S: Storage> PartitionLog<S> {
    /// The sealed segments wholly below the high watermark, oldest first: what may be copied
    /// to the remote tier (the active segment never is).
    pub fn copyable_segments(&self) -> Vec<SealedSegment> {
        let hw = self.positions.high_watermark();
        let sealed = &self.segments[..self.segments.len() - 1];
        sealed
            .iter()
            .filter(|s| s.next_offset <= hw && !s.is_empty())
            .map(|s| SealedSegment {
                base: s.base,
                next_offset: s.next_offset,
                size_bytes: s.size_bytes,
                max_timestamp: s.max_timestamp,
            })
            .collect()
    }

    /// Where the files of the segment at `base` are.
    pub fn segment_files(&self, base: Offset) -> SegmentFiles {
        let file = |kind| self.dir.join(segment_file_name(base, kind));
        SegmentFiles {
            log: file(FileKind::Log),
            index: file(FileKind::Index),
            time_index: file(FileKind::TimeIndex),
            txn_index: file(FileKind::TxnIndex),
            producer_snapshot: self.dir.join(PRODUCER_SNAPSHOT_FILE),
            leader_epochs: self.dir.join(LEADER_EPOCH_FILE),
        }
    }

    /// Sets the tiered-storage gate (see the module doc): local retention deletes only
    /// segments below `copied_until`. `None` removes the gate (the topic is not tiered).
    pub fn set_remote_copied_until(&mut self, copied_until: Option<Offset>) {
        self.remote_copied_until = copied_until;
    }

    /// The gate in force.
    pub fn remote_copied_until(&self) -> Option<Offset> {
        self.remote_copied_until
    }

    /// Whether the gate lets the oldest segment go (it ends at `next_offset`).
    pub(crate) fn gate_allows(&self, next_offset: Offset) -> bool {
        self.remote_copied_until
            .is_none_or(|copied| next_offset <= copied)
    }

    /// Atomically replaces the side file `name` in the partition directory (durable on
    /// return). Names must not collide with the engine's own files: the broker uses
    /// `remote-log-metadata`.
    pub async fn write_side_file(&self, name: &str, bytes: &[u8]) -> Result<(), EngineError> {
        self.check_usable()?;
        small_file::write_atomic(&*self.storage, &self.dir, name, bytes).await?;
        Ok(())
    }

    /// The side file `name`, `None` if it does not exist.
    pub async fn read_side_file(&self, name: &str) -> Result<Option<Bytes>, EngineError> {
        Ok(small_file::read_whole(&*self.storage, &self.dir.join(name)).await?)
    }
}
