//! Op-fuzzer: random sequences of append / flush / read / timestamp lookup / retention /
//! DeleteRecords / duplicate re-send / idle release (trim the preallocation, close the active
//! file, reopen it on the next use) / crash+reopen / close+reopen against a trivial in-memory
//! model, on the simulated disk with seeded faults (EIO, torn and reordered writes, bit flips,
//! length changes lost in a crash). Each case draws a preallocation budget (none, a little,
//! plenty), so appends run with and without room allocated ahead of them, and a shard read
//! cache (none, tiny, large; mostly with write-through) shared by every reopen of the log.
//!
//! About a third of the cases turn on latency: storage operations then take a seeded number of
//! polls, background writes stay in flight across operations, and some operations (recovery
//! included) are cut off by a crash between any two of their storage steps. A few cases append
//! large batches so the appender writes full blocks in the background, and crash while such a
//! write is in flight.
//!
//! Transactions: two transactional producers append transactional batches and get COMMIT or
//! ABORT markers at random; the model derives open and aborted transactions from what survives.
//!
//! Properties checked after every step: positions keep their order and follow the flush policy;
//! reads return whole batches equal to the model's; nothing durable is lost in a crash and what
//! survives is a prefix of what was appended; the log start survives restarts (an interrupted
//! retention/DeleteRecords may or may not have moved it); duplicates of a batch still in the log
//! are detected; the preallocation budget is never overdrawn and is all given back when the
//! log is released, closed or dropped; a released log holds no open file and its active `.log`
//! is exactly its batches; the last stable offset and the aborted transactions of random read
//! ranges match the model (bounded where a replay from the log start may legitimately know less:
//! a transaction that began below the log start is then seen from its first batch still there).
//!
//! `RILL_SIM_CASES=N` runs N cases (default 1500) from seed `RILL_SIM_BASE` (default 0x5eed0000);
//! `RILL_SIM_SEED=S` replays one case; `RILL_SIM_KEEP_GOING=1` runs all cases and lists the
//! failing seeds. A failing case prints its seed and its operations.

use crate::batch::{
    build_test_batch, set_base_offset, validate_prefix, validated, HEADER_BYTES, LOG_OVERHEAD_BYTES,
};
use crate::config::{FlushPolicy, LogConfig};
use crate::error::EngineError;
use crate::io::sim::{block_on, block_on_polls, FaultConfig, ManualClock, SimStats, SimStorage};
use crate::io::Clock;
use crate::log_manager::LogManager;
use crate::partition_log::PartitionLog;
use crate::read_cache::ReadCache;
use crate::segment::file_name::{segment_file_name, FileKind};
use crate::types::{Offset, TimestampMs};
use crate::types::{PartitionIndex, TopicPartitionRef};
use std::future::Future;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

const CASES_DEFAULT: u64 = 1500;
const OPS_PER_CASE: usize = 80;
const PRODUCER_ID: i64 = 7;
/// The transactional producers.
const TXN_PRODUCERS: [i64; 2] = [9, 10];

/// Recoveries that lost unflushed batches, and injected EIOs, over all cases (to prove the
/// faults were exercised, not just survived).
static TAILS_LOST: AtomicU64 = AtomicU64::new(0);
/// Aborted transactions a read range returned, and checks that saw the LSO below the high
/// watermark (to prove transactions were exercised).
static ABORTS_SEEN: AtomicU64 = AtomicU64::new(0);
static LSO_BELOW_HW: AtomicU64 = AtomicU64::new(0);
/// Operations (recovery included) cut off by a crash between two storage steps.
static INTERRUPTED: AtomicU64 = AtomicU64::new(0);
/// The simulator's counters summed over all cases.
static STATS: Mutex<SimStats> = Mutex::new(SimStats {
    io_errors_injected: 0,
    writes_in_flight_at_crash: 0,
    lengths_changed_by_crash: 0,
    blocks_torn_by_crash: 0,
    polls_delayed: 0,
    background_writes: 0,
    entries_lost_by_crash: 0,
});

/// Runs an engine future to completion, or for `budget` polls if given; `None` if cut off.
fn run<F: Future>(budget: Option<u64>, future: F) -> Option<F::Output> {
    match budget {
        None => Some(block_on(future)),
        Some(polls) => block_on_polls(future, polls),
    }
}

#[derive(Clone, Debug)]
struct ModelBatch {
    base: Offset,
    last: Offset,
    max_ts: TimestampMs,
    /// The bytes as stored (baseOffset assigned).
    bytes: Vec<u8>,
    /// For idempotent batches: the bytes as the producer sent them.
    sent: Option<Vec<u8>>,
    first_seq: i32,
    /// The producer, for idempotent and transactional batches and markers.
    pid: Option<i64>,
    /// A transactional data batch.
    transactional: bool,
    /// A marker: `Some(commit)`.
    marker: Option<bool>,
}

/// An aborted transaction as the model sees it.
#[derive(Clone, Copy, Debug)]
struct ModelAbort {
    pid: i64,
    first: Offset,
    marker: Offset,
    /// First data batch of the transaction that ends at or after the log start (what a replay
    /// from the log start would take as its first offset); `None` if all are below it.
    first_visible: Option<Offset>,
}

