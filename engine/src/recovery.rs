//! Opening a partition log: find the segments, trust what was sealed, and recover the active
//! segment by validating batches from its last index entry (the log is the truth).
//!
//! Steps:
//! 1. List the directory; delete `*.tmp` leftovers and index files without a `.log`.
//! 2. Read the log start checkpoint; delete segments wholly below it.
//! 3. Sealed segments (all but the last) were synced and trimmed when rolled: load their
//!    indexes, or rebuild them by scanning if they do not verify.
//! 4. The active segment may hold a torn or corrupt tail: scan from its last index entry,
//!    validating length, magic, CRC-32C and offset continuity of each batch; cut the file at the
//!    first batch that fails (preallocated zeros fail too); rebuild the indexes as it goes.
//! 5. Producer state: load the snapshot, replay batch headers from its offset to the log end.

use crate::batch::{validate_prefix, BatchMeta};
use crate::batch_cache::BatchCache;
use crate::config::{FlushPolicy, LogConfig};
use crate::error::EngineError;
use crate::io::{align_down, BlockFile, Clock, OpenMode, Storage};
use crate::partition_log::{PartitionLog, LOG_START_FILE, PRODUCER_SNAPSHOT_FILE};
use crate::positions::Positions;
use crate::producer_state::ProducerState;
use crate::segment::appender::Appender;
use crate::segment::cursor::BatchCursor;
use crate::segment::file_name::{parse_segment_file_name, segment_file_name, FileKind};
use crate::segment::offset_index::OffsetIndex;
use crate::segment::time_index::TimeIndex;
use crate::segment::Segment;
use crate::small_file::{self, TMP_SUFFIX};
use crate::types::{Offset, RelativeOffset};
use std::path::PathBuf;
use std::rc::Rc;

/// Batches validated per borrow of the segment during a recovery scan.
const SCAN_BATCHES_PER_STEP: usize = 4096;
/// Read-ahead of recovery scans.
const SCAN_READ_AHEAD_BYTES: usize = 1 << 20;

impl<S: Storage> PartitionLog<S> {
    /// Opens or creates the log in `dir`, recovering it after a crash.
    pub async fn open(
        storage: Rc<S>,
        dir: PathBuf,
        config: LogConfig,
        clock: Rc<dyn Clock>,
    ) -> Result<Self, EngineError> {
        config.validate().map_err(EngineError::InvalidConfig)?;
        storage.create_dir_all(&dir).await?;
        let hw_follows_durable = config.flush == FlushPolicy::EveryAppend;
        let now = clock.now();
        let mut log = PartitionLog {
            storage,
            dir,
            cache: BatchCache::new(config.batch_cache_bytes_max),
            config,
            clock,
            segments: Vec::new(),
            positions: Positions::recovered(Offset(0), Offset(0), hw_follows_durable),
            producers: ProducerState::default(),
            unflushed_messages: 0,
            last_flush_ms: now,
            failed: false,
            open_sealed: std::collections::VecDeque::new(),
        };
        let (bases, checkpoint) = log.clean_directory().await?;
        let tail = log
            .load_segments(&bases, checkpoint.unwrap_or(Offset(0)))
            .await?;
        let log_end = log.active().next_offset;
        let log_start = checkpoint
            .unwrap_or(Offset(0))
            .max(log.segments[0].base)
            .min(log_end);
        if checkpoint.is_some_and(|cp| cp > log_end) {
            // DeleteRecords past what survived (interval flush policy): the start follows the end.
            let bytes = small_file::encode_log_start(log_start.0);
            small_file::write_atomic(&*log.storage, &log.dir, LOG_START_FILE, &bytes).await?;
        }
        log.positions = Positions::recovered(log_start, log_end, hw_follows_durable);
        log.recover_producers(tail).await?;
        tracing::debug!(dir = %log.dir.display(), log_start = log_start.0, log_end = log_end.0, segments = log.segments.len(), "opened partition log");
        Ok(log)
    }

