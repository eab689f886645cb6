//! The metrics recorded on the data path: request counts and latencies per API, flush and
//! produce-to-durable latency, Fetch wait, the log cleaner's work and the transactions the
//! coordinators ended. Gauges of state (offsets, lag, connections) are not
//! here: [`super::exposition`] reads them from [`super::state`] at scrape time.
//!
//! # Why the `prometheus` crate (tikv/rust-prometheus)
//! Maintained, lock-free histograms, the text exposition format, a process collector (CPU,
//! memory, open fds) — and *local* metrics: unsynchronised per-thread copies flushed into the
//! shared ones. That fits thread-per-core: a shard counts in its own [`ShardMetrics`] with
//! plain (non-atomic) arithmetic and folds them into the process-wide ones every
//! [`FLUSH_INTERVAL`], so two cores never fight over a counter's cache line on every request.
//! Scraped values therefore lag the truth by at most [`FLUSH_INTERVAL`].

use std::cell::RefCell;
use std::time::Duration;

use prometheus::local::{LocalHistogram, LocalIntCounter};
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts, Registry,
};
use rill_engine::cleaner::CleanStats;
use rill_protocol::kafka_protocol::messages::ApiKey;

/// How often a shard folds its local metrics into the shared ones.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// Buckets of every latency histogram, in seconds: 100 µs to 30 s.
pub const LATENCY_BUCKETS: [f64; 17] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// Api keys with their own slot in a shard's local metrics (every Kafka api key is below).
const API_KEYS_MAX: usize = 128;

/// The process-wide metrics the shards flush into, and the registry that exposes them.
pub struct Metrics {
    /// Registry of everything below plus the process collector.
    pub registry: Registry,
    requests: IntCounterVec,
    request_duration: HistogramVec,
    flush_duration: Histogram,
    produce_durable: Histogram,
    fetch_wait: Histogram,
    stage: HistogramVec,
    cleaner: CleanerMetrics<IntCounter, Histogram>,
    txn_ended: IntCounterVec,
    txn_timed_out: IntCounter,
    /// Requests whose serving panicked (caught: `crate::panic_guard`), by API. Counted on the
    /// shared counter at once: a panic is rare, and must show before the next flush.
    request_panics: IntCounterVec,
}

/// The log cleaner's figures (compaction): shared ones, or a shard's local copies.
struct CleanerMetrics<C, H> {
    /// Cleans that finished, and cleans that stopped on an error.
    done: C,
    failed: C,
    /// How long finished cleans took (waiting for a cleaner slot left out).
    duration: H,
    bytes_read: C,
    bytes_written: C,
    records_read: C,
    records_removed: C,
}

fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric")
}

fn histogram(name: &str, help: &str) -> HistogramOpts {
    HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec())
}

fn register<M: prometheus::core::Collector + Clone + 'static>(registry: &Registry, metric: &M) {
    registry
        .register(Box::new(metric.clone()))
        .expect("unique metric names");
}

impl CleanerMetrics<IntCounter, Histogram> {
    fn new(registry: &Registry) -> Self {
        let cleans = IntCounterVec::new(
            Opts::new(
                "rill_cleaner_cleans_total",
                "Cleans of compacted logs, by result (done, failed).",
            ),
            &["result"],
        )
        .expect("valid metric");
        register(registry, &cleans);
        let metrics = CleanerMetrics {
            done: cleans.with_label_values(&["done"]),
            failed: cleans.with_label_values(&["failed"]),
            duration: Histogram::with_opts(histogram(
                "rill_cleaner_clean_duration_seconds",
                "Time a finished clean of one log took.",
            ))
            .expect("valid metric"),
            bytes_read: counter(
                "rill_cleaner_read_bytes_total",
                "Log bytes the cleaner read (offset map and cleaning).",
            ),
            bytes_written: counter(
                "rill_cleaner_written_bytes_total",
                "Log bytes the cleaner wrote to cleaned segments.",
            ),
            records_read: counter(
                "rill_cleaner_records_read_total",
                "Records the cleaner looked at while cleaning.",
            ),
            records_removed: counter(
                "rill_cleaner_records_removed_total",
                "Records the cleaner removed (superseded by a later value of their key, or expired tombstones).",
            ),
        };
        register(registry, &metrics.duration);
        for c in metrics.counters() {
            register(registry, c);
        }
        metrics
    }

