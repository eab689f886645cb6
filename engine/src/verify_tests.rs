//! Tests of [`crate::verify`]: clean logs verify clean; every kind of damage is named at the
//! right segment, position and offset; repair leaves a log that verifies clean and opens; and
//! seeded random damage never makes verify or repair panic.

use crate::batch::HEADER_BYTES;
use crate::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
use crate::io::{BlockFile, OpenMode, Storage};
use crate::log_tests::{append, open, read_all, small_config, DIR};
use crate::partition_log::PartitionLog;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::types::{Offset, TimestampMs};
use crate::verify::{
    repair_partition, verify_partition, Finding, IndexProblem, PartitionReport, TailKind,
};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Records per test batch.
const RECORDS: i32 = 2;
/// Payload bytes per test batch: a batch is 361 bytes, 11 to a 4 KiB segment.
const PAYLOAD_BYTES: usize = 300;
const BATCH_BYTES: u64 = (HEADER_BYTES + PAYLOAD_BYTES) as u64;

fn path(base: Offset, kind: FileKind) -> PathBuf {
    Path::new(DIR).join(segment_file_name(base, kind))
}

/// A cleanly closed log of `batches` batches over several 4 KiB segments, its active segment's
/// indexes checkpointed up to its last batch (a close leaves them so when the log is more than
/// `CLOSE_SCAN_BYTES_MAX` past its last checkpoint; these tests damage and check them).
fn closed_log(seed: u64, batches: usize) -> SimStorage {
    let s = SimStorage::new(seed, FaultConfig::default());
    let mut log = open(&s, small_config());
    for i in 0..batches {
        append(&mut log, RECORDS, PAYLOAD_BYTES, 1_000 + i as i64);
    }
    block_on(log.flush()).unwrap();
    block_on(log.write_checkpoint()).unwrap();
    block_on(log.close()).unwrap();
    s
}

fn verify(s: &SimStorage) -> PartitionReport {
    block_on(verify_partition(s, Path::new(DIR))).unwrap()
}

fn repair(s: &SimStorage, report: &PartitionReport) -> crate::verify::Repair {
    let clock = Rc::new(ManualClock::new(TimestampMs(5_000)));
    let dir = PathBuf::from(DIR);
    block_on(repair_partition(
        Rc::new(s.clone()),
        dir,
        report,
        small_config(),
        clock,
    ))
    .unwrap()
}

fn truncate(s: &SimStorage, path: &Path, len: u64) {
    let file = block_on(s.open(path, OpenMode::ReadWrite)).unwrap();
    block_on(file.truncate(len)).unwrap();
    block_on(file.sync()).unwrap();
}

fn remove(s: &SimStorage, path: &Path) {
    block_on(s.remove_file(path)).unwrap();
}

/// Reopens the log and reads it whole: batches must be contiguous up to `end`.
fn assert_opens_and_reads_to(s: &SimStorage, end: Offset) {
    let mut log = open(s, small_config());
    assert_eq!(log.log_end_offset(), end);
    let start = log.log_start_offset();
    let batches = read_all(&mut log, start);
    let mut next = start;
    for (base, last) in batches {
        assert_eq!(base, next, "contiguous");
        next = last.plus(1);
    }
    assert_eq!(next, end);
    block_on(log.close()).unwrap();
}

/// Repairs, then checks the log verifies clean and opens with `end` as its log end.
fn repair_and_check(s: &SimStorage, report: &PartitionReport, end: Offset) {
    let repaired = repair(s, report);
    assert_eq!(repaired.log_end, end);
    let after = verify(s);
    assert_eq!(after.findings, vec![], "clean after repair");
    assert_opens_and_reads_to(s, end);
}

#[test]
fn a_clean_log_has_no_findings() {
    let s = closed_log(1, 60);
    let report = verify(&s);
    assert_eq!(report.findings, vec![]);
    assert!(report.segments.len() > 3);
    assert_eq!(report.log_end(), Some(Offset(120)));
    assert_eq!(report.segments.iter().map(|s| s.batches).sum::<u64>(), 60);
    for pair in report.segments.windows(2) {
        assert_eq!(pair[0].next_offset, pair[1].base);
        assert_eq!(pair[0].valid_bytes, pair[0].log_bytes);
    }
}

