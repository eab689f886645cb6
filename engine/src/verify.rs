//! Offline verification and repair of one partition directory (`rill check`).
//!
//! Recovery at open trusts a sealed segment whose indexes decode, and validates only the active
//! segment from its last checkpoint. [`verify_partition`] reads every byte instead, read-only:
//! every batch of every segment through the same [`BatchCursor`] reads use (length, magic,
//! CRC-32C, offset continuity; inside sealed segments offsets only increase, as compaction
//! leaves gaps), segments contiguous in offsets, and every `.index` and
//! `.timeindex` entry against the batches it names, every sealed `.txnindex` against the ABORT
//! markers of its segment. [`repair_partition`] then cuts the log at
//! the first damaged batch, as recovery cuts a torn tail, drops the indexes found wrong, and
//! opens the log: recovery itself rebuilds the indexes, trims and checkpoints.
//!
//! | finding                             | where          | severity | repair                          |
//! |-------------------------------------|----------------|----------|---------------------------------|
//! | zero tail (preallocation)           | active segment | note     | trimmed                         |
//! | torn tail (a write a crash cut)     | active segment | note     | cut                             |
//! | any other bytes after valid batches | any segment    | damage   | cut there, later segments gone  |
//! | zero or torn tail                   | sealed segment | damage   | cut there, later segments gone  |
//! | segment not starting where the previous ended | start | damage | it and later segments removed |
//! | index missing (sealed), malformed, or an entry not naming a batch | index | damage | rebuilt |
//! | `.txnindex` of a sealed segment malformed, an entry not naming an ABORT marker, or an abort of a transaction seen open without its entry | index | damage | rebuilt from the log |
//! | index or `.tmp` file without its log, bad producer snapshot | directory | note | deleted / replaced |
//!
//! A torn tail is told from damage by where its zeros start: a crash loses whole sectors of a
//! write (or the file ends early), so a torn batch reaches into a sector that is all zeros, or
//! past the end of the file. A complete batch with a bad CRC is damage.

use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::config::LogConfig;
use crate::control::ControlType;
use crate::error::EngineError;
use crate::io::{BlockFile, Clock, OpenMode, Storage};
use crate::partition_log::{PartitionLog, PRODUCER_SNAPSHOT_FILE};
use crate::prealloc::PreallocBudget;
use crate::producer_state::ProducerState;
use crate::recovery::RecoveryStats;
use crate::segment::cursor::{BatchCursor, READ_AHEAD_BYTES};
use crate::segment::file_name::{is_leftover, log_bases, segment_file_name, FileKind};
use crate::segment::offset_index::OffsetIndex;
use crate::segment::time_index::TimeIndex;
use crate::segment::txn_index::TxnIndex;
use crate::segment::Segment;
use crate::small_file;
use crate::types::{Offset, RelativeOffset, TimestampMs};
use rill_types::ProducerId;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Bytes read at a time while looking for the end of a tail's non-zero bytes.
const TAIL_READ_BYTES: usize = 1 << 20;
/// The unit a crash keeps or loses of a write: a device sector.
const SECTOR_BYTES: u64 = 512;

/// What lies after the last valid batch of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailKind {
    /// Only zero bytes: preallocated space never written.
    Zeros,
    /// A batch cut short by a crash: it reaches into an all-zero sector or past the file end.
    Torn,
    /// Bytes that are not the next batch, and why.
    Invalid(String),
}

/// What is wrong with an index file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexProblem {
    /// A sealed, non-empty segment has no such file.
    Missing,
    /// The file does not decode (partial entry, not increasing) or is empty for a sealed,
    /// non-empty segment.
    Malformed,
    /// Entries that do not name a batch: how many, and the first one described.
    Entries {
        /// Wrong entries in the file.
        count: usize,
        /// The first wrong entry, described.
        first: String,
    },
}

