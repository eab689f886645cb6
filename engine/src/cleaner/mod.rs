//! Log compaction, as Kafka's log cleaner does it: keep the latest record of every key at its
//! original offset, drop older ones, and drop tombstones once they are old enough.
//!
//! # Map
//! - [`plan`]: which part of a log is clean, dirty or not yet cleanable; when to clean; how
//!   segments are grouped (pure functions).
//! - [`offset_map`]: key hash → latest offset of the dirty section, in fixed memory.
//! - `job.rs`: [`CleanJob`] reads the dirty section into the offset map, then rewrites each
//!   group of segments into one `.cleaned` segment ([`CleanedGroup`]). It owns its file
//!   handles and touches no state of the log, so it can run beside appends and reads.
//! - `writer.rs`: writes a cleaned segment and its indexes.
//! - `swap.rs`: [`PartitionLog::install_cleaned`] swaps a cleaned segment in for the segments
//!   it replaces, crash-safely (`.cleaned` → `.swap`, Kafka's names), and recovery finishes or
//!   undoes a swap a crash interrupted. Its header is the on-disk contract.
//!
//! A clean: [`PartitionLog::plan_clean`] → [`CleanJob::build_offset_map`] →
//! [`CleanJob::clean_group`] for each group, each handed to [`PartitionLog::install_cleaned`] →
//! [`PartitionLog::finish_clean`] (the cleaner checkpoint). [`clean_now`] runs it all in a row.
//!
//! # What a clean keeps
//! A record at offset `o` with key `k`, when the offset map says `k` was last written at `m`:
//!
//! | record                                  | kept?                                      |
//! |-----------------------------------------|--------------------------------------------|
//! | `o` past the map's end                  | yes (not looked at this time)              |
//! | no key                                  | no (invalid in a compacted topic)          |
//! | `o < m`                                 | no (superseded)                            |
//! | `o >= m` (or `k` not in the map), value | yes                                        |
//! | `o >= m`, tombstone, no delete horizon  | yes, and its batch gets one: now + `delete.retention.ms` (KIP-534) |
//! | `o >= m`, tombstone, horizon not passed | yes                                        |
//! | `o >= m`, tombstone, horizon passed     | no                                         |
//!
//! Batches: control batches (transaction markers) are kept as they are; a batch keeping every
//! record and needing no delete horizon is copied byte for byte; otherwise it is rebuilt with
//! its kept records (same base offset, last offset delta, producer fields, codec: see
//! `rill_protocol::record::rebuild`). A batch keeping nothing is dropped, except that an
//! empty batch header stays (as in Kafka) when it ends the cleaned segment (so a segment still
//! ends where the next begins: consumers advance to it, and `rill check` can still tell a
//! missing segment from a compacted one; Kafka keeps it at the end of a whole clean) or is
//! the last batch of a producer the log still tracks (its last sequence survives a rebuild
//! of the producer state).
//!
//! Tombstones are removed only after the older records of their key: a tombstone is first kept
//! with a horizon, in the same pass that removed everything older than it. The earliest horizon
//! kept is remembered in the cleaner checkpoint; once it has passed, a clean is due even if
//! nothing new was written, so tombstones also leave a quiet log.
//!
//! # Bounds
//! - Memory: one [`OffsetMap`] per job (at most the caller's `map_bytes_max`; when it fills,
//!   the clean stops at that batch and the rest waits for the next one), one batch
//!   decompressed at a time (at most [`DECOMPRESSED_BYTES_MAX`]; a batch past it is kept
//!   as is), one write buffer, one read-ahead.
//! - I/O: every batch read and written goes through the caller's [`Pacer`] (rate limit,
//!   yielding to other tasks).
//!
//! # Transactions
//! The cleanable range ends at the last stable offset, so every transactional batch a clean
//! sees is decided. A batch of an aborted transaction (from the `.txnindex` files) keeps no
//! record and is dropped (or kept as a bare header, by the rules above); committed ones are
//! cleaned like any other; markers (control batches) are kept, and with them every
//! `.txnindex` entry: a cleaned segment's `.txnindex` is its members' merged. (Kafka also
//! removes a marker once its transaction's records are gone and a delete horizon passed; here
//! markers stay, which costs a few bytes per transaction and misleads nobody.)

mod job;
pub mod offset_map;
pub mod plan;
mod swap;
mod writer;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;

