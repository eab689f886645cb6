//! Op-fuzzer: random sequences of append / flush / read / timestamp lookup / retention /
//! DeleteRecords / duplicate re-send / crash+reopen / close+reopen against a trivial in-memory
//! model, on the simulated disk with seeded faults (EIO, torn writes, bit flips).
//!
//! Properties checked after every step: positions keep their order and follow the flush policy;
//! reads return whole batches equal to the model's; nothing durable is lost in a crash and what
//! survives is a prefix of what was appended; the log start survives restarts; duplicates of a
//! batch still in the log are detected.
//!
//! `RILL_SIM_CASES=N` runs N cases (default 1500); `RILL_SIM_SEED=S` replays one case.
//! A failing case prints its seed and its last operations.

use crate::batch::{build_test_batch, set_base_offset, validate_prefix};
use crate::config::{FlushPolicy, LogConfig};
use crate::error::EngineError;
use crate::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
use crate::io::Clock;
use crate::log_manager::LogManager;
use crate::partition_log::PartitionLog;
use crate::types::{Offset, TimestampMs};
use bytes::BytesMut;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

const CASES_DEFAULT: u64 = 1500;
const OPS_PER_CASE: usize = 80;
const PRODUCER_ID: i64 = 7;

/// Recoveries that lost unflushed batches, and injected EIOs, over all cases (to prove the
/// faults were exercised, not just survived).
static TAILS_LOST: AtomicU64 = AtomicU64::new(0);
static EIOS: AtomicU64 = AtomicU64::new(0);

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

    fn next_seq(&self) -> i32 {
        let last = self.batches.iter().rev().find(|b| b.sent.is_some());
        last.map_or(0, |b| b.first_seq + (b.last.0 - b.base.0) as i32 + 1)
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
}