/// One thing [`verify_partition`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// Bytes after the last valid batch of a segment.
    Tail {
        /// Base offset of the segment.
        segment: Offset,
        /// File position of the first byte that is not a valid batch.
        position: u64,
        /// The offset the next batch there should start at.
        offset: Offset,
        /// Bytes from `position` to the end of the file.
        bytes: u64,
        /// What they are.
        kind: TailKind,
        /// Whether this is the active (last) segment, where zero and torn tails are normal
        /// after an unclean stop.
        active: bool,
    },
    /// A segment does not start where the previous one ended (compaction keeps the header of
    /// a segment's last batch, so this holds for compacted segments too).
    OffsetGap {
        /// Base offset of the segment.
        segment: Offset,
        /// Where the previous segment's batches ended.
        expected: Offset,
    },
    /// A damaged `.index` or `.timeindex`.
    Index {
        /// Base offset of the segment.
        segment: Offset,
        /// Which index.
        kind: FileKind,
        /// What is wrong.
        problem: IndexProblem,
    },
    /// A file recovery deletes: an index without its log, a `.tmp` left by a crash; or a file
    /// of a compaction swap a crash interrupted, which recovery finishes or undoes.
    Leftover {
        /// The file name.
        name: String,
    },
    /// The producer snapshot does not decode (recovery replays producer state from the log).
    ProducerSnapshot,
}

impl Finding {
    /// Whether data is lost or a reader would be misled; notes are states an unclean stop
    /// leaves that recovery handles routinely.
    pub fn is_damage(&self) -> bool {
        match self {
            Finding::Tail { kind, active, .. } => !*active || matches!(kind, TailKind::Invalid(_)),
            Finding::OffsetGap { .. } | Finding::Index { .. } => true,
            Finding::Leftover { .. } | Finding::ProducerSnapshot => false,
        }
    }

    /// Base offset of the segment the finding is about, if it is about one.
    pub fn segment(&self) -> Option<Offset> {
        match self {
            Finding::Tail { segment, .. }
            | Finding::OffsetGap { segment, .. }
            | Finding::Index { segment, .. } => Some(*segment),
            Finding::Leftover { .. } | Finding::ProducerSnapshot => None,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Tail {
                segment,
                position,
                offset,
                bytes,
                kind,
                ..
            } => {
                let log = segment_file_name(*segment, FileKind::Log);
                write!(f, "{log} offset {offset} position {position}: ")?;
                match kind {
                    TailKind::Zeros => write!(f, "{bytes} bytes of zeros (preallocation)"),
                    TailKind::Torn => write!(f, "batch cut short by a crash ({bytes} bytes)"),
                    TailKind::Invalid(why) => write!(f, "{why} ({bytes} bytes from here on)"),
                }
            }
            Finding::OffsetGap { segment, expected } => write!(
                f,
                "{} offset {segment}: segment starts at {segment} but the previous one ends at {expected}",
                segment_file_name(*segment, FileKind::Log)
            ),
            Finding::Index {
                segment,
                kind,
                problem,
            } => {
                let name = segment_file_name(*segment, *kind);
                match problem {
                    IndexProblem::Missing => write!(f, "{name} offset {segment}: missing"),
                    IndexProblem::Malformed => write!(f, "{name} offset {segment}: malformed"),
                    IndexProblem::Entries { count: 1, first } => {
                        write!(f, "{name}: 1 wrong entry: {first}")
                    }
                    IndexProblem::Entries { count, first } => {
                        write!(f, "{name}: {count} wrong entries; first: {first}")
                    }
                }
            }
            Finding::Leftover { name } => write!(f, "{name}: leftover file (recovery deletes it)"),
            Finding::ProducerSnapshot => write!(
                f,
                "{PRODUCER_SNAPSHOT_FILE}: does not decode (recovery replays the log)"
            ),
        }
    }
}

/// One segment as verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedSegment {
    /// Base offset (the file name).
    pub base: Offset,
    /// One past the last offset of its valid batches.
    pub next_offset: Offset,
    /// Size of the `.log` file.
    pub log_bytes: u64,
    /// Bytes of valid batches from the start of the file.
    pub valid_bytes: u64,
    /// Valid batches.
    pub batches: u64,
    /// Largest batch max timestamp, `NONE` if no batch.
    pub max_timestamp: TimestampMs,
}

/// What [`verify_partition`] found in one partition directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionReport {
    /// Segments in offset order.
    pub segments: Vec<VerifiedSegment>,
    /// Findings, segments in order.
    pub findings: Vec<Finding>,
}

impl PartitionReport {
    /// Whether any finding is damage.
    pub fn is_damaged(&self) -> bool {
        self.findings.iter().any(Finding::is_damage)
    }