    fn local(&self) -> CleanerMetrics<LocalIntCounter, LocalHistogram> {
        CleanerMetrics {
            done: self.done.local(),
            failed: self.failed.local(),
            duration: self.duration.local(),
            bytes_read: self.bytes_read.local(),
            bytes_written: self.bytes_written.local(),
            records_read: self.records_read.local(),
            records_removed: self.records_removed.local(),
        }
    }
}

impl<C, H> CleanerMetrics<C, H> {
    /// The counters with a family of their own (`done` and `failed` share one).
    fn counters(&self) -> [&C; 4] {
        [
            &self.bytes_read,
            &self.bytes_written,
            &self.records_read,
            &self.records_removed,
        ]
    }
}

/// Transactions ended by result (both results exist from the start, so a dashboard's rate()
/// has a series before the first), and transactions timed out.
fn txn_metrics(registry: &Registry) -> (IntCounterVec, IntCounter) {
    let ended = IntCounterVec::new(
        Opts::new(
            "rill_txn_ended_total",
            "Transactions this broker's coordinators completed (markers written), by result (commit, abort).",
        ),
        &["result"],
    )
    .expect("valid metric");
    for result in ["commit", "abort"] {
        ended.with_label_values(&[result]);
    }
    let timed_out = counter(
        "rill_txn_timed_out_total",
        "Transactions the coordinators aborted because they ran past their timeout.",
    );
    register(registry, &ended);
    register(registry, &timed_out);
    (ended, timed_out)
}