fn random_config(rng: &mut fastrand::Rng) -> LogConfig {
    let flush = if rng.bool() {
        FlushPolicy::EveryAppend
    } else {
        FlushPolicy::Interval {
            messages: Some(5),
            ms: None,
        }
    };
    LogConfig {
        segment_bytes_max: [4096, 8192, 16384, 65536][rng.usize(0..4)],
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
        let config = random_config(&mut rng);
        let io_error_per_million = [0, 2_000, 20_000][rng.usize(0..3)];
        let faults = FaultConfig {
            io_error_per_million,
            bit_flip_per_million: 500_000,
        };
        let storage = SimStorage::new(rng.u64(..), FaultConfig::default());
        let clock = Rc::new(ManualClock::new(1_000_000));
        let mut h = Harness {
            rng,
            storage,
            faults,
            clock,
            config,
            log: None,
            model: Model::default(),
            trace: Vec::new(),
        };
        h.reopen();
        h
    }

    fn log(&mut self) -> &mut PartitionLog<SimStorage> {
        self.log.as_mut().expect("log is open")
    }

    /// Opens the log with faults off (recovery itself is tested by the crash that preceded it).
    fn reopen(&mut self) {
        self.storage.set_faults(FaultConfig::default());
        let manager = LogManager::new(self.storage.clone(), PathBuf::from("/data"));
        let clock: Rc<dyn Clock> = self.clock.clone();
        let log = block_on(manager.open_partition("fuzz", 0, self.config.clone(), clock))
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
        self.model.log_start = self.model.log_start.min(end); // DeleteRecords past what survived
        assert_eq!(
            self.log().log_start_offset(),
            self.model.log_start,
            "log start changed across restart"
        );
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
    }

    fn check_all_content(&mut self) {
        let mut next = self.model.log_start;
        while next < self.log().high_watermark() {
            let read = match block_on(self.log().read(next, 3000)) {
                Ok(r) => r,
                Err(EngineError::Io(_)) => return,
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
        let total: usize = chunks.iter().map(|c| c.len()).sum();
        assert!(
            chunks.len() == 1 || total <= max_bytes,
            "read exceeded max_bytes with several batches"
        );
        let first = self.model.containing(from);
        for (i, chunk) in chunks.iter().enumerate() {
            let want = &self.model.batches[first + i];
            assert!(want.base < hw, "batch above the high watermark returned");
            assert_eq!(
                &chunk[..],
                &want.bytes[..],
                "batch {} differs from the model",
                want.base
            );
        }
        self.model.batches[first + chunks.len() - 1].last.plus(1)
    }

    fn step(&mut self) {
        let roll = self.rng.u8(0..100);
        match roll {
            0..=44 => self.op_append(),
            45..=59 => self.op_flush(),
            60..=74 => self.op_read(),
            75..=78 => self.op_timestamp(),
            79..=82 => self.op_retention(),
            83..=85 => self.op_delete_records(),
            86..=88 => self.op_duplicate(),
            89..=93 => self.crash_and_reopen(),
            94..=96 => self.op_close_reopen(),
            _ => self.clock.advance(self.rng.i64(0..3000)),
        }
        if self.log.is_some() {
            self.check_positions();
        }
    }

    fn op_append(&mut self) {
        let records = self.rng.i32(1..=4);
        let payload = self.rng.usize(0..900);
        let ts = self.clock.now().0 + self.rng.i64(-50..50);
        let producer = self.rng.u8(0..3) == 0;
        let seq = self.model.next_seq();
        let sent = build_test_batch(
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
        let result = block_on(self.log().append(BytesMut::from(&sent[..]), now));
        let mut bytes = sent.clone();
        set_base_offset(&mut bytes, base);
        let batch = ModelBatch {
            base,
            last: base.plus(i64::from(records - 1)),
            max_ts: TimestampMs(ts),
            bytes,
            sent: producer.then_some(sent),
            first_seq: seq,
        };
        match result {
            Ok(info) => {
                assert_eq!(
                    (info.base_offset, info.last_offset),
                    (batch.base, batch.last)
                );
                self.model.batches.push(batch);
            }
            Err(e) if is_fatal(&e) => {
                self.model.batches.push(batch); // may or may not have reached the disk
                self.crash_and_reopen();
            }
            Err(e) => panic!("append failed: {e}"),
        }
    }

    fn op_flush(&mut self) {
        self.trace.push("flush".into());
        match block_on(self.log().flush()) {
            Ok(durable) => {
                assert_eq!(durable, self.model.end().max(self.model.log_start));
                self.model.durable = durable;
            }
            Err(e) if is_fatal(&e) => self.crash_and_reopen(),
            Err(e) => panic!("flush failed: {e}"),
        }
    }

    fn op_read(&mut self) {
        let (start, end) = (self.log().log_start_offset(), self.log().log_end_offset());
        let from = Offset(self.rng.i64(start.0.saturating_sub(2)..=end.0 + 2));
        let max_bytes = self.rng.usize(1..6000);
        self.trace.push(format!("read from={from} max={max_bytes}"));
        match block_on(self.log().read(from, max_bytes)) {
            Ok(r) => {
                assert!(from >= start && from <= end, "out of range read accepted");
                self.check_read(from, max_bytes, &r.chunks);
            }
            Err(EngineError::OffsetOutOfRange { .. }) => assert!(from < start || from > end),
            Err(EngineError::Io(_)) => {}
            Err(e) => panic!("read failed: {e}"),
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
        match block_on(self.log().offset_for_timestamp(ts)) {
            Ok(got) => assert_eq!(got, want, "offset_for_timestamp({})", ts.0),
            Err(EngineError::Io(_)) => {}
            Err(e) => panic!("offset_for_timestamp failed: {e}"),
        }
    }

    fn op_retention(&mut self) {
        self.trace.push("retention".into());
        let now = self.clock.now();
        match block_on(self.log().apply_retention(now)) {
            Ok(()) => self.note_new_log_start(),
            Err(e) if is_fatal(&e) => self.crash_and_reopen(),
            Err(e) => panic!("retention failed: {e}"),
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
        match block_on(self.log().delete_records_before(target)) {
            Ok(new_start) => {
                assert_eq!(new_start, target.max(start));
                self.note_new_log_start();
            }
            Err(e) if is_fatal(&e) => self.crash_and_reopen(),
            Err(e) => panic!("delete_records_before failed: {e}"),
        }
    }

    fn op_duplicate(&mut self) {
        let Some(last) = self
            .model
            .batches
            .iter()
            .rev()
            .find(|b| b.sent.is_some())
            .cloned()
        else {
            return;
        };
        if last.last < self.model.log_start {
            return;
        }
        self.trace.push(format!("duplicate of {}", last.base));
        let sent = BytesMut::from(&last.sent.expect("idempotent")[..]);
        let now = self.clock.now();
        match block_on(self.log().append(sent, now)) {
            Err(EngineError::DuplicateSequence {
                base_offset,
                last_offset,
            }) => assert_eq!((base_offset, last_offset), (last.base, last.last)),
            Err(e) if is_fatal(&e) => self.crash_and_reopen(),
            other => panic!("duplicate not detected: {other:?}"),
        }
    }

    fn op_close_reopen(&mut self) {
        self.trace.push("close+reopen".into());
        let log = self.log.take().expect("open");
        match block_on(log.close()) {
            Ok(()) => {
                self.model.durable = self.model.end();
                self.reopen();
                assert_eq!(
                    self.log().log_end_offset(),
                    self.model.end().max(self.model.log_start)
                );
            }
            Err(e) if is_fatal(&e) => {
                self.storage.crash();
                self.reopen();
            }
            Err(e) => panic!("close failed: {e}"),
        }
    }
}

fn run_case(seed: u64) {
    let mut h = Harness::new(seed);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..OPS_PER_CASE {
            h.step();
        }
    }));
    EIOS.fetch_add(h.storage.io_errors_injected(), Ordering::Relaxed);
    if let Err(panic) = result {
        let tail = h.trace.len().saturating_sub(25);
        eprintln!(
            "op-fuzz FAILED: seed={seed} (rerun: RILL_SIM_SEED={seed}); config {:?}; last ops:",
            h.config
        );
        for op in &h.trace[tail..] {
            eprintln!("  {op}");
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
    let base_seed = 0x5eed_0000_u64;
    for case in 0..cases {
        run_case(base_seed + case);
    }
    let (lost, eios) = (
        TAILS_LOST.load(Ordering::Relaxed),
        EIOS.load(Ordering::Relaxed),
    );
    eprintln!(
        "op-fuzz: {cases} cases, {lost} recoveries lost an unflushed tail, {eios} EIOs injected"
    );
    if cases >= 100 {
        assert!(lost > 0 && eios > 0, "faults were not exercised");
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
