//! Rill storage engine: one durable, segmented log per partition, Kafka's on-disk layout.
//!
//! # Map
//! - [`types`]: `Offset`, `RelativeOffset`, `TimestampMs` (Kafka's, from `rill-types`),
//!   `FilePosition` newtypes.
//! - [`batch`]: what the log keeps of a batch ([`batch::BatchMeta`]) and the check of batches
//!   read back from storage; the header itself is `rill-types`'. Appends take a
//!   [`batch::ValidatedBatch`], checked once where it entered the broker.
//! - [`config`]: [`LogConfig`], [`FlushPolicy`] (Kafka topic configs, units last).
//! - [`error`]: [`EngineError`] and the Kafka [`ErrorCode`] each variant answers with.
//! - [`io`]: the [`io::Storage`] / [`io::BlockFile`] / [`io::Clock`] traits; `io::glommio` (real) and
//!   `io::sim` (seeded faults).
//! - [`log_manager`]: [`LogManager`], owner of the data directory layout.
//! - [`partition_log`]: [`PartitionLog`], append / flush / read / retention of one partition;
//!   its reads (`read_path.rs`) go through [`read_cache::ReadCache`], one per core, filled by
//!   write-through of appended batches and by sequential read-ahead.
//! - [`prealloc`]: how far ahead of its data an active `.log` is allocated (a step following the
//!   write rate, within a per-shard budget).
//! - [`verify`]: offline check of every batch and index of a partition, and its repair (`rill check`).
//! - [`control`]: transaction markers (COMMIT/ABORT control batches) in Kafka's format;
//!   `transactions.rs`: markers, the last stable offset and aborted transactions of a log.
//! - [`leader_epochs`]: which leader epoch wrote which offsets (`leader-epoch-checkpoint`);
//!   `replica.rs`: what replication asks of a log (stamped appends, follower appends keeping
//!   the leader's offsets, a high watermark set from outside, truncation to a divergence point).
//! - [`producer_state`]: idempotent sequences and open transactions per producer.
//! - [`cleaner`]: log compaction (offset map, cleaned segments, crash-safe swap).
//! - [`tiering`]: what tiered storage asks of a log (copyable sealed segments, their files,
//!   side files, the gate that keeps local retention from deleting what is not copied yet).
//!
//! # On-disk layout
//! ```text
//! <data-dir>/<topic>-<partition>/
//!     00000000000000000000.log        v2 record batches, baseOffset assigned, back to back
//!     00000000000000000000.index      sparse: [u32 relative offset BE][u32 file position BE] per entry
//!     00000000000000000000.timeindex  [i64 max timestamp BE][u32 relative offset BE] per entry
//!     00000000000000000000.txnindex   aborted transactions whose ABORT marker is in the segment
//!                                     (Kafka's 34-byte entries; only when there is one)
//!     00000000000000001234.log ...    next segment, named by its base offset (20 digits)
//!     producer.snapshot               producer state (sequences, open transactions) as of an
//!                                     offset (CRC-32C protected)
//!     log-start-offset                checkpoint of the log start after DeleteRecords
//!     leader-epoch-checkpoint         leader epochs and the offset each started at (Kafka's text)
//!     cleaner-checkpoint              where compaction's dirty section starts
//!     *.cleaned, *.swap, *.deleted    a compaction swap in progress (see cleaner/swap.rs)
//! ```
//! Invariants: segments are contiguous (each base offset is the previous segment's next offset;
//! inside a sealed segment compaction may leave gaps between batches);
//! after a clean shutdown each `.log` is exactly its whole batches; indexes carry no checksum and
//! are rebuilt from the log when they do not verify (the log is the truth).
//!
//! Positions: `log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset`,
//! `durable_offset <= log_end_offset`.
//!
//! # Bounds
//! - Active segment: at most [`segment::appender::WRITE_BYTES_MAX`] (1 MiB) + one block buffered.
//! - Disk ahead of the data: an empty partition has no data block; the active `.log`'s first
//!   write takes [`prealloc::PREALLOC_STEP_MIN`] (64 KiB), then it is preallocated by about a
//!   second of writes at the partition's rate, 0 (a trickle: writes extend the file) or 64 KiB
//!   to [`prealloc::PREALLOC_STEP_MAX`] (16 MiB), and all partitions of a shard hold at most
//!   their [`prealloc::PreallocBudget`] ahead ([`prealloc::SHARD_PREALLOC_BYTES_DEFAULT`],
//!   256 MiB).
//! - Tail batch cache: `LogConfig::batch_cache_bytes_max` per partition.
//! - Read cache: one [`read_cache::ReadCache`] per core, a hard bound in bytes
//!   (`rill.read.cache.bytes`) over extents written through, loaded and loading; least
//!   recently used evicted.
//! - Open files: the active `.log` plus at most [`partition_log::OPEN_SEALED_FILES_MAX`] sealed
//!   ones; none once the partition is released idle ([`PartitionLog::open_files`]).
//! - Sparse indexes (8 + 12 bytes per `index_interval_bytes` of log) are in memory only for the
//!   active segment and the open sealed ones; other sealed segments keep a summary of a few
//!   dozen bytes and reload their indexes when a read opens them.
//! - Idle partition: [`PartitionLog::release_idle_memory`] drops the batch cache, sealed files
//!   and indexes, the active indexes (checkpointed when more than
//!   [`partition_log::CLOSE_SCAN_BYTES_MAX`], 64 KiB, past the last checkpoint) and write
//!   buffer, trims the active `.log` to its batches and closes it: a few KiB remain
//!   ([`PartitionLog::resident_bytes`]; tested below 8 KiB). Closing a log writes indexes and
//!   snapshot only past that same 64 KiB; below it the next open validates the tail instead.
//! - A new, empty partition costs no fsync: its directory and `.log` entries are synced before
//!   its first write.
//! - Crash recovery scans at most about [`partition_log::CHECKPOINT_BYTES`] (256 MiB, or a quarter
//!   segment) plus one flush's worth of the active segment: its indexes and the producer snapshot
//!   are checkpointed that often.
//!
//! # Write path
//! Each batch is copied once, into a DMA buffer the file lends ([`io::BlockFile::alloc_buffer`]);
//! a full buffer (64 KiB growing to [`segment::appender::WRITE_BYTES_MAX`] while appends stream)
//! is written in the background and submitted at once (the task queue yields), so the next
//! buffer fills while it is in flight. Between writes only the partial tail block is held.
//!
//! Measured figures (benches `engine_append`, `engine_read`, `engine_recovery`, `engine_index`),
//! each with its date and command, are in `BENCHMARKS.md` ("Storage engine").
#![forbid(unsafe_code)]