pub use job::{CleanJob, CleanStats, CleanedGroup};
pub use offset_map::OffsetMap;
pub use plan::{Cleanable, SegmentSummary};
pub use swap::{is_swap_leftover, CleanerCheckpoint, CLEANER_CHECKPOINT_FILE};

use crate::error::EngineError;
use crate::io::Storage;
use crate::partition_log::PartitionLog;
use crate::types::{Offset, TimestampMs};

/// Largest batch a clean decompresses; a batch decompressing to more is kept as it is.
pub const DECOMPRESSED_BYTES_MAX: usize = 64 << 20;

/// Compaction settings of one log, named after Kafka's topic configs (units last).
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionConfig {
    /// How long a tombstone stays after the clean that first kept it (`delete.retention.ms`).
    pub delete_retention_ms: u64,
    /// Dirty share of the log that triggers a clean (`min.cleanable.dirty.ratio`).
    pub min_cleanable_dirty_ratio: f64,
    /// Records younger than this are not cleaned (`min.compaction.lag.ms`).
    pub min_compaction_lag_ms: u64,
    /// A dirty record older than this forces a clean (`max.compaction.lag.ms`; `None` = never).
    pub max_compaction_lag_ms: Option<u64>,
}

impl Default for CompactionConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        CompactionConfig {
            delete_retention_ms: 24 * 60 * 60 * 1000,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: None,
        }
    }
}

/// Batch-level facts the cleaner needs from the record format.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct BatchKind {
    /// A control batch (transaction marker).
    pub control: bool,
    /// Part of a transaction.
    pub transactional: bool,
    /// The KIP-534 delete horizon, if a clean set one.
    pub delete_horizon: Option<TimestampMs>,
}

/// One record as the cleaner sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RecordInfo<'a> {
    /// Absolute offset.
    pub offset: Offset,
    /// The key (`None`: null key).
    pub key: Option<&'a [u8]>,
    /// A tombstone (null value).
    pub tombstone: bool,
}

/// The record-level format, injected: the engine never decodes records itself (the server
/// passes the Kafka v2 implementation from `rill-protocol`).
pub trait RecordCodec {
    /// Batch-level facts of a whole, CRC-checked batch.
    fn batch_kind(&self, batch: &[u8]) -> BatchKind;
    /// Calls `each` for every record of `batch`, in offset order.
    fn for_each_record(
        &self,
        batch: &[u8],
        each: &mut dyn FnMut(RecordInfo<'_>),
    ) -> Result<(), String>;
    /// `batch` rebuilt with only the records whose offsets `keep` accepts (an empty batch
    /// header if none), base offset and last offset kept; with `delete_horizon` if given.
    fn retain(
        &self,
        batch: &[u8],
        keep: &dyn Fn(Offset) -> bool,
        delete_horizon: Option<TimestampMs>,
    ) -> Result<Vec<u8>, String>;
}

/// Paces a clean's I/O: called with the bytes of every batch read or written.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait Pacer {
    /// Waits as long as the rate limit asks (and lets other tasks run).
    async fn pace(&self, bytes: u64);
}

/// No pacing (tests, small internal logs).
#[derive(Copy, Clone, Debug, Default)]
pub struct Unpaced;

impl Pacer for Unpaced {
    async fn pace(&self, _bytes: u64) {}
}

/// Runs one clean of `log` to the end if one is due: plan, offset map, every group swapped
/// in, checkpoint. For small logs cleaned in place (the group offsets journal) and tests; the
/// broker's cleaner runs the steps in a task of its own. `Ok(None)`: nothing to clean;
/// `Ok(Some(stats))` also when a group no longer matched the log (the clean then stops early).
pub async fn clean_now<S: Storage>(
    log: &mut PartitionLog<S>,
    config: &CompactionConfig,
    codec: &impl RecordCodec,
    pacer: &impl Pacer,
    map_bytes_max: usize,
    now: TimestampMs,
) -> Result<Option<CleanStats>, EngineError> {
    let Some(mut job) = log.plan_clean(config, now).await? else {
        return Ok(None);
    };
    job.build_offset_map(codec, pacer, map_bytes_max).await?;
    for g in 0..job.group_count() {
        let group = job.clean_group(g, codec, pacer).await?;
        if !log.install_cleaned(&group).await? {
            return Ok(Some(job.stats()));
        }
    }
    log.finish_clean(job.checkpoint()).await?;
    Ok(Some(job.stats()))
}