    /// One past the last valid offset (the first segment's base if it is empty).
    pub fn log_end(&self) -> Option<Offset> {
        self.segments.last().map(|s| s.next_offset)
    }
}

/// Reads and checks every segment and index in `dir`. Never writes; I/O errors propagate.
pub async fn verify_partition<S: Storage>(
    storage: &S,
    dir: &Path,
) -> Result<PartitionReport, EngineError> {
    let names = storage.list_dir(dir).await?;
    let bases = log_bases(&names);
    let mut report = PartitionReport::default();
    let mut leftovers: Vec<&String> = names
        .iter()
        .filter(|n| is_leftover(n, &bases) || crate::cleaner::is_swap_leftover(n))
        .collect();
    leftovers.sort();
    for name in leftovers {
        let name = name.clone();
        report.findings.push(Finding::Leftover { name });
    }
    let snapshot = small_file::read_whole(storage, &dir.join(PRODUCER_SNAPSHOT_FILE)).await?;
    if snapshot.is_some_and(|b| ProducerState::decode(&b).is_none()) {
        report.findings.push(Finding::ProducerSnapshot);
    }
    let mut expected = None;
    let mut open_txns = HashSet::new();
    for (i, &base) in bases.iter().enumerate() {
        if let Some(expected) = expected.filter(|&e| e != base) {
            let gap = Finding::OffsetGap {
                segment: base,
                expected,
            };
            report.findings.push(gap);
        }
        let active = i + 1 == bases.len();
        let found = &mut report.findings;
        let summary = verify_segment(storage, dir, base, active, &mut open_txns, found).await?;
        expected = Some(summary.next_offset);
        report.segments.push(summary);
    }
    Ok(report)
}

/// Walks one segment's batches, checks its indexes against them, classifies any tail.
/// `open_txns`: the producers seen with a transaction open so far (segments in order).
async fn verify_segment<S: Storage>(
    storage: &S,
    dir: &Path,
    base: Offset,
    active: bool,
    open_txns: &mut HashSet<ProducerId>,
    findings: &mut Vec<Finding>,
) -> Result<VerifiedSegment, EngineError> {
    let path = dir.join(segment_file_name(base, FileKind::Log));
    let file = storage.open(&path, OpenMode::Read).await?;
    let log_bytes = file.size_bytes().await?;
    let mut segment = Segment::new(base);
    segment.size_bytes = log_bytes;
    segment.may_have_gaps = !active; // compaction may have rewritten any sealed segment
    segment.file = Some(file);
    let (offsets, times) = read_indexes(storage, dir, base, active, log_bytes, findings).await?;
    // The active segment's `.txnindex` is a checkpoint recovery completes from the log.
    let txn_index = match active {
        true => None,
        false => {
            let path = dir.join(segment_file_name(base, FileKind::TxnIndex));
            small_file::read_whole(storage, &path).await?
        }
    };
    let mut entries = EntryCheck::new(base, offsets, times);
    let walked = walk(&segment, &mut entries, open_txns).await;
    let result = match walked {
        Ok(walk) => {
            if let Some(problem) = check_txn_index(txn_index.as_deref(), &walk) {
                let kind = FileKind::TxnIndex;
                findings.push(Finding::Index {
                    segment: base,
                    kind,
                    problem,
                });
            }
            finish_segment(&segment, walk, active, entries, findings).await
        }
        Err(e) => Err(e),
    };
    segment.file.take().expect("opened above").close().await?;
    result
}

/// Where a walk over a segment's batches stopped.
struct Walk {
    summary: VerifiedSegment,
    /// Why the batch at `valid_bytes` is not valid (`None`: too short for a header).
    failure: Option<String>,
    /// The ABORT markers among the valid batches, in offset order.
    aborts: Vec<AbortMarker>,
}

/// An ABORT marker met by a walk.
struct AbortMarker {
    offset: Offset,
    producer_id: ProducerId,
    /// Whether the walk saw the transaction it ends (a transactional batch of the producer
    /// since its previous marker). A marker also ends transactions that wrote nothing here,
    /// which get no entry, and the start of one may lie before the log start.
    seen_open: bool,
}