    /// Deletes leftovers and segments below the checkpoint; returns the segment bases and checkpoint.
    async fn clean_directory(&self) -> Result<(Vec<Offset>, Option<Offset>), EngineError> {
        let names = self.storage.list_dir(&self.dir).await?;
        let mut bases: Vec<Offset> = names
            .iter()
            .filter_map(|n| parse_segment_file_name(n))
            .filter(|(_, k)| *k == FileKind::Log)
            .map(|(b, _)| b)
            .collect();
        bases.sort_unstable();
        for name in &names {
            let orphan = parse_segment_file_name(name)
                .is_some_and(|(b, _)| bases.binary_search(&b).is_err());
            if name.ends_with(TMP_SUFFIX) || orphan {
                self.storage.remove_file(&self.dir.join(name)).await?;
            }
        }
        let bytes = small_file::read_whole(&*self.storage, &self.dir.join(LOG_START_FILE)).await?;
        let checkpoint = bytes
            .and_then(|b| small_file::decode_log_start(&b))
            .map(Offset);
        while let (Some(cp), true) = (checkpoint, bases.len() > 1) {
            if bases[1] > cp {
                break;
            }
            self.remove_segment_files(bases.remove(0)).await?;
        }
        Ok((bases, checkpoint))
    }

    /// Removes the three files of the segment at `base` (`.log` first: orphans are cleaned on open).
    pub(crate) async fn remove_segment_files(&self, base: Offset) -> Result<(), EngineError> {
        for kind in [FileKind::Log, FileKind::Index, FileKind::TimeIndex] {
            let path = self.dir.join(segment_file_name(base, kind));
            if self.storage.exists(&path).await? {
                self.storage.remove_file(&path).await?;
            }
        }
        Ok(())
    }

    /// Loads sealed segments and recovers the active one (creating it for a new log).
    async fn load_segments(
        &mut self,
        bases: &[Offset],
        checkpoint: Offset,
    ) -> Result<ScannedTail, EngineError> {
        let Some((&active_base, sealed)) = bases.split_last() else {
            let segment = self.create_segment(checkpoint).await?;
            self.segments.push(segment);
            return Ok(ScannedTail {
                from: checkpoint,
                producer_batches: Vec::new(),
            });
        };
        for (i, &base) in sealed.iter().enumerate() {
            let segment = self.load_sealed(base, bases[i + 1]).await?;
            self.segments.push(segment);
        }
        let (active, tail) = self.recover_active(active_base).await?;
        self.segments.push(active);
        Ok(tail)
    }

    /// A sealed segment: sizes from the file, indexes from disk or rebuilt. Its file stays closed.
    async fn load_sealed(
        &self,
        base: Offset,
        next_base: Offset,
    ) -> Result<Segment<S::File>, EngineError> {
        let path = self.dir.join(segment_file_name(base, FileKind::Log));
        let file = self.storage.open(&path, OpenMode::Read).await?;
        let size = file.size_bytes().await?;
        let (index, time_index) = self
            .read_indexes(base, size, (next_base.0 - base.0) as u64)
            .await?;
        let mut segment = Segment::new(base);
        let loaded = !index.is_empty() && !time_index.is_empty();
        if loaded {
            segment.max_timestamp = time_index.last().expect("non-empty").0;
            (
                segment.index,
                segment.time_index,
                segment.size_bytes,
                segment.next_offset,
            ) = (index, time_index, size, next_base);
            file.close().await?;
            return Ok(segment);
        }
        tracing::warn!(dir = %self.dir.display(), base = base.0, "rebuilding indexes of a sealed segment");
        segment.file = Some(file);
        let (end, _) = self.scan(&mut segment, 0, base, size).await?;
        if end != size || segment.next_offset != next_base {
            return Err(EngineError::Layout(format!(
                "sealed segment {base} does not verify: ends at {end} of {size} bytes, offset {}",
                segment.next_offset
            )));
        }
        segment.seal_time_index();
        self.write_indexes(base, &segment.index.encode(), &segment.time_index.encode())
            .await?;
        segment.file.take().expect("opened above").close().await?;
        Ok(segment)
    }