/// Open transactions (pid -> first offset, first visible offset) and aborted ones, derived
/// from the model's batches; `closed` lists (marker, first offset) of every closed one.
#[derive(Default)]
struct ModelTxns {
    open: Vec<(i64, Offset, Option<Offset>)>,
    aborts: Vec<ModelAbort>,
    closed: Vec<(Offset, Offset, Option<Offset>)>,
}

#[derive(Default)]
struct Model {
    batches: Vec<ModelBatch>,
    durable: Offset,
    log_start: Offset,
}

impl Model {
    fn end(&self) -> Offset {
        self.batches.last().map_or(Offset(0), |b| b.last.plus(1))
    }

    fn containing(&self, offset: Offset) -> usize {
        self.batches.partition_point(|b| b.last < offset)
    }

    fn next_seq(&self, pid: i64) -> i32 {
        let last = self
            .batches
            .iter()
            .rev()
            .find(|b| b.pid == Some(pid) && b.marker.is_none());
        last.map_or(0, |b| b.first_seq + (b.last.0 - b.base.0) as i32 + 1)
    }

    /// Transactions as the batches say, with `log_start` for what a replay would see.
    fn txns(&self, log_start: Offset) -> ModelTxns {
        let mut out = ModelTxns::default();
        // pid -> (first, first visible)
        let mut open: Vec<(i64, Offset, Option<Offset>)> = Vec::new();
        for b in &self.batches {
            let Some(pid) = b.pid else { continue };
            let at = open.iter().position(|(p, _, _)| *p == pid);
            match (b.marker, at) {
                (None, None) if b.transactional => {
                    let visible = (b.last >= log_start).then_some(b.base);
                    open.push((pid, b.base, visible));
                }
                (None, Some(i)) if open[i].2.is_none() && b.last >= log_start => {
                    open[i].2 = Some(b.base);
                }
                (Some(commit), Some(i)) => {
                    let (_, first, visible) = open.remove(i);
                    out.closed.push((b.base, first, visible));
                    if !commit {
                        out.aborts.push(ModelAbort {
                            pid,
                            first,
                            marker: b.base,
                            first_visible: visible,
                        });
                    }
                }
                _ => {}
            }
        }
        out.open = open;
        out
    }
}

struct Harness {
    rng: fastrand::Rng,
    storage: SimStorage,
    faults: FaultConfig,
    clock: Rc<ManualClock>,
    config: LogConfig,
    log: Option<PartitionLog<SimStorage>>,
    model: Model,
    trace: Vec<String>,
    /// Polls a storage operation may wait (0: latency off, no mid-operation crashes).
    latency_polls_max: u32,
    /// Appends large batches, so full blocks are written in the background.
    big_batches: bool,
    /// After an interrupted retention or DeleteRecords: the furthest the log start may have moved.
    start_may_reach: Option<Offset>,
    /// Opens the log; owns the preallocation budget the log draws on.
    manager: LogManager<SimStorage>,
}

/// [`build_test_batch`], fast for large payloads in unoptimised builds: the payload pattern is
/// copied from a buffer built once instead of being generated byte by byte.
fn build_batch(
    records: i32,
    payload_bytes: usize,
    max_ts: TimestampMs,
    producer: Option<(i64, i16, i32)>,
) -> Vec<u8> {
    const SMALL_BYTES: usize = 4096;
    if payload_bytes <= SMALL_BYTES {
        return build_test_batch(records, payload_bytes, max_ts, producer);
    }
    thread_local! {
        static PATTERN: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    }
    let mut batch = build_test_batch(records, 0, max_ts, producer);
    PATTERN.with(|p| batch.extend_from_slice(&p[..payload_bytes]));
    let batch_length = i32::try_from(batch.len() - LOG_OVERHEAD_BYTES).expect("< 2 GiB");
    let header = crate::batch::BatchHeader::view_mut(&mut batch).expect("a header");
    header.batch_length.set(batch_length);
    rill_types::batch::write_crc(&mut batch);
    debug_assert_eq!(batch.len(), HEADER_BYTES + payload_bytes);
    batch
}

/// `sent` with its baseOffset set to `base` (what the log stores).
fn with_base(sent: &[u8], base: Offset) -> Vec<u8> {
    let mut bytes = sent.to_vec();
    set_base_offset(&mut bytes, base);
    bytes
}

fn random_config(rng: &mut fastrand::Rng, big_batches: bool) -> LogConfig {
    let flush = if rng.bool() {
        FlushPolicy::EveryAppend
    } else {
        FlushPolicy::Interval {
            messages: Some(5),
            ms: None,
        }
    };
    LogConfig {
        segment_bytes_max: if big_batches {
            [1 << 21, 1 << 22][rng.usize(0..2)]
        } else {
            [4096, 8192, 16384, 65536][rng.usize(0..4)]
        },
        segment_ms_max: if rng.u8(0..4) == 0 {
            Some(rng.u64(500..5000))
        } else {
            None
        },
        index_interval_bytes: [1, 64, 512, 4096][rng.usize(0..4)],
        flush,
        retention_ms: if rng.bool() {
            Some(rng.u64(1000..20_000))
        } else {
            None
        },
        retention_bytes: if rng.bool() {
            Some(rng.u64(8192..65536))
        } else {
            None
        },
        batch_cache_bytes_max: [0, 2048, 1 << 20][rng.usize(0..3)],
        message_bytes_max: (1 << 20) + 12,
        ..LogConfig::default()
    }
}