/// What is wrong with a sealed segment's `.txnindex` (`bytes`, `None` if there is none): it must
/// decode, each entry must name an ABORT marker of its producer in the segment, and each marker
/// ending a transaction the walk saw must have its entry (markers are never cleaned away, so a
/// compacted segment keeps them all).
fn check_txn_index(bytes: Option<&[u8]>, walk: &Walk) -> Option<IndexProblem> {
    let (base, next) = (walk.summary.base, walk.summary.next_offset);
    let index = match bytes {
        None => TxnIndex::default(),
        Some(b) => match TxnIndex::decode(b, base, next) {
            Some(index) => index,
            None => return Some(IndexProblem::Malformed),
        },
    };
    let held: Vec<(Offset, ProducerId)> = index
        .entries()
        .iter()
        .map(|e| (e.last_offset, e.producer_id))
        .collect();
    let markers: Vec<(Offset, ProducerId)> = walk
        .aborts
        .iter()
        .map(|m| (m.offset, m.producer_id))
        .collect();
    let mut wrong = (0, None);
    for &(offset, producer) in held.iter().filter(|e| !markers.contains(e)) {
        note(&mut wrong, || {
            format!("offset {offset}: no ABORT marker of producer {producer} there")
        });
    }
    let unindexed = walk
        .aborts
        .iter()
        .filter(|m| m.seen_open && !held.contains(&(m.offset, m.producer_id)));
    for m in unindexed {
        let (offset, producer) = (m.offset, m.producer_id);
        note(&mut wrong, || {
            format!("offset {offset}: the ABORT marker of producer {producer} has no entry")
        });
    }
    let (count, first) = wrong;
    Some(IndexProblem::Entries {
        count,
        first: first?,
    })
}

/// Validates batches from position 0 until the end or the first invalid one.
async fn walk<F: BlockFile>(
    segment: &Segment<F>,
    entries: &mut EntryCheck,
    open_txns: &mut HashSet<ProducerId>,
) -> Result<Walk, EngineError> {
    let mut cursor = BatchCursor::new(segment, 0, segment.base, READ_AHEAD_BYTES);
    let mut summary = VerifiedSegment {
        base: segment.base,
        next_offset: segment.base,
        log_bytes: segment.size_bytes,
        valid_bytes: 0,
        batches: 0,
        max_timestamp: TimestampMs::NONE,
    };
    let mut valid = (0, segment.base);
    let mut aborts = Vec::new();
    let failure = loop {
        let position = cursor.position();
        match cursor.next().await {
            // Relative offsets are u32 in the indexes: a segment never spans more (roll rule).
            Ok(Some((meta, _))) if meta.last_offset.0 - segment.base.0 > i64::from(u32::MAX) => {
                break Some(format!(
                    "batch at {position} runs past the segment's offset range"
                ));
            }
            Ok(Some((meta, _))) => {
                summary.max_timestamp = summary.max_timestamp.max(meta.max_timestamp);
                summary.batches += 1;
                entries.on_batch(meta.base_offset, position, summary.max_timestamp);
                match meta.control.map(|c| c.kind) {
                    None if meta.transactional => {
                        open_txns.insert(meta.producer_id);
                    }
                    None | Some(ControlType::Other(_)) => {}
                    Some(kind) => {
                        let seen_open = open_txns.remove(&meta.producer_id);
                        if kind == ControlType::Abort {
                            aborts.push(AbortMarker {
                                offset: meta.base_offset,
                                producer_id: meta.producer_id,
                                seen_open,
                            });
                        }
                    }
                }
                valid = (cursor.position(), cursor.expected());
            }
            Ok(None) => break None,
            Err(EngineError::CorruptBatch(why)) => break Some(why),
            Err(e) => return Err(e),
        }
    };
    (summary.valid_bytes, summary.next_offset) = valid;
    Ok(Walk {
        summary,
        failure,
        aborts,
    })
}

async fn finish_segment<F: BlockFile>(
    segment: &Segment<F>,
    walk: Walk,
    active: bool,
    mut entries: EntryCheck,
    findings: &mut Vec<Finding>,
) -> Result<VerifiedSegment, EngineError> {
    let summary = walk.summary;
    if summary.valid_bytes < summary.log_bytes {
        let kind = classify_tail(segment, summary.valid_bytes, walk.failure).await?;
        findings.push(Finding::Tail {
            segment: summary.base,
            position: summary.valid_bytes,
            offset: summary.next_offset,
            bytes: summary.log_bytes - summary.valid_bytes,
            kind,
            active,
        });
    }
    entries.finish(summary.valid_bytes);
    findings.extend(entries.findings());
    Ok(summary)
}

