//! Property test of compaction on the simulated disk: random appends of keyed Kafka batches
//! (every codec, tombstones, null keys, idempotent producers), rolls, cleans run whole or step
//! by step with appends and DeleteRecords in between, clock jumps, crashes (also in the middle
//! of a clean's or a recovery's storage steps, with latency on) and clean reopens, against a
//! model that holds every record ever appended.
//!
//! Properties checked after every step, for the records at or above the log start:
//! - every visible record is the model's record at that offset, unchanged (offsets kept);
//! - the log end never moves back;
//! - a record missing from the log was allowed to go: a later record of its key exists, or it
//!   has no key, or it is a tombstone at least `delete.retention.ms` old;
//! - no key comes back: when a key's latest record is gone (an expired tombstone), none of its
//!   older records is visible;
//! - the latest record of every key is visible unless it is such a tombstone;
//! - now and then, `rill check` (`verify_partition`) finds no damage in the directory.
//!
//! `RILL_SIM_CASES=N` runs N cases (default 200) from `RILL_SIM_BASE`; `RILL_SIM_SEED=S`
//! replays one. A failing case prints its seed and operations.

use super::tests::{keyed_batch, visible, KafkaCodec, Visible, CODECS};
use super::*;
use crate::config::LogConfig;
use crate::io::sim::{block_on, block_on_polls, FaultConfig, ManualClock, SimStorage};
use crate::io::Clock;
use crate::log_manager::LogManager;
use crate::types::{PartitionIndex, TopicPartitionRef};
use rill_types::DurationMs;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

const CASES_DEFAULT: u64 = 200;
const OPS_PER_CASE: usize = 120;
const DELETE_RETENTION_MS: u64 = 3_000;

/// Counts over all cases, to prove the interesting paths ran and were not just survived.
static CLEANS_CUT_OFF: AtomicU64 = AtomicU64::new(0);
static GROUPS_INSTALLED: AtomicU64 = AtomicU64::new(0);
static TOMBSTONES_EXPIRED: AtomicU64 = AtomicU64::new(0);
static RECORDS_REMOVED: AtomicU64 = AtomicU64::new(0);

/// Runs a future to completion, or for `budget` polls; `None` if cut off.
fn run<F: Future>(budget: Option<u64>, future: F) -> Option<F::Output> {
    match budget {
        None => Some(block_on(future)),
        Some(polls) => block_on_polls(future, polls),
    }
}

#[derive(Clone, Debug)]
struct ModelRecord {
    offset: i64,
    key: Option<String>,
    value: Option<String>,
    appended_ms: TimestampMs,
}

struct Case {
    rng: fastrand::Rng,
    storage: SimStorage,
    clock: Rc<ManualClock>,
    config: LogConfig,
    compaction: CompactionConfig,
    log: Option<PartitionLog<SimStorage>>,
    model: Vec<ModelRecord>,
    log_start: i64,
    keys: u32,
    next_seq: i32,
    latency_polls_max: u32,
    trace: Vec<String>,
}

impl Case {
    fn new(seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let latency_polls_max = if rng.bool() {
            [2, 8, 30][rng.usize(0..3)]
        } else {
            0
        };
        let storage = SimStorage::new(rng.u64(..), FaultConfig::default());
        storage.set_latency_polls_max(latency_polls_max);
        let config = LogConfig {
            segment_bytes_max: [4096, 8192, 16384][rng.usize(0..3)],
            index_interval_bytes: [1, 256, 4096][rng.usize(0..3)],
            batch_cache_bytes_max: [0, 4096, 1 << 20][rng.usize(0..3)],
            retention_ms: None,
            segment_ms_max: None,
            ..LogConfig::default()
        };
        let compaction = CompactionConfig {
            delete_retention_ms: DELETE_RETENTION_MS,
            min_cleanable_dirty_ratio: [0.0, 0.3, 0.5][rng.usize(0..3)],
            min_compaction_lag_ms: [0, 0, 2_000][rng.usize(0..3)],
            max_compaction_lag_ms: [None, Some(5_000)][rng.usize(0..2)],
        };
        let keys = [3, 10, 40][rng.usize(0..3)];
        let mut case = Case {
            rng,
            storage,
            clock: Rc::new(ManualClock::new(TimestampMs(1_000_000))),
            config,
            compaction,
            log: None,
            model: Vec::new(),
            log_start: 0,
            keys,
            next_seq: 0,
            latency_polls_max,
            trace: Vec::new(),
        };
        case.reopen();
        case
    }