#[test]
fn the_zero_tail_of_an_open_log_is_a_note() {
    let s = SimStorage::new(2, FaultConfig::default());
    let mut log = open(&s, small_config());
    append(&mut log, RECORDS, PAYLOAD_BYTES, 1);
    block_on(log.flush()).unwrap();
    let report = verify(&s);
    let [Finding::Tail { kind, position, .. }] = &report.findings[..] else {
        panic!("one tail finding, got {:?}", report.findings)
    };
    assert_eq!((kind, *position), (&TailKind::Zeros, BATCH_BYTES));
    assert!(!report.is_damaged());
    drop(log);
    repair_and_check(&s, &report, Offset(2));
}

#[test]
fn a_flipped_byte_in_a_sealed_segment_is_damage_and_repair_cuts_there() {
    let s = closed_log(3, 60);
    let seg1 = verify(&s).segments[1].clone();
    // A payload byte of the fourth batch of the second segment.
    let batch_pos = 3 * BATCH_BYTES;
    s.corrupt(
        &path(seg1.base, FileKind::Log),
        (batch_pos + 100) as usize,
        &[0xEE],
    );
    let report = verify(&s);
    assert!(report.is_damaged());
    let lost = seg1.base.plus(3 * i64::from(RECORDS));
    match &report.findings[0] {
        Finding::Tail {
            segment,
            position,
            offset,
            kind: TailKind::Invalid(why),
            active: false,
            ..
        } => {
            assert_eq!((*segment, *position, *offset), (seg1.base, batch_pos, lost));
            assert!(why.contains("CRC"), "{why}");
        }
        other => panic!("expected a tail finding, got {other}"),
    }
    let gap = report
        .findings
        .iter()
        .find(|f| matches!(f, Finding::OffsetGap { .. }));
    assert!(matches!(gap, Some(Finding::OffsetGap { expected, .. }) if *expected == lost));
    let repaired = repair(&s, &report);
    assert_eq!(repaired.cut, Some((seg1.base, batch_pos, lost)));
    assert_eq!(repaired.segments_removed.len(), report.segments.len() - 2);
    repair_and_check(&s, &verify(&s), lost);
}

#[test]
fn damage_before_the_active_checkpoint_is_found_though_recovery_would_miss_it() {
    let s = closed_log(4, 8);
    let report = verify(&s);
    assert_eq!(report.segments.len(), 1);
    // The first batch of the active segment, whose index entries point past it.
    s.corrupt(&path(Offset(0), FileKind::Log), 70, &[0x01]);
    let report = verify(&s);
    assert!(report.is_damaged());
    assert!(matches!(
        &report.findings[0],
        Finding::Tail {
            position: 0,
            offset: Offset(0),
            kind: TailKind::Invalid(_),
            active: true,
            ..
        }
    ));
    assert!(report.findings.iter().any(|f| matches!(
        f,
        Finding::Index {
            problem: IndexProblem::Entries { .. },
            ..
        }
    )));
    repair_and_check(&s, &report, Offset(0));
}

#[test]
fn a_batch_torn_at_every_byte_is_a_note_and_repair_keeps_the_batches_before() {
    let s = closed_log(5, 5);
    let log_path = path(Offset(0), FileKind::Log);
    let whole = s.file_bytes(&log_path).unwrap();
    let last_start = whole.len() as u64 - BATCH_BYTES;
    for cut in 1..BATCH_BYTES {
        let s = closed_log(5, 5);
        truncate(&s, &log_path, last_start + cut);
        // As after a crash before any index checkpoint covered the last batch (checkpoints
        // follow an fdatasync, so they never name bytes a crash can tear).
        remove(&s, &path(Offset(0), FileKind::Index));
        remove(&s, &path(Offset(0), FileKind::TimeIndex));
        let report = verify(&s);
        let [Finding::Tail { kind, position, .. }] = &report.findings[..] else {
            panic!("cut {cut}: {:?}", report.findings)
        };
        assert_eq!(*position, last_start);
        // The batch starts with baseOffset 8: its first 7 bytes are zeros.
        let expected = if cut < 8 {
            TailKind::Zeros
        } else {
            TailKind::Torn
        };
        assert_eq!(*kind, expected, "cut {cut}");
        assert!(!report.is_damaged());
        if cut % 60 == 1 {
            repair_and_check(&s, &report, Offset(8));
        }
    }
}