/// Reads and decodes a segment's two index files, noting missing or malformed ones.
async fn read_indexes<S: Storage>(
    storage: &S,
    dir: &Path,
    base: Offset,
    active: bool,
    log_bytes: u64,
    findings: &mut Vec<Finding>,
) -> Result<(OffsetIndex, TimeIndex), EngineError> {
    let mut decoded = (OffsetIndex::default(), TimeIndex::default());
    for kind in [FileKind::Index, FileKind::TimeIndex] {
        let path = dir.join(segment_file_name(base, kind));
        let bytes = small_file::read_whole(storage, &path).await?;
        // The active segment's indexes are checkpoints: missing or behind the log is normal.
        let needed = !active && log_bytes > 0;
        let problem = match (&bytes, kind) {
            (None, _) => needed.then_some(IndexProblem::Missing),
            (Some(b), FileKind::Index) => match OffsetIndex::decode(b, u64::MAX) {
                Some(index) if !(needed && index.is_empty()) => {
                    decoded.0 = index;
                    None
                }
                _ => Some(IndexProblem::Malformed),
            },
            (Some(b), _) => match TimeIndex::decode(b, u64::MAX) {
                Some(index) if !(needed && index.is_empty()) => {
                    decoded.1 = index;
                    None
                }
                _ => Some(IndexProblem::Malformed),
            },
        };
        if let Some(problem) = problem {
            let segment = base;
            findings.push(Finding::Index {
                segment,
                kind,
                problem,
            });
        }
    }
    Ok(decoded)
}

/// Checks index entries against the batches as a walk meets them, in one pass: every
/// `.index` entry must be a batch's start position and base offset, every `.timeindex` entry
/// a batch's base offset with the running max timestamp up to and including that batch.
struct EntryCheck {
    base: Offset,
    offsets: OffsetIndex,
    next_offset_entry: usize,
    times: TimeIndex,
    next_time_entry: usize,
    offset_wrong: (usize, Option<String>),
    time_wrong: (usize, Option<String>),
}

impl EntryCheck {
    fn new(base: Offset, offsets: OffsetIndex, times: TimeIndex) -> Self {
        EntryCheck {
            base,
            offsets,
            next_offset_entry: 0,
            times,
            next_time_entry: 0,
            offset_wrong: (0, None),
            time_wrong: (0, None),
        }
    }

    /// The batch with base `offset` starts at `position`; `max_ts` is the running max
    /// timestamp including it.
    fn on_batch(&mut self, offset: Offset, position: u64, max_ts: TimestampMs) {
        let rel = RelativeOffset::between(offset, self.base);
        while let Some(&(r, p)) = self.offsets.entries().get(self.next_offset_entry) {
            let p = u64::from(p.0);
            if p > position {
                break;
            }
            if p < position {
                note(&mut self.offset_wrong, || {
                    format!("position {p} is not the start of a batch")
                });
            } else if r != rel {
                let says = r.absolute(self.base);
                note(&mut self.offset_wrong, || {
                    format!("position {p} holds offset {offset}, the entry says {says}")
                });
            }
            self.next_offset_entry += 1;
        }
        while let Some(&(t, r)) = self.times.entries().get(self.next_time_entry) {
            if r > rel {
                break;
            }
            let says = r.absolute(self.base);
            if r < rel {
                note(&mut self.time_wrong, || {
                    format!("offset {says} is not the first offset of a batch")
                });
            } else if t != max_ts {
                note(&mut self.time_wrong, || {
                    format!(
                        "offset {says} has max timestamp {}, the entry says {}",
                        max_ts.0, t.0
                    )
                });
            }
            self.next_time_entry += 1;
        }
    }

    /// Entries not met by the walk point past the last valid batch (which ends at `end`).
    fn finish(&mut self, end: u64) {
        for &(_, p) in &self.offsets.entries()[self.next_offset_entry..] {
            note(&mut self.offset_wrong, || {
                format!(
                    "position {} is past the last valid batch (ends at {end})",
                    p.0
                )
            });
        }
        for &(_, r) in &self.times.entries()[self.next_time_entry..] {
            let says = r.absolute(self.base);
            note(&mut self.time_wrong, || {
                format!("offset {says} is past the last valid batch")
            });
        }
        self.next_offset_entry = self.offsets.len();
        self.next_time_entry = self.times.len();
    }