/// Requests whose serving panicked, by API (see [`Metrics::request_panicked`]).
fn request_panics(registry: &Registry) -> IntCounterVec {
    let panics = IntCounterVec::new(
        Opts::new(
            "rill_request_panics_total",
            "Requests whose serving panicked, answered UNKNOWN_SERVER_ERROR or closed (a bug: please report it), by API.",
        ),
        &["api"],
    )
    .expect("valid metric");
    register(registry, &panics);
    panics
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let requests = IntCounterVec::new(
            Opts::new("rill_requests_total", "Kafka requests answered, by API."),
            &["api"],
        )
        .expect("valid metric");
        let request_duration = HistogramVec::new(
            histogram(
                "rill_request_duration_seconds",
                "Time from a request's frame being read to its response being ready, by API.",
            ),
            &["api"],
        )
        .expect("valid metric");
        let flush_duration = Histogram::with_opts(histogram(
            "rill_log_flush_duration_seconds",
            "Time to make a partition log's appended bytes durable (write + fdatasync).",
        ))
        .expect("valid metric");
        let produce_durable = Histogram::with_opts(histogram(
            "rill_produce_durable_seconds",
            "Time from an acks=all Produce request arriving to its partition's bytes being durable.",
        ))
        .expect("valid metric");
        let fetch_wait = Histogram::with_opts(histogram(
            "rill_fetch_wait_seconds",
            "Time a Fetch request waited for data (long poll, up to its max wait).",
        ))
        .expect("valid metric");
        let stage = HistogramVec::new(
            histogram(
                "rill_shard_stage_seconds",
                "Where time goes on a shard, by stage: a Produce's steps, and each vectored send of a Fetch response (see `admin::shard::hooks::Stage`).",
            ),
            &["stage"],
        )
        .expect("valid metric");
        let registry = Registry::new();
        for collector in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(request_duration.clone()),
            Box::new(flush_duration.clone()),
            Box::new(produce_durable.clone()),
            Box::new(fetch_wait.clone()),
            Box::new(stage.clone()),
            Box::new(prometheus::process_collector::ProcessCollector::for_self()),
        ] {
            registry.register(collector).expect("unique metric names");
        }
        crate::tiered::metrics::register(&registry);
        let cleaner = CleanerMetrics::new(&registry);
        let (txn_ended, txn_timed_out) = txn_metrics(&registry);
        let request_panics = request_panics(&registry);
        Metrics {
            registry,
            requests,
            request_duration,
            flush_duration,
            produce_durable,
            fetch_wait,
            stage,
            cleaner,
            txn_ended,
            txn_timed_out,
            request_panics,
        }
    }

    /// A request of api `api_key` panicked while it was served (caught and answered).
    pub fn request_panicked(&self, api_key: i16) {
        // Unknown keys share one label: the series stay bounded whatever a client sends.
        let api = ApiKey::try_from(api_key).map_or_else(|_| "unknown".into(), |a| format!("{a:?}"));
        self.request_panics.with_label_values(&[&api]).inc();
    }

    /// A shard's local copies, to be flushed into these.
    pub fn local(&self) -> ShardMetrics {
        ShardMetrics {
            requests: RefCell::new((0..API_KEYS_MAX).map(|_| None).collect()),
            flush_duration: self.flush_duration.local(),
            produce_durable: self.produce_durable.local(),
            fetch_wait: self.fetch_wait.local(),
            stages: crate::admin::shard::hooks::Stage::ALL
                .iter()
                .map(|s| self.stage.with_label_values(&[s.name()]).local())
                .collect(),
            cleaner: self.cleaner.local(),
            txn_commits: self.txn_ended.with_label_values(&["commit"]).local(),
            txn_aborts: self.txn_ended.with_label_values(&["abort"]).local(),
            txn_timed_out: self.txn_timed_out.local(),
            requests_shared: self.requests.clone(),
            request_duration_shared: self.request_duration.clone(),
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// One shard's unsynchronised copies of [`Metrics`]: recorded with plain arithmetic, flushed
/// by the shard every [`FLUSH_INTERVAL`].
pub struct ShardMetrics {
    /// Per api key: request count and latency, created on the api's first request.
    requests: RefCell<Vec<Option<(LocalIntCounter, LocalHistogram)>>>,
    flush_duration: LocalHistogram,
    produce_durable: LocalHistogram,
    fetch_wait: LocalHistogram,
    /// Per [`crate::admin::shard::hooks::Stage`], in its order.
    stages: Vec<LocalHistogram>,
    cleaner: CleanerMetrics<LocalIntCounter, LocalHistogram>,
    txn_commits: LocalIntCounter,
    txn_aborts: LocalIntCounter,
    txn_timed_out: LocalIntCounter,
    requests_shared: IntCounterVec,
    request_duration_shared: HistogramVec,
}

impl ShardMetrics {
    /// A request of api `api_key` was answered `elapsed` after it was read. Keys that name no
    /// Kafka API are not counted (such a request closes its connection).
    pub fn request(&self, api_key: i16, elapsed: Duration) {
        let Some(slot) = usize::try_from(api_key).ok().filter(|&k| k < API_KEYS_MAX) else {
            return;
        };
        let mut requests = self.requests.borrow_mut();
        if requests[slot].is_none() {
            let Ok(api) = ApiKey::try_from(api_key) else {
                return;
            };
            let api = format!("{api:?}");
            requests[slot] = Some((
                self.requests_shared.with_label_values(&[&api]).local(),
                self.request_duration_shared
                    .with_label_values(&[&api])
                    .local(),
            ));
        }
        let (count, latency) = requests[slot].as_ref().expect("filled above");
        count.inc();
        latency.observe(elapsed.as_secs_f64());
    }

    /// A partition log flush (write + fdatasync) took `elapsed`.
    pub fn log_flushed(&self, elapsed: Duration) {
        self.flush_duration.observe(elapsed.as_secs_f64());
    }

    /// An acks=all produce became durable `elapsed` after its request arrived.
    pub fn produce_durable(&self, elapsed: Duration) {
        self.produce_durable.observe(elapsed.as_secs_f64());
    }

    /// `elapsed` was spent in `stage`.
    pub fn shard_stage(&self, stage: crate::admin::shard::hooks::Stage, elapsed: Duration) {
        self.stages[stage as usize].observe(elapsed.as_secs_f64());
    }

    /// A Fetch waited `elapsed` for data.
    pub fn fetch_waited(&self, elapsed: Duration) {
        self.fetch_wait.observe(elapsed.as_secs_f64());
    }

    /// A clean of one log finished after `elapsed` having done `stats`, or (`None`) stopped.
    pub fn clean_finished(&self, elapsed: Duration, stats: Option<&CleanStats>) {
        let c = &self.cleaner;
        let Some(stats) = stats else {
            c.failed.inc();
            return;
        };
        c.done.inc();
        c.duration.observe(elapsed.as_secs_f64());
        c.bytes_read.inc_by(stats.bytes_read);
        c.bytes_written.inc_by(stats.bytes_written);
        c.records_read.inc_by(stats.records_read);
        c.records_removed
            .inc_by(stats.records_read.saturating_sub(stats.records_kept));
    }

    /// A transaction was completed: its markers are written and its end recorded.
    pub fn txn_ended(&self, committed: bool) {
        match committed {
            true => self.txn_commits.inc(),
            false => self.txn_aborts.inc(),
        }
    }

    /// A transaction ran past its timeout and is being aborted.
    pub fn txn_timed_out(&self) {
        self.txn_timed_out.inc();
    }

    /// Folds everything recorded since the last flush into the shared metrics.
    pub fn flush(&self) {
        for (count, latency) in self.requests.borrow().iter().flatten() {
            count.flush();
            latency.flush();
        }
        self.flush_duration.flush();
        self.produce_durable.flush();
        self.fetch_wait.flush();
        for stage in &self.stages {
            stage.flush();
        }
        let c = &self.cleaner;
        let others = [&c.done, &c.failed, &self.txn_commits, &self.txn_aborts];
        for counter in c.counters().into_iter().chain(others) {
            counter.flush();
        }
        self.txn_timed_out.flush();
        c.duration.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(metrics: &Metrics, name: &str) -> String {
        let families = metrics.registry.gather();
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap();
        text.lines()
            .filter(|l| l.starts_with(name))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn shard_counts_reach_the_registry_only_when_flushed() {
        let metrics = Metrics::new();
        let shard = metrics.local();
        shard.request(0, Duration::from_micros(300));
        shard.request(0, Duration::from_millis(3));
        shard.request(-1, Duration::ZERO);
        shard.request(999, Duration::ZERO);
        shard.request(127, Duration::ZERO); // no such API
                                            // The series exists from the first request on, its count arrives with the flush.
        assert_eq!(
            value(&metrics, "rill_requests_total"),
            "rill_requests_total{api=\"Produce\"} 0"
        );
        shard.flush();
        assert_eq!(
            value(&metrics, "rill_requests_total"),
            "rill_requests_total{api=\"Produce\"} 2"
        );
        let buckets = value(&metrics, "rill_request_duration_seconds_bucket");
        assert!(buckets.contains("le=\"0.0005\"} 1"), "{buckets}");
        assert!(buckets.contains("le=\"0.005\"} 2"), "{buckets}");
    }

    #[test]
    fn cleans_and_transactions_are_counted_by_result() {
        let metrics = Metrics::new();
        let shard = metrics.local();
        let stats = CleanStats {
            bytes_read: 1000,
            bytes_written: 300,
            records_read: 40,
            records_kept: 10,
            ..CleanStats::default()
        };
        shard.clean_finished(Duration::from_millis(20), Some(&stats));
        shard.clean_finished(Duration::from_millis(5), None);
        shard.txn_ended(true);
        shard.txn_ended(false);
        shard.txn_ended(false);
        shard.txn_timed_out();
        assert_eq!(
            value(&metrics, "rill_txn_ended_total"),
            "rill_txn_ended_total{result=\"abort\"} 0\nrill_txn_ended_total{result=\"commit\"} 0"
        );
        shard.flush();
        let cleans = value(&metrics, "rill_cleaner_cleans_total");
        assert_eq!(
            cleans,
            "rill_cleaner_cleans_total{result=\"done\"} 1\nrill_cleaner_cleans_total{result=\"failed\"} 1"
        );
        assert_eq!(
            value(&metrics, "rill_cleaner_records_removed_total"),
            "rill_cleaner_records_removed_total 30"
        );
        assert_eq!(
            value(&metrics, "rill_cleaner_clean_duration_seconds_count"),
            "rill_cleaner_clean_duration_seconds_count 1"
        );
        assert_eq!(
            value(&metrics, "rill_txn_ended_total"),
            "rill_txn_ended_total{result=\"abort\"} 2\nrill_txn_ended_total{result=\"commit\"} 1"
        );
        assert_eq!(
            value(&metrics, "rill_txn_timed_out_total"),
            "rill_txn_timed_out_total 1"
        );
    }
}