#[test]
fn an_index_naming_lost_bytes_of_the_active_segment_is_damage() {
    // Index checkpoints follow an fdatasync: an entry past the valid batches means durable
    // bytes were lost.
    let s = closed_log(5, 5);
    let log_path = path(Offset(0), FileKind::Log);
    let len = s.file_bytes(&log_path).unwrap().len() as u64;
    truncate(&s, &log_path, len - BATCH_BYTES / 2);
    let report = verify(&s);
    assert!(report.is_damaged(), "{:?}", report.findings);
    repair_and_check(&s, &report, Offset(8));
}

#[test]
fn a_torn_batch_followed_by_zeros_is_torn_but_a_whole_bad_batch_is_damage() {
    let s = closed_log(6, 3);
    let log_path = path(Offset(0), FileKind::Log);
    // Zero the last 1024 bytes of the last batch (two sectors lost), keep the file length.
    let len = s.file_bytes(&log_path).unwrap().len();
    s.corrupt(&log_path, len - 200, &[0u8; 200]);
    let report = verify(&s);
    let torn = |f: &Finding| {
        matches!(
            f,
            Finding::Tail {
                kind: TailKind::Torn,
                ..
            }
        )
    };
    assert!(report.findings.iter().any(torn), "{:?}", report.findings);
    // A whole last batch with one flipped bit in its final sector is damage.
    let s = closed_log(6, 3);
    s.corrupt(&log_path, len - 1, &[0x55]);
    let report = verify(&s);
    assert!(report.is_damaged(), "{:?}", report.findings);
}