pub mod batch;
pub mod batch_cache;
pub mod cleaner;
pub mod config;
pub mod control;
pub mod error;
mod index_lifecycle;
pub mod io;
pub mod leader_epochs;
pub mod log_manager;
pub mod partition_log;
pub mod positions;
pub mod prealloc;
pub mod producer_state;
pub mod read_cache;
mod read_path;
mod recovery;
mod replica;
mod retention;
pub mod segment;
mod small_file;
pub mod tiering;
mod transactions;

#[cfg(test)]
mod config_tests;
#[cfg(test)]
mod index_lifecycle_tests;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod op_fuzz;
#[cfg(test)]
mod read_path_tests;
#[cfg(test)]
mod replica_tests;
#[cfg(test)]
mod tiering_tests;
#[cfg(test)]
mod txn_tests;
pub mod types;
pub mod verify;
#[cfg(test)]
mod verify_tests;
#[cfg(test)]
mod write_through_tests;

/// The `bytes` crate the API speaks (`BytesMut` in, `Bytes` out), re-exported so callers match.
pub use bytes;
pub use config::{FlushPolicy, LogConfig};
pub use control::TxnMarker;
pub use error::EngineError;
pub use log_manager::LogManager;
pub use partition_log::{AppendInfo, PartitionLog, ReadBatches};
pub use positions::Positions;
pub use producer_state::ProducerView;
pub use recovery::RecoveryStats;
pub use rill_types::ErrorCode;
pub use segment::txn_index::AbortedTxn;
pub use types::{
    FilePosition, Offset, PartitionIndex, RelativeOffset, TimestampMs, TopicPartitionRef,
};