fn is_fatal(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Io(_) | EngineError::Failed | EngineError::StorageFull
    )
}

impl Harness {
    fn new(seed: u64) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let big_batches = rng.u8(0..32) == 0;
        let config = random_config(&mut rng, big_batches);
        let io_error_per_million = [0, 2_000, 20_000][rng.usize(0..3)];
        let faults = FaultConfig {
            io_error_per_million,
            bit_flip_per_million: 500_000,
        };
        let latency_polls_max = if rng.u8(0..3) == 0 || (big_batches && rng.bool()) {
            [2, 8, 40][rng.usize(0..3)]
        } else {
            0
        };
        let storage = SimStorage::new(rng.u64(..), FaultConfig::default());
        storage.set_latency_polls_max(latency_polls_max);
        let prealloc_budget = [0, 64 << 10, 1 << 20, 1 << 30][rng.usize(0..4)];
        // The shard's read cache outlives every reopen of the log (crashes included): tiny
        // ones evict all the time; with write-through, appended batches leaving the tail
        // cache are served from it, so a stale one would show in a read.
        let cache_bytes = [0, 8 << 10, 64 << 10, 64 << 20][rng.usize(0..4)];
        let read_cache = ReadCache::with_write_through(cache_bytes, rng.u8(0..4) != 0);
        let manager = LogManager::new(storage.clone(), PathBuf::from("/data"))
            .with_prealloc_budget(prealloc_budget)
            .with_read_cache(Rc::new(read_cache));
        let clock = Rc::new(ManualClock::new(TimestampMs(1_000_000)));
        let mut h = Harness {
            rng,
            storage,
            faults,
            clock,
            config,
            log: None,
            model: Model::default(),
            trace: Vec::new(),
            latency_polls_max,
            big_batches,
            start_may_reach: None,
            manager,
        };
        h.reopen();
        h
    }

    /// With latency on, sometimes a poll budget after which the operation is cut off by a crash.
    fn crash_budget(&mut self) -> Option<u64> {
        let cut = self.latency_polls_max > 0 && self.rng.u8(0..100) < 6;
        cut.then(|| self.rng.u64(1..3 * u64::from(self.latency_polls_max) + 10))
    }

    /// A crash cut the last operation off after `polls` polls.
    fn interrupted(&mut self, polls: Option<u64>) {
        INTERRUPTED.fetch_add(1, Ordering::Relaxed);
        let polls = polls.unwrap_or(0);
        self.trace
            .push(format!("  cut off by a crash after {polls} polls"));
        self.crash_and_reopen();
    }

    fn log(&mut self) -> &mut PartitionLog<SimStorage> {
        self.log.as_mut().expect("log is open")
    }

    /// Opens the log with faults off (recovery itself is tested by the crash that preceded it),
    /// but with latency on maybe crashing in the middle of recovery first.
    fn reopen(&mut self) {
        self.storage.set_faults(FaultConfig::default());
        self.check_budget_returned();
        let clock: Rc<dyn Clock> = self.clock.clone();
        let budget = self.crash_budget().map(|b| b * 4);
        let manager = &self.manager;
        let opened = run(
            budget,
            manager.open_partition(
                TopicPartitionRef::new("fuzz", PartitionIndex(0)),
                self.config.clone(),
                clock.clone(),
            ),
        );
        let log = match opened {
            Some(log) => log,
            None => {
                INTERRUPTED.fetch_add(1, Ordering::Relaxed);
                self.trace.push(format!(
                    "  recovery cut off by a crash after {budget:?} polls"
                ));
                self.storage.crash();
                block_on(manager.open_partition(
                    TopicPartitionRef::new("fuzz", PartitionIndex(0)),
                    self.config.clone(),
                    clock,
                ))
            }
        }
        .expect("reopen after crash");
        self.log = Some(log);
        self.storage.set_faults(self.faults);
        self.check_recovered();
    }

    fn crash_and_reopen(&mut self) {
        self.trace.push("crash".into());
        self.log = None;
        self.storage.crash();
        self.reopen();
    }

    /// After a reopen: nothing durable lost, a prefix of the model survives, bytes are equal.
    fn check_recovered(&mut self) {
        let end = self.log().log_end_offset();
        assert!(
            end >= self.model.durable,
            "durable data lost: end {end} < durable {}",
            self.model.durable
        );
        assert!(
            end <= self.model.end(),
            "recovered more than was appended: {end} > {}",
            self.model.end()
        );
        if end < self.model.end() {
            TAILS_LOST.fetch_add(1, Ordering::Relaxed);
        }
        let keep = self.model.containing(end);
        self.model.batches.truncate(keep);
        assert_eq!(
            self.model.end().max(self.model.log_start),
            end.max(self.model.log_start),
            "end is not a batch boundary"
        );
        self.model.durable = end;
        // DeleteRecords past what survived: the start follows the end.
        let lowest = self.model.log_start.min(end);
        let highest = self
            .start_may_reach
            .take()
            .map_or(lowest, |reach| reach.min(end).max(lowest));
        let start = self.log().log_start_offset();
        assert!(
            lowest <= start && start <= highest,
            "log start {start} after restart, expected in [{lowest}, {highest}]"
        );
        self.model.log_start = start;
        self.check_all_content();
    }

    fn check_positions(&mut self) {
        let (model_end, policy) = (self.model.end(), self.config.flush);
        let log = self.log();
        let (start, hw, durable, end) = (
            log.log_start_offset(),
            log.high_watermark(),
            log.durable_offset(),
            log.log_end_offset(),
        );
        assert!(start <= hw && hw <= end && durable <= end);
        assert_eq!(end, model_end.max(start));
        match policy {
            FlushPolicy::EveryAppend => assert_eq!(hw, durable),
            FlushPolicy::Interval { .. } => assert_eq!(hw, end),
        }
        self.check_lso();
    }

    /// The LSO is the model's, bounded by what a replay from the log start can know.
    fn check_lso(&mut self) {
        let log = self.log.as_ref().expect("open");
        let (start, hw, lso) = (
            log.log_start_offset(),
            log.high_watermark(),
            log.last_stable_offset(),
        );
        let txns = self.model.txns(start);
        let firsts = txns
            .open
            .iter()
            .map(|(_, first, visible)| (*first, *visible))
            .chain(
                txns.closed
                    .iter()
                    .filter(|(marker, _, _)| *marker >= hw)
                    .map(|(_, first, visible)| (*first, *visible)),
            );
        let (mut low, mut high) = (hw, hw);
        for (first, visible) in firsts {
            low = low.min(first);
            high = high.min(visible.unwrap_or(hw));
        }
        let (low, high) = (low.max(start), high.max(start));
        if lso < hw {
            LSO_BELOW_HW.fetch_add(1, Ordering::Relaxed);
        }
        assert!(
            low <= lso && lso <= high,
            "LSO {lso} outside the model's [{low}, {high}] (hw {hw}, start {start})"
        );
    }

    fn check_all_content(&mut self) {
        let mut next = self.model.log_start;
        while next < self.log().high_watermark() {
            let read = match block_on(self.log().read(next, 3000)) {
                Ok(r) => r,
                Err(e) if is_fatal(&e) => return,
                Err(e) => panic!("read at {next}: {e}"),
            };
            next = self.check_read(next, 3000, &read.chunks);
        }
    }

    /// Checks a read result against the model; returns the offset after the last batch.
    fn check_read(&mut self, from: Offset, max_bytes: usize, chunks: &[bytes::Bytes]) -> Offset {
        let hw = self.log().high_watermark();
        if from >= hw {
            assert!(
                chunks.is_empty(),
                "read at/after the high watermark returned data"
            );
            return from;
        }
        assert!(
            !chunks.is_empty(),
            "read at {from} below hw {hw} returned nothing"
        );
        // A chunk may hold several whole batches back to back (a run of a cached extent).
        let got: Vec<u8> = chunks.concat();
        let first = self.model.containing(from);
        let (mut pos, mut n) = (0usize, 0usize);
        while pos < got.len() {
            let want = &self.model.batches[first + n];
            assert!(want.base < hw, "batch above the high watermark returned");
            let end = (pos + want.bytes.len()).min(got.len());
            assert_eq!(
                &got[pos..end],
                &want.bytes[..],
                "batch {} differs from the model",
                want.base
            );
            (pos, n) = (end, n + 1);
        }
        assert!(
            n == 1 || got.len() <= max_bytes,
            "read exceeded max_bytes with several batches"
        );
        self.model.batches[first + n - 1].last.plus(1)
    }

    fn step(&mut self) {
        let roll = self.rng.u8(0..100);
        match roll {
            0..=32 => self.op_append(),
            33..=39 => self.op_txn_append(),
            40..=43 => self.op_end_txn(),
            44 => self.op_aborted(),
            // Big batches: fewer flushes, so a MiB builds up and goes out in the background.
            45..=52 if self.big_batches => self.op_append(),
            45..=59 => self.op_flush(),
            60..=64 => self.op_aborted(),
            65..=74 => self.op_read(),
            75..=78 => self.op_timestamp(),
            79..=82 => self.op_retention(),
            83..=85 => self.op_delete_records(),
            86..=88 => self.op_duplicate(),
            89..=93 => self.crash_and_reopen(),
            94..=95 => self.op_close_reopen(),
            96 => self.op_release_idle(),
            _ => self.clock.advance(self.rng.i64(0..3000)),
        }
        if self.log.is_some() {
            self.check_positions();
            let budget = self.manager.prealloc_budget();
            assert!(
                budget.held_bytes() <= budget.limit_bytes(),
                "budget overdrawn"
            );
        }
    }

    /// With no log open, every byte of the preallocation budget is back.
    fn check_budget_returned(&self) {
        assert!(self.log.is_none());
        let held = self.manager.prealloc_budget().held_bytes();
        assert_eq!(
            held, 0,
            "a dropped or closed log kept {held} bytes of the budget"
        );
    }

    fn op_release_idle(&mut self) {
        self.trace.push("release_idle_memory".into());
        let budget = self.crash_budget();
        match run(budget, self.log().release_idle_memory()) {
            Some(Ok(())) => {
                let end = self.model.end().max(self.model.log_start);
                assert_eq!(self.log().durable_offset(), end, "release flushes");
                self.model.durable = end;
                let log = self.log.as_ref().expect("open");
                assert_eq!(log.open_files(), 0, "a released log holds no file");
                let held = self.manager.prealloc_budget().held_bytes();
                assert_eq!(held, 0, "a released log holds no preallocation");
                let active = log.active();
                let name = segment_file_name(active.base, FileKind::Log);
                let path = log.dir().join(name);
                let file_bytes = self.storage.file_bytes(&path).expect("active .log").len();
                assert_eq!(
                    file_bytes as u64, active.size_bytes,
                    "trimmed to its batches"
                );
            }
            Some(Err(e)) if is_fatal(&e) => self.crash_and_reopen(),
            Some(Err(e)) => panic!("release_idle_memory failed: {e}"),
            None => self.interrupted(budget),
        }
    }

    fn op_append(&mut self) {
        let records = self.rng.i32(1..=4);
        let payload = if self.big_batches && self.rng.bool() {
            self.rng.usize(100_000..400_000)
        } else {
            self.rng.usize(0..900)
        };
        let ts = self.clock.now().0 + self.rng.i64(-50..50);
        let producer = self.rng.u8(0..3) == 0;
        let seq = self.model.next_seq(PRODUCER_ID);
        let sent = build_batch(
            records,
            payload,
            TimestampMs(ts),
            producer.then_some((PRODUCER_ID, 0, seq)),
        );
        let base = self.model.end().max(self.model.log_start);
        self.trace.push(format!(
            "append records={records} payload={payload} ts={ts} producer={producer} base={base}"
        ));
        let now = self.clock.now();
        let budget = self.crash_budget();
        let result = run(budget, self.log().append(validated(&sent), now));
        let mut bytes = sent.clone();
        set_base_offset(&mut bytes, base);
        let batch = ModelBatch {
            base,
            last: base.plus(i64::from(records - 1)),
            max_ts: TimestampMs(ts),
            bytes,
            sent: producer.then_some(sent),
            first_seq: seq,
            pid: producer.then_some(PRODUCER_ID),
            transactional: false,
            marker: None,
        };
        match result {
            Some(Ok(info)) => {
                assert_eq!(
                    (info.base_offset, info.last_offset),
                    (batch.base, batch.last)
                );
                self.model.batches.push(batch);
                if self.storage.writes_in_flight() > 0 && self.rng.u8(0..4) == 0 {
                    self.trace
                        .push("crash with a background write in flight".into());
                    self.crash_and_reopen();
                }
            }
            Some(Err(e)) if is_fatal(&e) => {
                self.model.batches.push(batch); // may or may not have reached the disk
                self.crash_and_reopen();
            }
            Some(Err(e)) => panic!("append failed: {e}"),
            None => {
                self.model.batches.push(batch); // may or may not have reached the disk
                self.interrupted(budget);
            }
        }
    }

    fn op_txn_append(&mut self) {
        let pid = TXN_PRODUCERS[self.rng.usize(0..2)];
        let records = self.rng.i32(1..=3);
        let payload = self.rng.usize(0..300);
        let ts = self.clock.now().0;
        let seq = self.model.next_seq(pid);
        let mut sent = build_batch(records, payload, TimestampMs(ts), Some((pid, 0, seq)));
        crate::control::mark_transactional(&mut sent);
        let base = self.model.end().max(self.model.log_start);
        self.trace.push(format!(
            "txn append pid={pid} records={records} base={base}"
        ));
        let batch = ModelBatch {
            base,
            last: base.plus(i64::from(records - 1)),
            max_ts: TimestampMs(ts),
            bytes: with_base(&sent, base),
            sent: None,
            first_seq: seq,
            pid: Some(pid),
            transactional: true,
            marker: None,
        };
        let now = self.clock.now();
        let budget = self.crash_budget();
        let result = run(budget, self.log().append(validated(&sent), now));
        self.settle_append(result, batch, budget);
    }

    fn op_end_txn(&mut self) {
        let pid = TXN_PRODUCERS[self.rng.usize(0..2)];
        let commit = self.rng.bool();
        let marker = crate::control::TxnMarker {
            producer_id: rill_types::ProducerId(pid),
            producer_epoch: rill_types::ProducerEpoch(0),
            commit,
            coordinator_epoch: 0,
        };
        let now = self.clock.now();
        let sent = crate::control::encode_marker_batch(&marker, now);
        let base = self.model.end().max(self.model.log_start);
        self.trace
            .push(format!("end txn pid={pid} commit={commit} base={base}"));
        let batch = ModelBatch {
            base,
            last: base,
            max_ts: now,
            bytes: with_base(&sent, base),
            sent: None,
            first_seq: -1,
            pid: Some(pid),
            transactional: true,
            marker: Some(commit),
        };
        let budget = self.crash_budget();
        let result = run(budget, self.log().append_marker(&marker, now));
        self.settle_append(result, batch, budget);
    }

    /// Applies an append's outcome to the model (shared by the transactional operations).
    fn settle_append(
        &mut self,
        result: Option<Result<crate::partition_log::AppendInfo, EngineError>>,
        batch: ModelBatch,
        budget: Option<u64>,
    ) {
        match result {
            Some(Ok(info)) => {
                assert_eq!(
                    (info.base_offset, info.last_offset),
                    (batch.base, batch.last)
                );
                self.model.batches.push(batch);
            }
            Some(Err(e)) if is_fatal(&e) => {
                self.model.batches.push(batch); // may or may not have reached the disk
                self.crash_and_reopen();
            }
            Some(Err(e)) => panic!("transactional append failed: {e}"),
            None => {
                self.model.batches.push(batch);
                self.interrupted(budget);
            }
        }
    }

    /// Aborted transactions of a random read range against the model.
    fn op_aborted(&mut self) {
        let (start, end) = (self.log().log_start_offset(), self.log().log_end_offset());
        let from = Offset(self.rng.i64(start.0..=end.0));
        let upper = Offset(self.rng.i64(from.0..=end.0 + 2));
        self.trace
            .push(format!("aborted_transactions [{from}, {upper})"));
        let budget = self.crash_budget();
        let got = match run(budget, self.log().aborted_transactions(from, upper)) {
            Some(Ok(got)) => got,
            Some(Err(e)) if is_fatal(&e) => return,
            Some(Err(e)) => panic!("aborted_transactions failed: {e}"),
            None => return self.interrupted(budget),
        };
        let aborts = self.model.txns(start).aborts;
        ABORTS_SEEN.fetch_add(got.len() as u64, Ordering::Relaxed);
        for a in &got {
            let m = aborts
                .iter()
                .find(|m| m.pid == a.producer_id.0 && m.marker == a.last_offset)
                .unwrap_or_else(|| panic!("{a:?} is not an abort of the model"));
            assert!(
                a.last_offset >= from && a.first_offset < upper,
                "{a:?} out of range"
            );
            if let Some(visible) = m.first_visible {
                assert!(
                    m.first <= a.first_offset && a.first_offset <= visible,
                    "{a:?}: first offset not in [{}, {visible}]",
                    m.first
                );
            }
        }
        for m in &aborts {
            let needed =
                from < upper && m.marker >= from && m.first_visible.is_some_and(|v| v < upper);
            let found = got
                .iter()
                .any(|a| a.producer_id.0 == m.pid && a.last_offset == m.marker);
            assert!(
                !needed || found,
                "abort {m:?} missing for [{from}, {upper})"
            );
        }
    }

    fn op_flush(&mut self) {
        self.trace.push("flush".into());
        let budget = self.crash_budget();
        match run(budget, self.log().flush()) {
            Some(Ok(durable)) => {
                assert_eq!(durable, self.model.end().max(self.model.log_start));
                self.model.durable = durable;
            }
            Some(Err(e)) if is_fatal(&e) => self.crash_and_reopen(),
            Some(Err(e)) => panic!("flush failed: {e}"),
            None => self.interrupted(budget),
        }
    }

    fn op_read(&mut self) {
        let (start, end) = (self.log().log_start_offset(), self.log().log_end_offset());
        let from = Offset(self.rng.i64(start.0.saturating_sub(2)..=end.0 + 2));
        let max_bytes = self.rng.usize(1..6000);
        self.trace.push(format!("read from={from} max={max_bytes}"));
        let budget = self.crash_budget();
        match run(budget, self.log().read(from, max_bytes)) {
            Some(Ok(r)) => {
                assert!(from >= start && from <= end, "out of range read accepted");
                self.check_read(from, max_bytes, &r.chunks);
            }
            Some(Err(EngineError::OffsetOutOfRange { .. })) => {
                assert!(from < start || from > end)
            }
            Some(Err(e)) if is_fatal(&e) => {} // a storage error, never wrong data
            Some(Err(e)) => panic!("read failed: {e}"),
            None => self.interrupted(budget),
        }
    }

    fn op_timestamp(&mut self) {
        let ts = TimestampMs(self.clock.now().0 + self.rng.i64(-5000..100));
        self.trace.push(format!("offset_for_timestamp {}", ts.0));
        let (hw, start) = (self.log().high_watermark(), self.model.log_start);
        let visible = self
            .model
            .batches
            .iter()
            .filter(|b| b.base < hw && b.last >= start);
        let want = visible
            .into_iter()
            .find(|b| b.max_ts >= ts)
            .map(|b| (b.base.max(start), b.max_ts));
        let budget = self.crash_budget();
        match run(budget, self.log().offset_for_timestamp(ts)) {
            Some(Ok(got)) => assert_eq!(got, want, "offset_for_timestamp({})", ts.0),
            Some(Err(e)) if is_fatal(&e) => {} // a storage error, never wrong data
            Some(Err(e)) => panic!("offset_for_timestamp failed: {e}"),
            None => self.interrupted(budget),
        }
    }

    fn op_retention(&mut self) {
        self.trace.push("retention".into());
        let now = self.clock.now();
        let budget = self.crash_budget();
        let result = run(budget, self.log().apply_retention(now));
        // Cut off, it may have deleted any of the sealed segments.
        self.start_may_reach = Some(self.model.end());
        match result {
            Some(Ok(())) => {
                self.start_may_reach = None;
                self.note_new_log_start();
            }
            Some(Err(e)) if is_fatal(&e) => self.crash_and_reopen(),
            Some(Err(e)) => panic!("retention failed: {e}"),
            None => self.interrupted(budget),
        }
    }

    fn note_new_log_start(&mut self) {
        let start = self.log().log_start_offset();
        assert!(start >= self.model.log_start, "log start moved back");
        assert!(start <= self.log().high_watermark());
        self.model.log_start = start;
    }

    fn op_delete_records(&mut self) {
        let (start, hw) = (self.log().log_start_offset(), self.log().high_watermark());
        let target = Offset(self.rng.i64(start.0..=hw.0));
        self.trace.push(format!("delete_records_before {target}"));
        let budget = self.crash_budget();
        let result = run(budget, self.log().delete_records_before(target));
        self.start_may_reach = Some(target.max(start)); // if it did not complete
        match result {
            Some(Ok(new_start)) => {
                self.start_may_reach = None;
                assert_eq!(new_start, target.max(start));
                self.note_new_log_start();
            }
            Some(Err(e)) if is_fatal(&e) => self.crash_and_reopen(),
            Some(Err(e)) => panic!("delete_records_before failed: {e}"),
            None => self.interrupted(budget),
        }
    }

    fn op_duplicate(&mut self) {
        let Some(last) = self
            .model
            .batches
            .iter()
            .rev()
            .find(|b| b.pid == Some(PRODUCER_ID))
            .cloned()
        else {
            return;
        };
        if last.last < self.model.log_start {
            return;
        }
        self.trace.push(format!("duplicate of {}", last.base));
        let sent = validated(&last.sent.expect("idempotent"));
        let now = self.clock.now();
        let budget = self.crash_budget();
        match run(budget, self.log().append(sent, now)) {
            Some(Err(EngineError::DuplicateSequence {
                base_offset,
                last_offset,
            })) => assert_eq!((base_offset, last_offset), (last.base, last.last)),
            Some(Err(e)) if is_fatal(&e) => self.crash_and_reopen(),
            None => self.interrupted(budget),
            other => panic!("duplicate not detected: {other:?}"),
        }
    }

    fn op_close_reopen(&mut self) {
        self.trace.push("close+reopen".into());
        let log = self.log.take().expect("open");
        let budget = self.crash_budget();
        match run(budget, log.close()) {
            Some(Ok(())) => {
                self.model.durable = self.model.end();
                self.reopen();
                assert_eq!(
                    self.log().log_end_offset(),
                    self.model.end().max(self.model.log_start)
                );
            }
            Some(Err(e)) if is_fatal(&e) => {
                self.storage.crash();
                self.reopen();
            }
            Some(Err(e)) => panic!("close failed: {e}"),
            None => self.interrupted(budget),
        }
    }
}