    /// Reads and verifies the two index files of a segment; empty indexes if missing or damaged.
    async fn read_indexes(
        &self,
        base: Offset,
        log_bytes: u64,
        offsets: u64,
    ) -> Result<(OffsetIndex, TimeIndex), EngineError> {
        let storage = &*self.storage;
        let index = small_file::read_whole(
            storage,
            &self.dir.join(segment_file_name(base, FileKind::Index)),
        )
        .await?;
        let time = small_file::read_whole(
            storage,
            &self.dir.join(segment_file_name(base, FileKind::TimeIndex)),
        )
        .await?;
        let index = index.and_then(|b| OffsetIndex::decode(&b, log_bytes));
        let time = time.and_then(|b| TimeIndex::decode(&b, offsets));
        match (index, time) {
            (Some(i), Some(t)) => Ok((i, t)),
            _ => Ok((OffsetIndex::default(), TimeIndex::default())),
        }
    }

    /// The active segment: resume from its last index entry, validate to the end, cut the rest.
    async fn recover_active(
        &self,
        base: Offset,
    ) -> Result<(Segment<S::File>, ScannedTail), EngineError> {
        let path = self.dir.join(segment_file_name(base, FileKind::Log));
        let file = self.storage.open(&path, OpenMode::ReadWrite).await?;
        let file_bytes = file.size_bytes().await?;
        let (index, time_index) = self
            .read_indexes(base, file_bytes, u64::from(u32::MAX) + 1)
            .await?;
        let mut segment = Segment::new(base);
        segment.file = Some(file);
        let resumed = match resume_point(&mut segment, index, time_index) {
            Some((pos, expected)) => {
                match self.scan(&mut segment, pos, expected, file_bytes).await {
                    Ok((end, batches)) if segment.next_offset > expected => Some((
                        end,
                        ScannedTail {
                            from: expected,
                            producer_batches: batches,
                        },
                    )),
                    Ok(_) | Err(EngineError::CorruptBatch(_)) => None,
                    Err(e) => return Err(e),
                }
            }
            None => None,
        };
        let (end, tail) = match resumed {
            Some(found) => found,
            None => {
                segment = Segment {
                    file: segment.file.take(),
                    ..Segment::new(base)
                };
                let (end, batches) = self.scan(&mut segment, 0, base, file_bytes).await?;
                (
                    end,
                    ScannedTail {
                        from: base,
                        producer_batches: batches,
                    },
                )
            }
        };
        Ok((self.cut_and_resume(segment, end, file_bytes).await?, tail))
    }

    /// Cuts the file at `end` (torn tail, preallocation) and attaches an appender.
    async fn cut_and_resume(
        &self,
        mut segment: Segment<S::File>,
        end: u64,
        file_bytes: u64,
    ) -> Result<Segment<S::File>, EngineError> {
        assert_eq!(segment.size_bytes, end);
        let file = segment.file.as_ref().expect("active segment is open");
        if end != file_bytes {
            tracing::info!(dir = %self.dir.display(), base = segment.base.0, end, file_bytes, "cut log tail");
            file.truncate(end).await?;
            file.sync().await?;
        }
        let tail_start = align_down(end);
        let tail = segment
            .read_range(tail_start, (end - tail_start) as usize)
            .await?;
        let appender = Appender::new(
            end,
            &tail,
            end,
            self.prealloc_bytes(),
            self.config.segment_bytes_max,
        );
        segment.appender = Some(appender);
        Ok(segment)
    }

    /// Validates batches from `pos` (whose baseOffset must be `expected`) up to `file_bytes`,
    /// noting each in the segment; returns where the valid batches end. I/O errors propagate.
    async fn scan(
        &self,
        segment: &mut Segment<S::File>,
        pos: u64,
        expected: Offset,
        file_bytes: u64,
    ) -> Result<(u64, Vec<BatchMeta>), EngineError> {
        assert_eq!(segment.size_bytes, pos);
        assert_eq!(segment.next_offset, expected);
        let mut producer_batches = Vec::new();
        loop {
            let (metas, done) = scan_step(segment, file_bytes).await?;
            for meta in &metas {
                segment.note_batch(meta, self.config.index_interval_bytes);
            }
            producer_batches.extend(metas.into_iter().filter(|m| m.producer_id >= 0));
            if done {
                return Ok((segment.size_bytes, producer_batches));
            }
        }
    }

