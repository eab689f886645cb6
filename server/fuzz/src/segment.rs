//! The offline tools on arbitrary segment bytes (target `segment_check`): `rill dump-log` reads
//! them as a `.log`, `.index` and `.timeindex` file, and the engine's verify and repair (what
//! `rill check --repair` runs) take them as a partition's only segment on the simulated disk.
//!
//! Invariants checked on every input:
//! - nothing panics (dump, verify, repair, the recovery that repair runs);
//! - after a repair the partition verifies with no finding at all, and opens.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use rill_engine::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
use rill_engine::io::{align_up, BlockFile, OpenMode, Storage};
use rill_engine::verify::{repair_partition, verify_partition};
use rill_engine::{LogConfig, TimestampMs};
use rill_server::tools::dump_log::dump_file;

const DIR: &str = "/data/t-0";
const SEGMENT: &str = "00000000000000000000";

/// Runs `data` through dump-log, verify, repair and verify again.
pub fn check_segment(data: &[u8]) {
    dump_all(data);
    let storage = SimStorage::new(0, FaultConfig::default());
    let dir = Path::new(DIR);
    block_on(storage.create_dir_all(dir)).expect("sim mkdir");
    for ext in ["log", "index", "timeindex"] {
        write(&storage, &dir.join(format!("{SEGMENT}.{ext}")), data);
    }
    let report = block_on(verify_partition(&storage, dir)).expect("the sim disk does not fail");
    let clock = Rc::new(ManualClock::new(TimestampMs(1_000)));
    let repaired = block_on(repair_partition(
        Rc::new(storage.clone()),
        PathBuf::from(DIR),
        &report,
        LogConfig::default(),
        clock,
    ));
    repaired.unwrap_or_else(|e| panic!("repair failed: {e}; report {report:?}"));
    let after = block_on(verify_partition(&storage, dir)).expect("the sim disk does not fail");
    assert!(after.findings.is_empty(), "not clean after repair: {after:?} (was {report:?})");
}

/// dump-log on the bytes as each kind of segment file (in TMPDIR, tmpfs under tests/fuzz.sh).
fn dump_all(data: &[u8]) {
    let dir = std::env::temp_dir().join(format!("rill-segment-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for ext in ["log", "index", "timeindex", "txnindex"] {
        let path = dir.join(format!("{SEGMENT}.{ext}"));
        std::fs::write(&path, data).expect("temp file");
        let _ = dump_file(&path, true, &mut std::io::sink());
    }
}

/// Writes `data` as the whole file at `path` (block-aligned write, then trimmed).
fn write(storage: &SimStorage, path: &Path, data: &[u8]) {
    let file = block_on(storage.open(path, OpenMode::CreateReadWrite)).expect("sim open");
    if !data.is_empty() {
        let mut padded = data.to_vec();
        padded.resize(align_up(data.len() as u64) as usize, 0);
        block_on(file.write_at(0, &padded)).expect("sim write");
    }
    block_on(file.truncate(data.len() as u64)).expect("sim truncate");
    block_on(file.sync()).expect("sim sync");
    block_on(file.close()).expect("sim close");
}