    fn log(&mut self) -> &mut PartitionLog<SimStorage> {
        self.log.as_mut().expect("log open")
    }

    fn now(&self) -> TimestampMs {
        self.clock.now()
    }

    /// With latency on, sometimes a budget after which a crash cuts the operation off.
    fn crash_budget(&mut self) -> Option<u64> {
        let cut = self.latency_polls_max > 0 && self.rng.u8(0..100) < 30;
        cut.then(|| self.rng.u64(1..40 * u64::from(self.latency_polls_max) + 20))
    }

    fn reopen(&mut self) {
        let manager = LogManager::new(self.storage.clone(), PathBuf::from("/data"));
        let clock: Rc<dyn Clock> = self.clock.clone();
        loop {
            let budget = self.crash_budget();
            let opened = run(
                budget,
                manager.open_partition(
                    TopicPartitionRef::new("c", PartitionIndex(0)),
                    self.config.clone(),
                    clock.clone(),
                ),
            );
            match opened {
                Some(log) => {
                    self.log = Some(log.expect("reopen"));
                    break;
                }
                None => {
                    self.trace.push("  recovery cut off by a crash".into());
                    self.storage.crash();
                }
            }
        }
        let start = self.log().log_start_offset().0;
        assert!(
            start >= self.log_start,
            "log start went back: {start} < {}",
            self.log_start
        );
        self.log_start = start;
    }

    fn crash_and_reopen(&mut self) {
        self.trace.push("crash".into());
        self.log = None;
        self.storage.crash();
        self.reopen();
    }

    fn step(&mut self) {
        match self.rng.u8(0..100) {
            0..=54 => self.append(),
            55..=62 => {
                let ms = self.rng.i64(0..2_500);
                self.trace.push(format!("clock +{ms}"));
                self.clock.advance(ms);
            }
            63..=69 => self.roll(),
            70..=84 => self.clean_whole(),
            85..=91 => self.clean_with_appends_between(),
            92..=95 => self.crash_and_reopen(),
            96..=97 => {
                self.trace.push("close".into());
                let log = self.log.take().unwrap();
                block_on(log.close()).unwrap();
                self.reopen();
            }
            _ => self.delete_records(),
        }
        self.check();
    }

    fn append(&mut self) {
        let n = self.rng.usize(1..5);
        let records: Vec<(Option<String>, Option<String>)> = (0..n)
            .map(|_| {
                let key =
                    (self.rng.u8(0..100) >= 3).then(|| format!("k{}", self.rng.u32(0..self.keys)));
                let value = (self.rng.u8(0..100) >= 15).then(|| format!("v{}", self.rng.u32(..)));
                (key, value)
            })
            .collect();
        let borrowed: Vec<(Option<&str>, Option<&str>)> = records
            .iter()
            .map(|(k, v)| (k.as_deref(), v.as_deref()))
            .collect();
        // Mostly uncompressed: codec contexts are slow to set up in unoptimised test builds.
        let codec = if self.rng.u8(0..4) == 0 {
            CODECS[self.rng.usize(1..CODECS.len())]
        } else {
            CODECS[0]
        };
        let producer = self.rng.bool().then_some((9, 0, self.next_seq));
        let now = self.now();
        let batch = keyed_batch(&borrowed, now.0, codec, producer);
        let log = self.log.as_mut().unwrap();
        let info = block_on(log.append(batch, now)).unwrap();
        block_on(log.flush()).unwrap();
        if producer.is_some() {
            self.next_seq += n as i32;
        }
        self.trace.push(format!(
            "append {n} at {} {codec:?}: {records:?}",
            info.base_offset
        ));
        for (i, (key, value)) in records.into_iter().enumerate() {
            self.model.push(ModelRecord {
                offset: info.base_offset.0 + i as i64,
                key,
                value,
                appended_ms: now,
            });
        }
    }