fn add_stats(s: SimStats) {
    let mut total = STATS.lock().unwrap_or_else(|e| e.into_inner());
    total.io_errors_injected += s.io_errors_injected;
    total.writes_in_flight_at_crash += s.writes_in_flight_at_crash;
    total.lengths_changed_by_crash += s.lengths_changed_by_crash;
    total.blocks_torn_by_crash += s.blocks_torn_by_crash;
    total.polls_delayed += s.polls_delayed;
    total.background_writes += s.background_writes;
    total.entries_lost_by_crash += s.entries_lost_by_crash;
}

fn run_case(seed: u64) {
    let mut h = Harness::new(seed);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..OPS_PER_CASE {
            h.step();
        }
    }));
    add_stats(h.storage.stats());
    if let Err(panic) = result {
        eprintln!(
            "op-fuzz FAILED: seed={seed} (rerun: RILL_SIM_SEED={seed}); latency_polls_max {}, \
             big batches {}, faults {:?}; config {:?}; operations:",
            h.latency_polls_max, h.big_batches, h.faults, h.config
        );
        for (i, op) in h.trace.iter().enumerate() {
            eprintln!("  {i:3} {op}");
        }
        std::panic::resume_unwind(panic);
    }
}

#[test]
fn op_fuzz_against_model() {
    if let Some(seed) = std::env::var("RILL_SIM_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        run_case(seed);
        return;
    }
    let cases = std::env::var("RILL_SIM_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(CASES_DEFAULT);
    let base_seed = std::env::var("RILL_SIM_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_0000_u64);
    // RILL_SIM_KEEP_GOING=1: run every case, list the failing seeds at the end.
    let keep_going = std::env::var("RILL_SIM_KEEP_GOING").is_ok();
    let mut failed = Vec::new();
    for case in 0..cases {
        let seed = base_seed + case;
        if !keep_going {
            run_case(seed);
        } else if std::panic::catch_unwind(|| run_case(seed)).is_err() {
            failed.push(seed);
        }
    }
    let (lost, interrupted) = (
        TAILS_LOST.load(Ordering::Relaxed),
        INTERRUPTED.load(Ordering::Relaxed),
    );
    let stats = *STATS.lock().unwrap_or_else(|e| e.into_inner());
    let (aborts, lso_below) = (
        ABORTS_SEEN.load(Ordering::Relaxed),
        LSO_BELOW_HW.load(Ordering::Relaxed),
    );
    eprintln!(
        "op-fuzz: {cases} cases from seed {base_seed}, {lost} recoveries lost an unflushed tail, \
         {interrupted} operations cut off by a crash, {aborts} aborted transactions checked, \
         {lso_below} checks with the LSO below the high watermark; {stats:?}"
    );
    assert!(failed.is_empty(), "failing seeds: {failed:?}");
    if cases >= 1000 {
        assert!(
            lost > 0
                && interrupted > 0
                && aborts > 0
                && lso_below > 0
                && stats.io_errors_injected > 0
                && stats.lengths_changed_by_crash > 0
                && stats.blocks_torn_by_crash > 0
                && stats.writes_in_flight_at_crash > 0
                && stats.entries_lost_by_crash > 0,
            "faults were not exercised"
        );
    }
}

#[test]
fn op_fuzz_decodes_every_read_batch() {
    // A short run with a cache-less config: every read goes to the (simulated) disk path.
    let mut h = Harness::new(42);
    h.config.batch_cache_bytes_max = 0;
    h.crash_and_reopen();
    for _ in 0..200 {
        h.op_append();
    }
    h.op_flush();
    let read = block_on(h.log().read(Offset(0), 1 << 20)).unwrap();
    assert!(read.chunks.iter().all(|c| validate_prefix(c).is_ok()));
}

#[test]
fn fast_batch_builder_matches_the_reference() {
    let producer = Some((PRODUCER_ID, 0, 3));
    for payload in [0, 4096, 4097, 70_000] {
        assert_eq!(
            build_batch(3, payload, TimestampMs(5), producer),
            build_test_batch(3, payload, TimestampMs(5), producer)
        );
    }
}

/// Regression for an engine bug the op-fuzzer found (seed 1004885 with RILL_SIM_BASE=1000000):
/// `.index` and `.timeindex` are replaced one after the other, and a crash or error between the
/// two used to leave a new `.index` beside an old `.timeindex`: recovery resumed at the new
/// index's last entry with the old time index's running max, missing the batches in between.
/// `write_indexes` now writes the `.timeindex` first, so what a failure between the two can
/// leave is a new time index beside an old offset index, which recovery must get right.
#[test]
fn newer_time_index_beside_stale_offset_index() {
    let storage = SimStorage::new(1, FaultConfig::default());
    let clock: Rc<dyn Clock> = Rc::new(ManualClock::new(TimestampMs(1_000)));
    let config = LogConfig {
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let manager = LogManager::new(storage.clone(), PathBuf::from("/data"));
    let open = || {
        block_on(manager.open_partition(
            TopicPartitionRef::new("t", PartitionIndex(0)),
            config.clone(),
            clock.clone(),
        ))
        .unwrap()
    };
    let append = |log: &mut PartitionLog<SimStorage>, ts: i64| {
        let batch = build_test_batch(1, 10, TimestampMs(ts), None);
        block_on(log.append(validated(&batch), TimestampMs(ts))).unwrap();
    };
    let mut log = open();
    append(&mut log, 100);
    block_on(log.close()).unwrap(); // .index [0], .timeindex [(100, 0)]
    let mut log = open();
    for ts in [500, 200, 300] {
        append(&mut log, ts);
    }
    block_on(log.flush()).unwrap();
    // What write_indexes leaves when it fails between its two writes.
    let time_index = log.segments[0].time_index.encode();
    let dir = PathBuf::from("/data/t-0");
    block_on(crate::small_file::write_atomic(
        &storage,
        &dir,
        "00000000000000000000.timeindex",
        &time_index,
    ))
    .unwrap();
    drop(log);
    storage.crash();
    let mut log = open();
    let found = block_on(log.offset_for_timestamp(TimestampMs(400))).unwrap();
    assert_eq!(found, Some((Offset(1), TimestampMs(500))));
}

/// Regression for an engine bug the op-fuzzer found (seed 1011502 with RILL_SIM_BASE=1000000):
/// when a background write of full blocks fails (ENOSPC, EIO), the failure surfaces only at the
/// next write or sync (the BlockFile contract), but reads of the active segment go to the file
/// at once and find bytes that never arrived: the engine reports `CorruptBatch` for a healthy
/// log instead of a storage error.
#[test]
fn read_after_failed_background_write_is_a_storage_error() {
    let storage = SimStorage::new(1, FaultConfig::default());
    let clock: Rc<dyn Clock> = Rc::new(ManualClock::new(TimestampMs(1_000)));
    let config = LogConfig {
        batch_cache_bytes_max: 0,
        flush: FlushPolicy::Interval {
            messages: None,
            ms: None,
        },
        ..LogConfig::default()
    };
    let manager = LogManager::new(storage.clone(), PathBuf::from("/data"));
    let mut log = block_on(manager.open_partition(
        TopicPartitionRef::new("t", PartitionIndex(0)),
        config,
        clock,
    ))
    .unwrap();
    let first = build_batch(1, 600_000, TimestampMs(1), None);
    block_on(log.append(validated(&first), TimestampMs(1))).unwrap();
    storage.fail_next_write(28); // ENOSPC, on the write of the first MiB
    let second = build_batch(1, 600_000, TimestampMs(2), None);
    block_on(log.append(validated(&second), TimestampMs(2))).unwrap();
    match block_on(log.read(Offset(0), 1 << 20)) {
        Ok(read) => assert_eq!(&read.chunks[0][..], &first[..]),
        Err(e) => assert!(is_fatal(&e), "a storage error, not: {e}"),
    }
}
