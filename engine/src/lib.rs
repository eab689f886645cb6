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

pub mod batch;
pub mod batch_cache;
pub mod config;
pub mod error;
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
pub use types::{FilePosition, Offset, RelativeOffset, TimestampMs};
