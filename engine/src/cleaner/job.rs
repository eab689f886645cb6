//! [`CleanJob`]: one clean of one log, from the plan to cleaned segments on disk.
//!
//! The job reads sealed segments through its own read-only handles and writes `.cleaned` files;
//! it never touches the log's in-memory state, so the owner keeps appending and serving reads
//! while it runs. Sealed segments never change, except when retention or DeleteRecords delete
//! them: a read then fails or [`PartitionLog::install_cleaned`] finds the group gone, and the
//! clean is abandoned (the checkpoint does not move; the next clean starts over).

use super::offset_map::OffsetMap;
use super::plan::{self, Cleanable, SegmentSummary};
use super::swap::{read_cleaner_checkpoint, remove_cleaned_leftovers, CleanerCheckpoint};
use super::writer::CleanedWriter;
use super::{CompactionConfig, Pacer, RecordCodec, RecordInfo};
use crate::batch::{BatchHeader, BatchMeta};
use crate::error::EngineError;
use crate::io::{BlockFile, Clock, OpenMode, Storage};
use crate::partition_log::PartitionLog;
use crate::segment::cursor::BatchCursor;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::segment::txn_index::{AbortedTxn, TxnIndex};
use crate::segment::Segment;
use crate::small_file;
use crate::types::{Offset, TimestampMs};
use rill_types::ProducerId;
use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::rc::Rc;

/// Read-ahead of a clean's sequential reads.
const READ_AHEAD_BYTES: usize = 1 << 20;
/// Offset-map bytes per dirty log byte when sizing the map: a record takes at least ~7 bytes
/// on disk (uncompressed) and a map slot 24 (plus the load factor).
const MAP_BYTES_PER_LOG_BYTE: u64 = 4;
/// Smallest offset map a job allocates (holds a 1 MiB batch of the smallest records).
const MAP_BYTES_MIN: usize = 4 << 20;

/// A cleaned segment on disk (`<base>.log.cleaned` and its indexes), ready to be swapped in
/// for `members`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CleanedGroup {
    /// Base offset (that of the first member).
    pub base: Offset,
    /// End of its range: the next segment's base.
    pub end: Offset,
    /// The segments it replaces: (base, size in bytes), in order.
    pub members: Vec<(Offset, u64)>,
    /// Bytes of the cleaned `.log`.
    pub size_bytes: u64,
    /// Largest batch max timestamp kept (`NONE` if empty).
    pub max_timestamp: TimestampMs,
    /// Smallest first offset of the aborted transactions whose markers it holds (its
    /// `.txnindex`, merged from the members'), `None` if none.
    pub txn_first_offset_min: Option<Offset>,
}

/// What a clean did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    /// Keys in the offset map.
    pub map_keys: u64,
    /// Log bytes read (offset map and groups).
    pub bytes_read: u64,
    /// Log bytes written to cleaned segments.
    pub bytes_written: u64,
    /// Records looked at while cleaning groups.
    pub records_read: u64,
    /// Records kept.
    pub records_kept: u64,
    /// Batches rebuilt with fewer records or a delete horizon.
    pub batches_rebuilt: u64,
    /// Groups cleaned.
    pub groups: u64,
    /// Batches keeping a tombstone (its horizon not passed yet).
    pub tombstones_kept: u64,
}

/// One clean of one log. See the module doc.
pub struct CleanJob<S: Storage> {
    storage: Rc<S>,
    dir: PathBuf,
    clock: Rc<dyn Clock>,
    /// Sealed segments from the log's first up to the first uncleanable one.
    segments: Vec<SegmentSummary>,
    cleanable: Cleanable,
    config: CompactionConfig,
    segment_bytes_max: u64,
    index_interval_bytes: u32,
    now: TimestampMs,
    /// Last offset of every producer the log tracks (their last batch keeps its header).
    producer_last_offsets: HashMap<ProducerId, Offset>,
    aborted: Vec<AbortedTxn>,
    map: OffsetMap,
    /// One past the last offset the map covers; records from here on are kept.
    map_end: Offset,
    groups: Vec<Range<usize>>,
    stats: CleanStats,
    /// The earliest delete horizon of the tombstones kept so far.
    earliest_horizon: Option<TimestampMs>,
}