    fn findings(self) -> impl Iterator<Item = Finding> {
        let segment = self.base;
        [
            (FileKind::Index, self.offset_wrong),
            (FileKind::TimeIndex, self.time_wrong),
        ]
        .into_iter()
        .filter_map(move |(kind, (count, first))| {
            let problem = IndexProblem::Entries {
                count,
                first: first?,
            };
            Some(Finding::Index {
                segment,
                kind,
                problem,
            })
        })
    }
}

/// Counts a wrong entry, describing only the first (a damaged index may have millions).
fn note(wrong: &mut (usize, Option<String>), describe: impl FnOnce() -> String) {
    wrong.0 += 1;
    if wrong.1.is_none() {
        wrong.1 = Some(describe());
    }
}

/// What the bytes from `position` (where valid batches end) to the end of the file are.
async fn classify_tail<F: BlockFile>(
    segment: &Segment<F>,
    position: u64,
    failure: Option<String>,
) -> Result<TailKind, EngineError> {
    let nonzero_end = nonzero_end(segment, position).await?;
    if nonzero_end == position {
        return Ok(TailKind::Zeros);
    }
    let head = segment
        .read_range(position, HEADER_BYTES)
        .await
        .map_err(EngineError::from_io)?;
    let declared = BatchHeader::view(&head)
        .and_then(BatchHeader::total_bytes)
        .filter(|&total| total >= HEADER_BYTES)
        .unwrap_or(HEADER_BYTES);
    let extent_end = position.saturating_add(declared as u64);
    // A crash loses whole sectors (or the end of the file): the batch reaches into them.
    let written_end = nonzero_end.div_ceil(SECTOR_BYTES) * SECTOR_BYTES;
    if extent_end > segment.size_bytes || extent_end > written_end {
        return Ok(TailKind::Torn);
    }
    let why = failure.unwrap_or_else(|| "bytes too short for a batch header".to_string());
    Ok(TailKind::Invalid(why))
}

/// One past the last non-zero byte at or after `position` (`position` if there is none).
async fn nonzero_end<F: BlockFile>(
    segment: &Segment<F>,
    position: u64,
) -> Result<u64, EngineError> {
    let mut end = position;
    let mut pos = position;
    while pos < segment.size_bytes {
        let chunk = segment
            .read_range(pos, TAIL_READ_BYTES)
            .await
            .map_err(EngineError::from_io)?;
        if chunk.is_empty() {
            break;
        }
        if let Some(i) = chunk.iter().rposition(|&b| b != 0) {
            end = pos + i as u64 + 1;
        }
        pos += chunk.len() as u64;
    }
    Ok(end)
}

/// What [`repair_partition`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repair {
    /// Where the log was cut: segment base, file position, first offset lost.
    pub cut: Option<(Offset, u64, Offset)>,
    /// Segments removed whole: after the cut, or from an offset gap on.
    pub segments_removed: Vec<Offset>,
    /// Segments whose index files were dropped for recovery to rebuild.
    pub indexes_rebuilt: Vec<Offset>,
    /// One past the last offset after the repair.
    pub log_end: Offset,
    /// What recovery did when the repaired log was opened.
    pub recovery: RecoveryStats,
}