    /// Producer state from the snapshot, plus batches after it replayed from the log.
    /// Batches before the scanned tail are replayed by reading the log; the tail's producer
    /// batches were collected by the recovery scan, so the common case reads nothing twice.
    async fn recover_producers(&mut self, tail: ScannedTail) -> Result<(), EngineError> {
        let path = self.dir.join(PRODUCER_SNAPSHOT_FILE);
        let bytes = small_file::read_whole(&*self.storage, &path).await?;
        let (log_start, log_end) = (self.positions.log_start(), self.positions.log_end());
        let snapshot = bytes
            .and_then(|b| ProducerState::decode(&b))
            .filter(|(o, _)| *o >= log_start && *o <= log_end);
        let from = snapshot.as_ref().map_or(log_start, |(o, _)| *o);
        self.producers = snapshot.map(|(_, s)| s).unwrap_or_default();
        self.replay_producers(from, tail.from.min(log_end)).await?;
        for meta in tail
            .producer_batches
            .iter()
            .filter(|m| m.last_offset >= from)
        {
            self.producers.record(meta);
        }
        Ok(())
    }

    /// Records the producer batches with base offsets in `[from, until)` by reading the log.
    async fn replay_producers(
        &mut self,
        mut from: Offset,
        until: Offset,
    ) -> Result<(), EngineError> {
        while from < until {
            let read = self.read(from, 1 << 20).await?;
            let Some(last) = read.chunks.last() else {
                break;
            };
            from = validate_prefix(last)?.last_offset.plus(1);
            for chunk in &read.chunks {
                let meta = validate_prefix(chunk)?;
                if meta.base_offset < until {
                    self.producers.record(&meta);
                }
            }
        }
        Ok(())
    }
}

/// What the recovery scan of the active segment saw: where it started and the idempotent
/// producers' batches from there to the end.
struct ScannedTail {
    from: Offset,
    producer_batches: Vec<BatchMeta>,
}

/// Trims loaded indexes to their last entry and sets the segment up to scan from it.
/// Returns (position, expected offset) of that entry, `None` if there is none.
fn resume_point<F: BlockFile>(
    segment: &mut Segment<F>,
    mut index: OffsetIndex,
    mut time_index: TimeIndex,
) -> Option<(u64, Offset)> {
    let (rel, pos) = index.last()?;
    index.pop();
    time_index.truncate_from(RelativeOffset(rel.0 + 1));
    segment.max_timestamp = time_index
        .last()
        .map_or(segment.max_timestamp, |(ts, _)| ts);
    segment.index = index;
    segment.time_index = time_index;
    segment.size_bytes = u64::from(pos.0);
    segment.next_offset = rel.absolute(segment.base);
    segment.bytes_since_index = u64::MAX / 2;
    Some((u64::from(pos.0), segment.next_offset))
}

/// Validates up to [`SCAN_BATCHES_PER_STEP`] batches after the segment's current end.
/// Returns them and whether the scan is done (end of file or first invalid batch).
async fn scan_step<F: BlockFile>(
    segment: &mut Segment<F>,
    file_bytes: u64,
) -> Result<(Vec<BatchMeta>, bool), EngineError> {
    let (pos, expected) = (segment.size_bytes, segment.next_offset);
    segment.size_bytes = file_bytes; // let the cursor read past the known end
    let mut metas = Vec::new();
    let mut cursor = BatchCursor::new(segment, pos, expected, SCAN_READ_AHEAD_BYTES);
    let done = loop {
        if metas.len() == SCAN_BATCHES_PER_STEP {
            break false;
        }
        match cursor.next().await {
            Ok(Some((meta, _))) => metas.push(meta),
            Ok(None) | Err(EngineError::CorruptBatch(_)) => break true,
            Err(e) => {
                segment.size_bytes = pos;
                return Err(e);
            }
        }
    };
    segment.size_bytes = pos;
    Ok((metas, done))
}