/// What becomes of one batch.
enum Kept {
    Original,
    Rebuilt(Vec<u8>),
    Nothing,
}

impl<S: Storage> PartitionLog<S> {
    /// The clean due now, if any (see [`plan`]): the dirty ratio reached
    /// `min_cleanable_dirty_ratio` or the oldest dirty batch is older than
    /// `max_compaction_lag_ms`. Deletes `.cleaned` files an abandoned clean left behind, so
    /// call it only while no other clean of this log is in flight.
    pub async fn plan_clean(
        &mut self,
        config: &CompactionConfig,
        now: TimestampMs,
    ) -> Result<Option<CleanJob<S>>, EngineError> {
        self.check_usable()?;
        let sealed: Vec<SegmentSummary> = self.segments[..self.segments.len() - 1]
            .iter()
            .map(|s| SegmentSummary {
                base: s.base,
                next_offset: s.next_offset,
                size_bytes: s.size_bytes,
                max_timestamp: s.max_timestamp,
            })
            .collect();
        // Never past the last stable offset: an open transaction's batches are not decided.
        let bound = self.active().base.min(self.last_stable_offset());
        let checkpoint = read_cleaner_checkpoint(&*self.storage, &self.dir).await?;
        let first_dirty = checkpoint.map(|c| c.first_dirty);
        let cleanable = plan::cleanable(&sealed, first_dirty, bound, config, now);
        let first_dirty_ts = match config.max_compaction_lag_ms {
            Some(_) if cleanable.dirty_bytes > 0 => self.first_batch_timestamp(&cleanable).await?,
            _ => None,
        };
        let horizon_passed = checkpoint
            .and_then(|c| c.delete_horizon)
            .is_some_and(|h| now >= h && cleanable.clean_bytes > 0);
        if !plan::should_clean(&cleanable, config, first_dirty_ts, now) && !horizon_passed {
            return Ok(None);
        }
        remove_cleaned_leftovers(&*self.storage, &self.dir).await?;
        let log_start = self.positions.log_start();
        let aborted = self
            .aborted_transactions(log_start, cleanable.first_uncleanable)
            .await?;
        let mut segments = sealed;
        segments.truncate(cleanable.uncleanable_segment);
        Ok(Some(CleanJob {
            storage: self.storage.clone(),
            dir: self.dir.clone(),
            clock: self.clock.clone(),
            segments,
            cleanable,
            config: config.clone(),
            segment_bytes_max: self.config.segment_bytes_max,
            index_interval_bytes: self.config.index_interval_bytes,
            now,
            producer_last_offsets: self.producers.last_offsets(),
            aborted,
            map: OffsetMap::with_memory(0),
            map_end: cleanable.first_dirty,
            groups: Vec::new(),
            stats: CleanStats::default(),
            earliest_horizon: None,
        }))
    }

    /// Max timestamp of the first batch at or after the first dirty offset.
    async fn first_batch_timestamp(
        &mut self,
        c: &Cleanable,
    ) -> Result<Option<TimestampMs>, EngineError> {
        let i = c.first_dirty_segment;
        self.ensure_open(i).await?;
        let segment = &self.segments[i];
        let mut cursor = BatchCursor::new(segment, 0, segment.base, 64 << 10);
        while let Some((meta, _)) = cursor.next().await? {
            if meta.last_offset >= c.first_dirty {
                return Ok(Some(meta.max_timestamp));
            }
        }
        Ok(None)
    }
}

impl<S: Storage> CleanJob<S> {
    /// The sections this clean works on.
    pub fn cleanable(&self) -> Cleanable {
        self.cleanable
    }

    /// Number of groups to clean (known after [`Self::build_offset_map`]).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// What the clean leaves for the next one ([`PartitionLog::finish_clean`]): where its dirty
    /// section starts, and the earliest delete horizon of the tombstones kept.
    pub fn checkpoint(&self) -> CleanerCheckpoint {
        CleanerCheckpoint {
            first_dirty: self.map_end,
            delete_horizon: self.earliest_horizon,
        }
    }