    /// One whole clean, maybe cut off by a crash at any storage step.
    fn clean_whole(&mut self) {
        let budget = self.crash_budget();
        self.trace.push(format!("clean (budget {budget:?})"));
        let (cfg, now) = (self.compaction.clone(), self.now());
        let log = self.log.as_mut().unwrap();
        let done = run(
            budget,
            clean_now(log, &cfg, &KafkaCodec, &Unpaced, 1 << 20, now),
        );
        match done {
            Some(result) => {
                let groups = result.unwrap().map_or(0, |stats| stats.groups);
                GROUPS_INSTALLED.fetch_add(groups, Ordering::Relaxed);
            }
            None => self.cut_off(),
        }
    }

    /// A clean whose steps interleave with appends, rolls and DeleteRecords (the broker runs the
    /// job beside the log), with a crash possible at any step.
    fn clean_with_appends_between(&mut self) {
        self.trace.push("clean in steps".into());
        let (cfg, now) = (self.compaction.clone(), self.now());
        let map_bytes = [1 << 20, 2_000][self.rng.usize(0..2)];
        let Some(mut job) = block_on(self.log().plan_clean(&cfg, now)).unwrap() else {
            return;
        };
        let mut deleted = self.maybe_interleave();
        let budget = self.crash_budget();
        match run(
            budget,
            job.build_offset_map(&KafkaCodec, &Unpaced, map_bytes),
        ) {
            None => return self.cut_off(),
            Some(Err(e)) => return self.job_failed(deleted, e),
            Some(Ok(())) => {}
        }
        for g in 0..job.group_count() {
            deleted |= self.maybe_interleave();
            let budget = self.crash_budget();
            let group = match run(budget, job.clean_group(g, &KafkaCodec, &Unpaced)) {
                None => return self.cut_off(),
                Some(Err(e)) => return self.job_failed(deleted, e),
                Some(Ok(group)) => group,
            };
            let budget = self.crash_budget();
            let log = self.log.as_mut().unwrap();
            match run(budget, log.install_cleaned(&group)) {
                None => return self.cut_off(),
                Some(Ok(true)) => {
                    GROUPS_INSTALLED.fetch_add(1, Ordering::Relaxed);
                }
                Some(Ok(false)) => {
                    assert!(deleted, "a group can only go away with its segments");
                    self.trace.push("  group gone".into());
                    return;
                }
                Some(Err(e)) => panic!("install failed: {e}"),
            }
        }
        block_on(self.log().finish_clean(job.checkpoint())).unwrap();
    }

    /// A crash cut a clean off between two of its storage steps.
    fn cut_off(&mut self) {
        CLEANS_CUT_OFF.fetch_add(1, Ordering::Relaxed);
        self.crash_and_reopen();
    }

    /// A job step failed: only a segment deleted under it may make it fail.
    fn job_failed(&mut self, deleted: bool, e: EngineError) {
        assert!(
            deleted,
            "clean failed with no segment deleted under it: {e}"
        );
        self.trace.push(format!("  clean abandoned: {e}"));
    }

    /// Seals the active segment, if it holds anything.
    fn roll(&mut self) {
        if self.log().active().is_empty() {
            return;
        }
        self.trace.push("roll".into());
        block_on(self.log().roll()).unwrap();
    }