#[test]
fn wrong_missing_and_malformed_indexes_are_damage_and_rebuilt() {
    let s = closed_log(7, 60);
    let bases: Vec<Offset> = verify(&s).segments.iter().map(|s| s.base).collect();
    // An entry's position moved by one byte: no longer the start of a batch.
    s.corrupt(&path(bases[0], FileKind::Index), 15, &[0x01]);
    remove(&s, &path(bases[1], FileKind::TimeIndex));
    s.corrupt(&path(bases[2], FileKind::Index), 0, &[0xFF; 3]);
    let report = verify(&s);
    let problems: Vec<(Offset, FileKind, IndexProblem)> = report
        .findings
        .iter()
        .filter_map(|f| match f {
            Finding::Index {
                segment,
                kind,
                problem,
            } => Some((*segment, *kind, problem.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(problems.len(), 3, "{:?}", report.findings);
    assert!(
        matches!(problems[0], (b, FileKind::Index, IndexProblem::Entries { count: 1, .. }) if b == bases[0])
    );
    assert_eq!(
        problems[1],
        (bases[1], FileKind::TimeIndex, IndexProblem::Missing)
    );
    assert_eq!(
        problems[2],
        (bases[2], FileKind::Index, IndexProblem::Malformed)
    );
    let repaired = repair(&s, &report);
    assert_eq!(repaired.indexes_rebuilt, bases[..3].to_vec());
    assert_eq!(repaired.cut, None);
    repair_and_check(&s, &verify(&s), Offset(120));
}

#[test]
fn a_missing_segment_is_an_offset_gap_and_repair_ends_the_log_before_it() {
    let s = closed_log(8, 60);
    let segments = verify(&s).segments;
    for kind in [FileKind::Log, FileKind::Index, FileKind::TimeIndex] {
        remove(&s, &path(segments[2].base, kind));
    }
    let report = verify(&s);
    assert_eq!(
        report.findings,
        vec![Finding::OffsetGap {
            segment: segments[3].base,
            expected: segments[2].base
        }]
    );
    let repaired = repair(&s, &report);
    assert_eq!(repaired.segments_removed[0], segments[3].base);
    repair_and_check(&s, &verify(&s), segments[2].base);
}

#[test]
fn leftovers_and_a_bad_producer_snapshot_are_notes_that_repair_clears() {
    let s = closed_log(9, 20);
    let dir = Path::new(DIR);
    block_on(crate::small_file::write_atomic(
        &s,
        dir,
        "00000000000000099999.index",
        b"",
    ))
    .unwrap();
    block_on(crate::small_file::write_atomic(
        &s,
        dir,
        "producer.snapshot",
        b"junk",
    ))
    .unwrap();
    let tmp = block_on(s.open(&dir.join("x.tmp"), OpenMode::CreateReadWrite)).unwrap();
    block_on(tmp.close()).unwrap();
    let report = verify(&s);
    assert_eq!(report.findings.len(), 3, "{:?}", report.findings);
    assert!(!report.is_damaged());
    repair_and_check(&s, &report, Offset(40));
}

#[test]
fn an_offset_overflowing_base_is_damage_not_a_panic() {
    let s = closed_log(10, 3);
    s.corrupt(
        &path(Offset(0), FileKind::Log),
        BATCH_BYTES as usize,
        &[0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
    );
    let report = verify(&s);
    assert!(report.is_damaged());
    repair_and_check(&s, &report, Offset(2));
}

/// One random kind of damage to one random file of the partition.
fn damage(s: &SimStorage, rng: &mut fastrand::Rng) {
    let names = block_on(s.list_dir(Path::new(DIR))).unwrap();
    let name = &names[rng.usize(..names.len())];
    let path = Path::new(DIR).join(name);
    let len = s.file_bytes(&path).unwrap().len();
    match rng.u8(..5) {
        0 if len > 0 => s.corrupt(&path, rng.usize(..len), &[rng.u8(..)]),
        1 => truncate(s, &path, rng.u64(..=len as u64)),
        2 => {
            let junk: Vec<u8> = (0..rng.usize(1..700)).map(|_| rng.u8(..)).collect();
            s.corrupt(&path, len, &junk);
        }
        3 if len > 8 => {
            // A batch's baseOffset: outside the CRC, so only offset checks catch it.
            let at = rng.usize(..len - 8) / BATCH_BYTES as usize * BATCH_BYTES as usize;
            s.corrupt(&path, at, &rng.i64(..).to_be_bytes());
        }
        4 => remove(s, &path),
        _ => s.corrupt(&path, len, &[0u8; 4096]),
    }
}

#[test]
fn random_damage_never_panics_and_repair_always_leaves_a_clean_log() {
    for seed in 0..150u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let s = closed_log(seed, rng.usize(1..40));
        for _ in 0..rng.usize(1..4) {
            damage(&s, &mut rng);
        }
        let report = verify(&s);
        let clock = Rc::new(ManualClock::new(TimestampMs(5_000)));
        let storage = Rc::new(s.clone());
        let repaired = block_on(repair_partition(
            storage,
            PathBuf::from(DIR),
            &report,
            small_config(),
            clock,
        ));
        let repaired =
            repaired.unwrap_or_else(|e| panic!("seed {seed}: repair failed: {e}; {report:?}"));
        let after = verify(&s);
        assert_eq!(after.findings, vec![], "seed {seed}: {report:?}");
        assert_opens_and_reads_to(&s, repaired.log_end);
    }
}

#[test]
fn verify_reads_what_the_log_itself_wrote_while_open() {
    // Verification is read-only: a log still open (its active file being written) stays usable.
    let s = SimStorage::new(11, FaultConfig::default());
    let mut log: PartitionLog<SimStorage> = open(&s, small_config());
    for i in 0..30 {
        append(&mut log, RECORDS, PAYLOAD_BYTES, i);
    }
    block_on(log.flush()).unwrap();
    let report = verify(&s);
    assert!(!report.is_damaged(), "{:?}", report.findings);
    append(&mut log, RECORDS, PAYLOAD_BYTES, 99);
    block_on(log.close()).unwrap();
    assert_eq!(verify(&s).findings, vec![]);
}

/// A sealed segment holding two aborted transactions and a committed one between them, then
/// an abort of a transaction that wrote nothing here (a marker without an entry), and later
/// segments of plain batches: the aborts' (producer, first, marker) offsets.
fn log_with_aborts(s: &SimStorage) -> Vec<(i64, i64, i64)> {
    use crate::txn_tests::{end_txn, txn_append};
    let mut log = open(s, small_config());
    let mut aborts = Vec::new();
    end_txn(&mut log, 8, false);
    for (pid, commit) in [(5, false), (6, true), (7, false)] {
        let first = txn_append(&mut log, pid, 0, 1);
        let marker = end_txn(&mut log, pid, commit);
        if !commit {
            aborts.push((pid, first.0, marker.0));
        }
    }
    for i in 0..30 {
        append(&mut log, 1, 300, i); // seals the first segment
    }
    block_on(log.close()).unwrap();
    aborts
}

/// A way to damage a file, named, with what verify must find after it.
type Damage<'a> = (&'a str, Box<dyn Fn() + 'a>, Finding);

fn txn_index_finding(count: usize, first: String) -> Finding {
    let problem = IndexProblem::Entries { count, first };
    Finding::Index {
        segment: Offset(0),
        kind: FileKind::TxnIndex,
        problem,
    }
}

#[test]
fn a_txnindex_must_hold_one_entry_per_abort_marker_and_repair_rebuilds_it() {
    let s = SimStorage::new(3, FaultConfig::default());
    let aborts = log_with_aborts(&s);
    assert!(verify(&s).findings.is_empty(), "{:?}", verify(&s).findings);
    let txn_index = path(Offset(0), FileKind::TxnIndex);
    let good = s.file_bytes(&txn_index).unwrap();
    assert_eq!(good.len(), 2 * 34);
    let (second_marker, first_marker) = (aborts[1].2, aborts[0].2);
    let damages: [Damage; 4] = [
        (
            "an entry lost",
            Box::new(|| truncate(&s, &txn_index, 34)),
            txn_index_finding(
                1,
                format!("offset {second_marker}: the ABORT marker of producer 7 has no entry"),
            ),
        ),
        (
            "an entry naming another producer",
            Box::new(|| s.corrupt(&txn_index, 2 + 7, &[6])),
            txn_index_finding(
                2,
                format!("offset {first_marker}: no ABORT marker of producer 6 there"),
            ),
        ),
        (
            "the file gone",
            Box::new(|| remove(&s, &txn_index)),
            txn_index_finding(
                2,
                format!("offset {first_marker}: the ABORT marker of producer 5 has no entry"),
            ),
        ),
        (
            "not whole entries",
            Box::new(|| truncate(&s, &txn_index, 50)),
            Finding::Index {
                segment: Offset(0),
                kind: FileKind::TxnIndex,
                problem: IndexProblem::Malformed,
            },
        ),
    ];
    for (what, damage, finding) in damages {
        damage();
        let report = verify(&s);
        assert_eq!(report.findings, vec![finding], "{what}");
        assert!(report.is_damaged(), "{what}");
        let repaired = repair(&s, &report);
        assert_eq!(repaired.indexes_rebuilt, vec![Offset(0)], "{what}");
        assert!(verify(&s).findings.is_empty(), "{what}: {:?}", verify(&s));
        let mut log = open(&s, small_config());
        let end = log.log_end_offset().0;
        assert_eq!(
            crate::txn_tests::aborted(&mut log, 0, end),
            aborts,
            "{what}"
        );
        block_on(log.close()).unwrap();
    }
}