    /// What the clean did so far.
    pub fn stats(&self) -> CleanStats {
        self.stats
    }

    /// Reads the dirty section into the offset map (at most `map_bytes_max` of memory; the
    /// map's end stops at the first batch that might not fit) and groups the segments to
    /// clean. Fails if the map cannot hold even the first dirty batch.
    pub async fn build_offset_map(
        &mut self,
        codec: &impl RecordCodec,
        pacer: &impl Pacer,
        map_bytes_max: usize,
    ) -> Result<(), EngineError> {
        let wanted = (self
            .cleanable
            .dirty_bytes
            .saturating_mul(MAP_BYTES_PER_LOG_BYTE))
        .try_into()
        .unwrap_or(usize::MAX);
        self.map = OffsetMap::with_memory(wanted.max(MAP_BYTES_MIN).min(map_bytes_max));
        let (first, last) = (
            self.cleanable.first_dirty_segment,
            self.cleanable.uncleanable_segment,
        );
        let mut end = self.cleanable.first_dirty;
        for i in first..last {
            let summary = self.segments[i];
            let (full, segment_end) = self.map_segment(&summary, end, codec, pacer).await?;
            end = segment_end;
            if full {
                break;
            }
        }
        if end == self.cleanable.first_dirty && self.cleanable.dirty_bytes > 0 {
            return Err(EngineError::InvalidConfig(format!(
                "the cleaner's offset map ({} keys) cannot hold the first dirty batch at {end}",
                self.map.limit()
            )));
        }
        self.map_end = end;
        self.stats.map_keys = self.map.len() as u64;
        let count = self.segments.partition_point(|s| s.base < end);
        self.groups = plan::group_segments(&self.segments, count, self.segment_bytes_max);
        Ok(())
    }

    /// Adds one segment's records from `from` on to the map. Returns whether the map filled
    /// and where the mapped part ends (the segment's end unless it filled).
    async fn map_segment(
        &mut self,
        summary: &SegmentSummary,
        from: Offset,
        codec: &impl RecordCodec,
        pacer: &impl Pacer,
    ) -> Result<(bool, Offset), EngineError> {
        let segment = self.open_segment(summary).await?;
        let mut cursor = BatchCursor::new(&segment, 0, summary.base, READ_AHEAD_BYTES);
        let mut end = from.max(summary.base);
        let mut full = false;
        while let Some((meta, bytes)) = cursor.next().await? {
            pacer.pace(bytes.len() as u64).await;
            self.stats.bytes_read += bytes.len() as u64;
            if meta.last_offset < from {
                continue;
            }
            let records = BatchHeader::view(&bytes).map_or(0, |h| h.records_count.get());
            if !self.map.has_room_for(records.max(0) as usize) {
                full = true;
                break;
            }
            self.map_batch(&meta, &bytes, from, codec);
            end = meta.last_offset.plus(1);
        }
        close_segment(segment).await;
        Ok((full, if full { end } else { summary.next_offset }))
    }

