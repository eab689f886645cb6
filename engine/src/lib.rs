//! Rill storage engine: one durable, segmented log per partition, Kafka's on-disk layout.
//!
//! # Map
//! - [`types`]: `Offset`, `TimestampMs`, `RelativeOffset`, `FilePosition` newtypes.
//! - [`config`]: [`LogConfig`], [`FlushPolicy`] (Kafka topic configs, units last).
//! - [`error`]: [`EngineError`] and its Kafka error codes.
//! - [`io`]: the [`io::Storage`] / [`io::BlockFile`] / [`io::Clock`] traits; `io::glommio` (real) and
//!   `io::sim` (seeded faults).
//! - [`log_manager`]: [`LogManager`], owner of the data directory layout.
//! - [`partition_log`]: [`PartitionLog`], append / flush / read / retention of one partition.
//!
//! # On-disk layout
//! ```text
//! <data-dir>/<topic>-<partition>/
//!     00000000000000000000.log        v2 record batches, baseOffset assigned, back to back
//!     00000000000000000000.index      sparse: [u32 relative offset BE][u32 file position BE] per entry
//!     00000000000000000000.timeindex  [i64 max timestamp BE][u32 relative offset BE] per entry
//!     00000000000000001234.log ...    next segment, named by its base offset (20 digits)
//!     producer.snapshot               idempotent-producer state as of an offset (CRC-32C protected)
//!     log-start-offset                checkpoint of the log start after DeleteRecords
//! ```
//! Invariants: segments are contiguous (each base offset is the previous segment's next offset);
//! after a clean shutdown each `.log` is exactly its whole batches; indexes carry no checksum and
//! are rebuilt from the log when they do not verify (the log is the truth).
//!
//! Positions: `log_start_offset <= high_watermark <= log_end_offset`, `durable_offset <= log_end_offset`.
//!
//! # Bounds
//! - Active segment: at most [`segment::appender::WRITE_BYTES_MAX`] (1 MiB) + one block buffered;
//!   files preallocated in [`partition_log::PREALLOC_BYTES`] (16 MiB) steps.
//! - Tail batch cache: `LogConfig::batch_cache_bytes_max` per partition.
//! - Open files: the active `.log` plus at most [`partition_log::OPEN_SEALED_FILES_MAX`] sealed ones.
//! - Sparse indexes (8 + 12 bytes per `index_interval_bytes` of log) are in memory only for the
//!   active segment and the open sealed ones; other sealed segments keep a summary of a few
//!   dozen bytes and reload their indexes when a read opens them.
//! - Idle partition: [`PartitionLog::release_idle_memory`] drops the batch cache, sealed files
//!   and indexes, the active indexes (checkpointed) and write buffer: a few KiB remain
//!   ([`PartitionLog::resident_bytes`]; tested below 8 KiB).
//! - Crash recovery scans at most about [`partition_log::CHECKPOINT_BYTES`] (256 MiB, or a quarter
//!   segment) plus one flush's worth of the active segment: its indexes and the producer snapshot
//!   are checkpointed that often.
//!
//! # Measured (2-core VM, ext4 on virtio, other builds running; figures are noisy)
//! - Write path: one 1 MiB+ O_DIRECT write per [`segment::appender::WRITE_BYTES_MAX`] buffered,
//!   issued in the background (`BlockFile::write_at_background`) so the next MiB of appends fills
//!   while it is in flight; every other operation on the file waits for it first.
//! - Sustained append, before -> after background writes, medians of 3 alternating runs beside
//!   `dd bs=1M count=512 oflag=direct` (median 708 MB/s, 641-1100): 64 KiB batches, fdatasync per
//!   8 MiB 501 -> 722 MB/s (102% of dd); per 512 MiB 408 -> 546 MB/s (77%); 1 KiB batches per
//!   512 MiB 409 -> 597 MB/s (84%). fdatasync per 1 MiB: 160-260 MB/s either way (the sync
//!   dominates; `dd oflag=direct,dsync`: 175-200 MB/s).
//! - Cold reads (bench `engine_read`, random aligned reads of a 128 MiB file): O_DIRECT through
//!   io_uring 495 us / 64 KiB and 1.81 ms / 1 MiB (552 MiB/s); `pread` of a buffered descriptor on
//!   a worker thread, page cache dropped first: 513 us and 3.03 ms (330 MiB/s). O_DIRECT is as
//!   fast or faster when the data is really cold, so it stays the default. A page-cache hit is
//!   faster (95 us / 64 KiB) but costs a second copy of the log in memory; recent data is served
//!   from the batch cache instead.
//! - append(1 KiB) + flush (write + fdatasync): p50 250-545 us, p99 10-21 ms.
//! - Unclean recovery of a 256 MiB active segment (every batch CRC-checked): 0.67 s (about
//!   2.7 s per GiB, the device's O_DIRECT read rate) when it has no index checkpoint; with
//!   checkpoints, see bench `engine_recovery`; clean reopen: under 10 ms.
//! - Offset lookup: sparse index 64 ns (1k entries) to 2.4 us (1M entries); a whole read of one
//!   batch at a random offset 18 / 33 / 38 us for 10k / 100k / 400k batches (simulated disk).

pub mod batch;
pub mod batch_cache;
pub mod config;
pub mod error;
mod index_lifecycle;
pub mod io;
pub mod log_manager;
pub mod partition_log;
pub mod positions;
pub mod producer_state;
mod recovery;
mod retention;
pub mod segment;
mod small_file;

#[cfg(test)]
mod index_lifecycle_tests;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod op_fuzz;
pub mod types;

/// The `bytes` crate the API speaks (`BytesMut` in, `Bytes` out), re-exported so callers match.
pub use bytes;
pub use config::{FlushPolicy, LogConfig};
pub use error::EngineError;
pub use log_manager::LogManager;
pub use partition_log::{AppendInfo, PartitionLog, ReadBatches};
pub use recovery::RecoveryStats;
pub use types::{FilePosition, Offset, RelativeOffset, TimestampMs};
