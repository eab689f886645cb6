//! `rill check DATA_DIR [--repair]`: verify every segment and index of a data directory offline.
//!
//! Each partition directory (`<topic>-<n>`, and the group offsets logs under `__rill_groups/`)
//! goes through the engine's [`verify_partition`]: every batch's length, magic, CRC-32C and
//! offsets, segments contiguous, every index entry naming a batch. Output, one line each:
//!
//! ```text
//! ok       orders-0: 3 segments, offsets 0..1200, 1048576 bytes
//! note     orders-1 00000000000000000000.log offset 40 position 14440: 16762440 bytes of zeros (preallocation)
//! DAMAGED  orders-2 00000000000000000000.log offset 17 position 4096: CRC-32C mismatch (12345 bytes from here on)
//! ```
//!
//! Exit status: 0 when nothing is damaged (notes are states an unclean stop leaves, which
//! recovery handles), 1 when something is damaged, 2 when the directory cannot be checked.
//! `--repair` runs the engine's [`repair_partition`] on every partition with a finding (cut at
//! the first damaged batch, later segments removed, indexes rebuilt by recovery), verifies it
//! again and exits 0 only if all is clean. It refuses to run while a broker holds the directory.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use futures::executor::block_on;
use rill_engine::io::SystemClock;
use rill_engine::segment::file_name::{segment_file_name, FileKind};
use rill_engine::verify::{repair_partition, verify_partition, PartitionReport, Repair};
use rill_engine::LogConfig;

use super::std_storage::StdStorage;
use crate::data_dir_lock::DataDirLock;

/// Where the broker keeps the consumer-group offsets logs (see `group::journal`).
const GROUPS_DIR: &str = "__rill_groups";
/// Where the broker keeps its own metadata and lock (see `data_dir_lock`).
const META_DIR: &str = ".rill-meta";

/// Exit status: nothing damaged.
pub const EXIT_CLEAN: i32 = 0;
/// Exit status: damage found (and not repaired).
pub const EXIT_DAMAGED: i32 = 1;
/// Exit status: the directory could not be checked.
pub const EXIT_ERROR: i32 = 2;

/// Counts for the summary line.
#[derive(Debug, Default)]
struct Tally {
    partitions: usize,
    segments: usize,
    bytes: u64,
    damaged: usize,
    noted: usize,
    repaired: usize,
    unreadable: usize,
}

/// Runs the check (and repair) and returns the exit status.
pub fn run(data_dir: &Path, repair: bool, out: &mut dyn Write) -> io::Result<i32> {
    if !data_dir.is_dir() {
        writeln!(out, "error: {} is not a directory", data_dir.display())?;
        return Ok(EXIT_ERROR);
    }
    // Only a directory a broker has used has the lock file; taking it keeps a broker from
    // starting while --repair writes.
    let _lock = match lock(data_dir, repair, out)? {
        Ok(lock) => lock,
        Err(status) => return Ok(status),
    };
    let dirs = match partition_dirs(data_dir) {
        Ok(dirs) => dirs,
        Err(e) => {
            writeln!(out, "error: cannot list {}: {e}", data_dir.display())?;
            return Ok(EXIT_ERROR);
        }
    };
    let mut tally = Tally::default();
    for dir in &dirs {
        check_partition(data_dir, dir, repair, &mut tally, out)?;
    }
    writeln!(
        out,
        "checked {} partitions ({} segments, {} bytes): {} damaged, {} with notes, {} repaired, {} unreadable",
        tally.partitions, tally.segments, tally.bytes, tally.damaged, tally.noted, tally.repaired, tally.unreadable
    )?;
    Ok(if tally.unreadable > 0 {
        EXIT_ERROR
    } else if tally.damaged > 0 {
        EXIT_DAMAGED
    } else {
        EXIT_CLEAN
    })
}

/// Takes the broker's data-dir lock if the directory has one: `Err(status)` to stop (a
/// broker runs and `--repair` was asked), `Ok(None)` to go on without it.
fn lock(
    data_dir: &Path,
    repair: bool,
    out: &mut dyn Write,
) -> io::Result<Result<Option<DataDirLock>, i32>> {
    if !data_dir.join(META_DIR).is_dir() {
        return Ok(Ok(None));
    }
    match DataDirLock::acquire(data_dir) {
        Ok(lock) => Ok(Ok(Some(lock))),
        Err(e) if repair => {
            writeln!(out, "error: {e}: stop the broker before --repair")?;
            Ok(Err(EXIT_ERROR))
        }
        Err(e) => {
            writeln!(out, "warning: {e}: a broker is writing; its active segments may change while they are read")?;
            Ok(Ok(None))
        }
    }
}