    /// Records the keys of one data batch (control batches and aborted ones carry none).
    fn map_batch(
        &mut self,
        meta: &BatchMeta,
        bytes: &[u8],
        from: Offset,
        codec: &impl RecordCodec,
    ) {
        let kind = codec.batch_kind(bytes);
        if kind.control || (kind.transactional && self.is_aborted(meta)) {
            return;
        }
        let map = &mut self.map;
        let scanned = codec.for_each_record(bytes, &mut |r: RecordInfo<'_>| {
            if let (Some(key), true) = (r.key, r.offset >= from) {
                map.insert(key, r.offset);
            }
        });
        if let Err(why) = scanned {
            // Kept whole when cleaning too: its older versions of keys stay, nothing is lost.
            tracing::warn!(dir = %self.dir.display(), base = meta.base_offset.0, %why, "cleaner cannot read a batch's records; keeping it");
        }
    }

    /// Cleans group `g` into one `.cleaned` segment and returns it for
    /// [`PartitionLog::install_cleaned`].
    pub async fn clean_group(
        &mut self,
        g: usize,
        codec: &impl RecordCodec,
        pacer: &impl Pacer,
    ) -> Result<CleanedGroup, EngineError> {
        let members: Vec<SegmentSummary> = self.segments[self.groups[g].clone()].to_vec();
        let (base, end) = (members[0].base, members[members.len() - 1].next_offset);
        let storage = self.storage.clone();
        let mut writer = CleanedWriter::create(
            storage,
            self.dir.clone(),
            base,
            self.index_interval_bytes,
            self.clock.clone(),
        )
        .await?;
        for summary in &members {
            let segment = self.open_segment(summary).await?;
            let copied = self
                .clean_segment(&segment, &mut writer, end, codec, pacer)
                .await;
            close_segment(segment).await;
            copied?;
        }
        let txn_index = self.merged_txn_index(&members).await?;
        let (size_bytes, max_timestamp) = writer.finish(&txn_index).await?;
        self.stats.groups += 1;
        Ok(CleanedGroup {
            base,
            end,
            members: members.iter().map(|s| (s.base, s.size_bytes)).collect(),
            size_bytes,
            max_timestamp,
            txn_first_offset_min: txn_index.first_offset_min(),
        })
    }

    /// The aborted transactions whose markers the members hold (markers are always kept, so
    /// the cleaned segment holds them all), in marker order.
    async fn merged_txn_index(&self, members: &[SegmentSummary]) -> Result<TxnIndex, EngineError> {
        let mut merged = TxnIndex::default();
        for s in members {
            let path = self.dir.join(segment_file_name(s.base, FileKind::TxnIndex));
            let Some(bytes) = small_file::read_whole(&*self.storage, &path).await? else {
                continue;
            };
            let index = TxnIndex::decode(&bytes, s.base, s.next_offset).ok_or_else(|| {
                EngineError::Layout(format!("{} does not decode", path.display()))
            })?;
            for &entry in index.entries() {
                merged.push(entry);
            }
        }
        Ok(merged)
    }

    /// Copies what one segment keeps into `writer`; `group_end` is the end of the cleaned
    /// segment's range.
    async fn clean_segment(
        &mut self,
        segment: &Segment<S::File>,
        writer: &mut CleanedWriter<S>,
        group_end: Offset,
        codec: &impl RecordCodec,
        pacer: &impl Pacer,
    ) -> Result<(), EngineError> {
        let mut cursor = BatchCursor::new(segment, 0, segment.base, READ_AHEAD_BYTES);
        while let Some((meta, bytes)) = cursor.next().await? {
            pacer.pace(bytes.len() as u64).await;
            self.stats.bytes_read += bytes.len() as u64;
            let written = match self.filter_batch(&meta, &bytes, group_end, codec)? {
                Kept::Nothing => 0,
                Kept::Original => writer.append(&meta, &bytes).await?,
                Kept::Rebuilt(rebuilt) => {
                    self.stats.batches_rebuilt += 1;
                    let rebuilt_meta = crate::batch::validate_prefix(&rebuilt)?;
                    assert_eq!(rebuilt_meta.base_offset, meta.base_offset);
                    assert_eq!(rebuilt_meta.last_offset, meta.last_offset);
                    writer.append(&rebuilt_meta, &rebuilt).await?
                }
            };
            self.stats.bytes_written += written as u64;
            pacer.pace(written as u64).await;
        }
        Ok(())
    }

    /// What one batch keeps (see the table in the module doc).
    fn filter_batch(
        &mut self,
        meta: &BatchMeta,
        bytes: &[u8],
        group_end: Offset,
        codec: &impl RecordCodec,
    ) -> Result<Kept, EngineError> {
        let kind = codec.batch_kind(bytes);
        if kind.control {
            return Ok(Kept::Original);
        }
        let aborted = kind.transactional && self.is_aborted(meta);
        let horizon_passed = kind.delete_horizon.is_some_and(|h| self.now >= h);
        let (mut kept, mut total, mut tombstone_kept) = (Vec::new(), 0u64, false);
        let scanned = codec.for_each_record(bytes, &mut |r: RecordInfo<'_>| {
            total += 1;
            if !aborted && self.retains(&r, horizon_passed) {
                kept.push(r.offset);
                tombstone_kept |= r.tombstone;
            }
        });
        if let Err(why) = scanned {
            tracing::warn!(dir = %self.dir.display(), base = meta.base_offset.0, %why, "cleaner cannot read a batch's records; keeping it");
            return Ok(Kept::Original);
        }
        self.stats.records_read += total;
        self.stats.records_kept += kept.len() as u64;
        if kept.is_empty() {
            return self.empty_batch(meta, bytes, total, group_end, codec);
        }
        let set_horizon = tombstone_kept && kind.delete_horizon.is_none();
        let horizon = set_horizon.then(|| {
            TimestampMs(
                self.now
                    .0
                    .saturating_add(self.config.delete_retention_ms as i64),
            )
        });
        if tombstone_kept {
            self.stats.tombstones_kept += 1;
            let h = horizon
                .or(kind.delete_horizon)
                .expect("set or already there");
            self.earliest_horizon = Some(self.earliest_horizon.map_or(h, |e| e.min(h)));
        }
        if kept.len() as u64 == total && !set_horizon {
            return Ok(Kept::Original);
        }
        let keep = |o: Offset| kept.binary_search(&o).is_ok();
        codec
            .retain(bytes, &keep, horizon)
            .map(Kept::Rebuilt)
            .map_err(EngineError::InvalidRecord)
    }

    /// A batch keeping no record: dropped, or kept as a bare header when it ends the cleaned
    /// segment (so every segment still ends where the next begins, and a consumer steps to
    /// the next segment) or is a tracked producer's last batch.
    fn empty_batch(
        &self,
        meta: &BatchMeta,
        bytes: &[u8],
        total: u64,
        group_end: Offset,
        codec: &impl RecordCodec,
    ) -> Result<Kept, EngineError> {
        let ends_range = meta.last_offset.plus(1) == group_end;
        let producers_last = meta.producer_id.is_some()
            && self.producer_last_offsets.get(&meta.producer_id) == Some(&meta.last_offset);
        if !(ends_range || producers_last) {
            return Ok(Kept::Nothing);
        }
        if total == 0 {
            return Ok(Kept::Original); // already a bare header
        }
        codec
            .retain(bytes, &|_| false, None)
            .map(Kept::Rebuilt)
            .map_err(EngineError::InvalidRecord)
    }

    /// Whether a record of a data batch survives (the table in the module doc).
    fn retains(&self, r: &RecordInfo<'_>, horizon_passed: bool) -> bool {
        if r.offset >= self.map_end {
            return true;
        }
        let Some(key) = r.key else {
            return false;
        };
        let latest = self.map.get(key).is_none_or(|m| r.offset >= m);
        latest && (!r.tombstone || !horizon_passed)
    }

    /// Whether a transactional batch belongs to an aborted transaction.
    fn is_aborted(&self, meta: &BatchMeta) -> bool {
        self.aborted.iter().any(|t: &AbortedTxn| {
            t.producer_id == meta.producer_id
                && t.first_offset <= meta.base_offset
                && meta.last_offset < t.last_offset
        })
    }

    /// A sealed segment opened read-only for a sequential walk.
    async fn open_segment(
        &self,
        summary: &SegmentSummary,
    ) -> Result<Segment<S::File>, EngineError> {
        let path = self
            .dir
            .join(segment_file_name(summary.base, FileKind::Log));
        let file = self.storage.open(&path, OpenMode::Read).await?;
        let mut segment = Segment::new(summary.base);
        segment.may_have_gaps = true;
        segment.size_bytes = summary.size_bytes;
        segment.next_offset = summary.next_offset;
        segment.drop_indexes();
        segment.file = Some(file);
        Ok(segment)
    }
}

/// Closes a segment's file; a read-only close cannot lose anything.
async fn close_segment<F: BlockFile>(mut segment: Segment<F>) {
    if let Some(file) = segment.file.take() {
        let _ = file.close().await;
    }
}