    /// Maybe an append, roll or DeleteRecords; true for a DeleteRecords.
    fn maybe_interleave(&mut self) -> bool {
        match self.rng.u8(0..10) {
            0..=3 => self.append(),
            4 => self.roll(),
            5 => {
                self.delete_records();
                return true;
            }
            _ => {}
        }
        false
    }

    fn delete_records(&mut self) {
        let hw = self.log().high_watermark().0;
        let target = self.rng.i64(self.log_start..=hw);
        self.trace.push(format!("delete records before {target}"));
        let start = block_on(self.log().delete_records_before(Offset(target))).unwrap();
        self.log_start = start.0;
    }

    fn check(&mut self) {
        let end = self.model.last().map_or(0, |r| r.offset + 1);
        assert_eq!(
            self.log().log_end_offset().0,
            end.max(self.log_start),
            "log end"
        );
        let now = self.now();
        let log_start = self.log_start;
        let seen: Visible = visible(self.log());
        let mut latest: HashMap<&Option<String>, i64> = HashMap::new();
        for r in &self.model {
            latest.insert(&r.key, r.offset);
        }
        let mut oldest_seen: HashMap<&Option<String>, i64> = HashMap::new();
        for v in &seen {
            oldest_seen.entry(&v.1).or_insert(v.0);
        }
        let mut by_offset = seen.iter().peekable();
        for r in self.model.iter().filter(|r| r.offset >= log_start) {
            if let Some(v) = by_offset.next_if(|v| v.0 == r.offset) {
                assert_eq!(
                    (&v.1, &v.2),
                    (&r.key, &r.value),
                    "record at {} changed",
                    r.offset
                );
                continue;
            }
            let superseded = latest[&r.key] > r.offset;
            let expired =
                r.value.is_none() && now >= r.appended_ms + DurationMs(DELETE_RETENTION_MS as i64);
            RECORDS_REMOVED.fetch_add(1, Ordering::Relaxed);
            if expired && !superseded {
                TOMBSTONES_EXPIRED.fetch_add(1, Ordering::Relaxed);
            }
            assert!(
                r.key.is_none() || superseded || expired,
                "record {} ({:?}) lost",
                r.offset,
                r.key
            );
            if !superseded && r.key.is_some() {
                let older = oldest_seen.get(&r.key).filter(|&&o| o < r.offset);
                assert!(older.is_none(), "key {:?} resurrected at {older:?}", r.key);
            }
        }
        assert!(
            by_offset.next().is_none(),
            "a visible record the model does not have"
        );
    }
}

fn run_case(seed: u64) {
    let mut case = Case::new(seed);
    for _ in 0..OPS_PER_CASE {
        let before = case.trace.len();
        let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| case.step()));
        if let Err(panic) = stepped {
            let tail: Vec<&String> = case.trace.iter().rev().take(40).collect();
            eprintln!("compaction fuzz seed {seed:#x} failed; last operations (newest first):");
            for line in tail {
                eprintln!("  {line}");
            }
            let _ = before;
            std::panic::resume_unwind(panic);
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

#[test]
fn compaction_keeps_latest_values_through_crashes() {
    if let Some(seed) = env_u64("RILL_SIM_SEED") {
        return run_case(seed);
    }
    let cases = env_u64("RILL_SIM_CASES").unwrap_or(CASES_DEFAULT);
    let base = env_u64("RILL_SIM_BASE").unwrap_or(0xc1ea_0000);
    for seed in base..base + cases {
        run_case(seed);
    }
    let counts = [
        ("cleans cut off by a crash", &CLEANS_CUT_OFF),
        ("groups swapped in", &GROUPS_INSTALLED),
        ("expired tombstones removed", &TOMBSTONES_EXPIRED),
        ("record checks of removed records", &RECORDS_REMOVED),
    ];
    for (what, count) in counts {
        let n = count.load(Ordering::Relaxed);
        eprintln!("compaction fuzz: {what}: {n}");
        assert!(cases < 50 || n > 0, "no {what} in {cases} cases");
    }
}