/// Partition directories: `<name>-<digits>` children of the data dir and of `__rill_groups`.
pub(crate) fn partition_dirs(data_dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for parent in [data_dir.to_path_buf(), data_dir.join(GROUPS_DIR)] {
        if !parent.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&parent)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type()?.is_dir() && is_partition_name(&name) {
                dirs.push(entry.path());
            }
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// `<topic>-<partition>`: a non-empty name, a dash, digits.
fn is_partition_name(name: &str) -> bool {
    name.rsplit_once('-').is_some_and(|(topic, n)| {
        !topic.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
    })
}

fn check_partition(
    data_dir: &Path,
    dir: &Path,
    repair: bool,
    tally: &mut Tally,
    out: &mut dyn Write,
) -> io::Result<()> {
    let name = dir
        .strip_prefix(data_dir)
        .unwrap_or(dir)
        .display()
        .to_string();
    tally.partitions += 1;
    let report = match block_on(verify_partition(&StdStorage, dir)) {
        Ok(report) => report,
        Err(e) => {
            tally.unreadable += 1;
            return writeln!(out, "ERROR    {name}: cannot read: {e}");
        }
    };
    tally.segments += report.segments.len();
    tally.bytes += report.segments.iter().map(|s| s.log_bytes).sum::<u64>();
    print_report(&name, &report, out)?;
    if report.is_damaged() {
        tally.damaged += 1;
    } else if !report.findings.is_empty() {
        tally.noted += 1;
    }
    if !repair || report.findings.is_empty() {
        return Ok(());
    }
    repair_one(&name, dir, &report, tally, out)
}

fn print_report(name: &str, report: &PartitionReport, out: &mut dyn Write) -> io::Result<()> {
    if report.findings.is_empty() {
        let start = report.segments.first().map_or(0, |s| s.base.0);
        let end = report.log_end().map_or(0, |o| o.0);
        let bytes: u64 = report.segments.iter().map(|s| s.log_bytes).sum();
        let segments = report.segments.len();
        return writeln!(
            out,
            "ok       {name}: {segments} segments, offsets {start}..{end}, {bytes} bytes"
        );
    }
    for finding in &report.findings {
        let label = if finding.is_damage() {
            "DAMAGED"
        } else {
            "note"
        };
        writeln!(out, "{label:<8} {name} {finding}")?;
    }
    Ok(())
}

fn repair_one(
    name: &str,
    dir: &Path,
    report: &PartitionReport,
    tally: &mut Tally,
    out: &mut dyn Write,
) -> io::Result<()> {
    let config = LogConfig {
        // Never smaller than a segment already on disk; recovery trims what it preallocates.
        segment_bytes_max: i32::MAX as u64,
        retention_ms: None,
        ..LogConfig::default()
    };
    let repaired = block_on(repair_partition(
        Rc::new(StdStorage),
        dir.to_path_buf(),
        report,
        config,
        Rc::new(SystemClock),
    ));
    let repaired = match repaired {
        Ok(repaired) => repaired,
        Err(e) => {
            tally.unreadable += 1;
            return writeln!(out, "ERROR    {name}: repair failed: {e}");
        }
    };
    writeln!(out, "repaired {name}: {}", describe(&repaired))?;
    match block_on(verify_partition(&StdStorage, dir)) {
        Ok(after) if after.findings.is_empty() => {
            tally.repaired += 1;
            tally.damaged -= usize::from(report.is_damaged());
            tally.noted -= usize::from(!report.is_damaged());
            Ok(())
        }
        Ok(after) => print_report(name, &after, out),
        Err(e) => {
            tally.unreadable += 1;
            writeln!(out, "ERROR    {name}: cannot read after repair: {e}")
        }
    }
}

/// What a repair did, in one line.
fn describe(repair: &Repair) -> String {
    let mut parts = Vec::new();
    if let Some((segment, position, offset)) = repair.cut {
        let log = segment_file_name(segment, FileKind::Log);
        parts.push(format!(
            "cut {log} at position {position} (offsets from {offset} removed)"
        ));
    }
    if !repair.segments_removed.is_empty() {
        let names: Vec<String> = repair
            .segments_removed
            .iter()
            .map(|b| segment_file_name(*b, FileKind::Log))
            .collect();
        parts.push(format!("removed {}", names.join(" ")));
    }
    if !repair.indexes_rebuilt.is_empty() {
        let bases: Vec<String> = repair
            .indexes_rebuilt
            .iter()
            .map(|b| b.to_string())
            .collect();
        parts.push(format!("rebuilt indexes of segments {}", bases.join(" ")));
    }
    parts.push(format!("log end now {}", repair.log_end));
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names() {
        for good in ["t-0", "a-b-12", "__consumer_offsets-3"] {
            assert!(is_partition_name(good), "{good}");
        }
        for bad in [".rill-meta", "t-", "-1", "t-1a", "topic"] {
            assert!(!is_partition_name(bad), "{bad}");
        }
    }
}