/// Repairs what `report` (from [`verify_partition`] on the same directory) found: cuts the
/// log at the first damaged or torn batch and removes every later segment (a later batch
/// cannot be trusted to follow on), drops wrong indexes, then opens and closes the log so
/// recovery rebuilds indexes, deletes leftovers and writes fresh checkpoints.
pub async fn repair_partition<S: Storage>(
    storage: Rc<S>,
    dir: PathBuf,
    report: &PartitionReport,
    config: LogConfig,
    clock: Rc<dyn Clock>,
) -> Result<Repair, EngineError> {
    let mut repair = Repair::default();
    let mut kept = report.segments.len();
    if let Some((i, position)) = cut_point(report) {
        for s in &report.segments[i + 1..] {
            remove_segment_files(&*storage, &dir, s.base).await?;
            repair.segments_removed.push(s.base);
        }
        let segment = &report.segments[i];
        match position {
            Some(position) => {
                truncate_log(&*storage, &dir, segment.base, position).await?;
                repair.cut = Some((segment.base, position, segment.next_offset));
                kept = i + 1;
            }
            None => {
                remove_segment_files(&*storage, &dir, segment.base).await?;
                repair.segments_removed.push(segment.base);
                kept = i;
            }
        }
    }
    repair.segments_removed.sort_unstable();
    let mut replay_producers = report.findings.contains(&Finding::ProducerSnapshot);
    for (i, s) in report.segments[..kept].iter().enumerate() {
        let cut_here = repair.cut.is_some_and(|(base, _, _)| base == s.base);
        let wrong = |kinds: &[FileKind]| {
            report.findings.iter().any(|f| {
                matches!(f, Finding::Index { segment, kind, .. } if *segment == s.base && kinds.contains(kind))
            })
        };
        let txn_index_wrong = wrong(&[FileKind::TxnIndex]);
        if cut_here || wrong(&[FileKind::Index, FileKind::TimeIndex]) {
            for kind in [FileKind::Index, FileKind::TimeIndex] {
                remove_if_present(&*storage, &dir.join(segment_file_name(s.base, kind))).await?;
            }
        }
        if txn_index_wrong && i + 1 < kept {
            // Still sealed: recovery rebuilds a sealed `.txnindex` that does not decode (it
            // replays producers from the log start), never one that is absent (no aborts).
            // One byte is not a whole entry.
            let name = segment_file_name(s.base, FileKind::TxnIndex);
            small_file::write_atomic(&*storage, &dir, &name, &[0]).await?;
        }
        // Now the active segment: recovery re-derives its entries from its producer
        // replay, which starts at the snapshot; without one it starts at the log start.
        replay_producers |= txn_index_wrong && i + 1 == kept;
        if cut_here || wrong(&[FileKind::Index, FileKind::TimeIndex, FileKind::TxnIndex]) {
            repair.indexes_rebuilt.push(s.base);
        }
    }
    if replay_producers {
        // Recovery ignores a snapshot that does not decode; without it, it replays the log
        // and the close writes a fresh one.
        remove_if_present(&*storage, &dir.join(PRODUCER_SNAPSHOT_FILE)).await?;
    }
    // Nothing is appended between this open and the close (no preallocation), and nothing is
    // read but what recovery replays (no read cache).
    let no_prealloc = PreallocBudget::new(0);
    let no_cache = Rc::new(crate::read_cache::ReadCache::new(0));
    let mut log = PartitionLog::open(storage, dir, config, clock, no_prealloc, no_cache).await?;
    repair.log_end = log.log_end_offset();
    repair.recovery = log.recovery_stats();
    // Fresh indexes and snapshot now: a close leaves a short tail to the next open instead.
    log.write_checkpoint().await?;
    log.close().await?;
    Ok(repair)
}

/// The first place the log must end: (segment index, `Some(position)` to cut inside it or
/// `None` to remove it whole).
fn cut_point(report: &PartitionReport) -> Option<(usize, Option<u64>)> {
    let index_of = |base: Offset| report.segments.iter().position(|s| s.base == base);
    report
        .findings
        .iter()
        .filter_map(|f| match f {
            Finding::Tail {
                segment, position, ..
            } => Some((index_of(*segment)?, Some(*position))),
            Finding::OffsetGap { segment, .. } => Some((index_of(*segment)?, None)),
            _ => None,
        })
        .min_by_key(|&(i, position)| (i, position.is_some()))
}

async fn truncate_log<S: Storage>(
    storage: &S,
    dir: &Path,
    base: Offset,
    position: u64,
) -> Result<(), EngineError> {
    let path = dir.join(segment_file_name(base, FileKind::Log));
    let file = storage.open(&path, OpenMode::ReadWrite).await?;
    file.truncate(position).await?;
    file.sync().await?;
    file.close().await?;
    Ok(())
}

async fn remove_segment_files<S: Storage>(
    storage: &S,
    dir: &Path,
    base: Offset,
) -> Result<(), EngineError> {
    for kind in FileKind::ALL {
        remove_if_present(storage, &dir.join(segment_file_name(base, kind))).await?;
    }
    Ok(())
}

async fn remove_if_present<S: Storage>(storage: &S, path: &Path) -> Result<(), EngineError> {
    if storage.exists(path).await? {
        storage.remove_file(path).await?;
    }
    Ok(())
}
