//! Counters shared by the connection threads and read by the monitor and the final report.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use rill_livefuzz::case::Shape;
use rill_protocol::api_registry::ENTRIES;
use rill_protocol::kafka_protocol::messages::ApiKey;

/// What happened to a case.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Written whole to the broker.
    Sent = 0,
    /// Answered (and the answer checked).
    Answered = 1,
    /// No answer, a later request was answered (acks=0).
    Silent = 2,
    /// The broker closed the connection before answering it.
    Closed = 3,
    /// The connection was given up on while it waited (a long poll, a rebalance).
    Abandoned = 4,
}

const OUTCOMES: usize = 5;
/// One row per registry API, and a last one for api keys outside it.
const ROWS: usize = ENTRIES.len() + 1;

/// Everything counted.
pub struct Stats {
    by_api: Vec<[AtomicU64; OUTCOMES]>,
    by_shape: Vec<[AtomicU64; OUTCOMES]>,
    /// Valid cases the broker closed the connection on (well-formed requests refused).
    pub valid_closed: Vec<AtomicU64>,
    /// Connections opened by the fuzz threads.
    pub connects: AtomicU64,
    /// Sync requests (ApiVersions after a possibly silent Produce): not fuzz cases.
    pub syncs: AtomicU64,
    /// Requests the friendly producer had acknowledged (records).
    pub friendly_acked: AtomicU64,
    /// Records the friendly consumer read and checked.
    pub friendly_consumed: AtomicU64,
    /// Offsets the friendly consumer committed.
    pub friendly_commits: AtomicU64,
    /// Retriable errors the friendly clients met (NOT_LEADER, timeouts...).
    pub friendly_retries: AtomicU64,
    /// Findings that fail the run (bad responses, missing answers, friendly data errors).
    pub findings: Mutex<Vec<String>>,
    /// Findings that are reported but do not fail the run (a valid request refused...).
    pub notes: Mutex<Vec<String>>,
}

impl Stats {
    /// All zero.
    pub fn new() -> Self {
        let zeros = || std::array::from_fn(|_| AtomicU64::new(0));
        Stats {
            by_api: (0..ROWS).map(|_| zeros()).collect(),
            by_shape: (0..Shape::ALL.len()).map(|_| zeros()).collect(),
            valid_closed: (0..ROWS).map(|_| AtomicU64::new(0)).collect(),
            connects: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            friendly_acked: AtomicU64::new(0),
            friendly_consumed: AtomicU64::new(0),
            friendly_commits: AtomicU64::new(0),
            friendly_retries: AtomicU64::new(0),
            findings: Mutex::new(Vec::new()),
            notes: Mutex::new(Vec::new()),
        }
    }

    /// Counts `outcome` for a case of `api_key` and `shape`.
    pub fn count(&self, api_key: i16, shape: Shape, outcome: Outcome) {
        self.by_api[row(api_key)][outcome as usize].fetch_add(1, Relaxed);
        self.by_shape[shape as usize][outcome as usize].fetch_add(1, Relaxed);
    }

    /// A valid case of `api_key` met a close.
    pub fn valid_closed(&self, api_key: i16) {
        self.valid_closed[row(api_key)].fetch_add(1, Relaxed);
    }

    /// Cases written whole so far.
    pub fn sent(&self) -> u64 {
        self.by_shape
            .iter()
            .map(|r| r[Outcome::Sent as usize].load(Relaxed))
            .sum()
    }

    /// Total of `outcome` over every case.
    pub fn total(&self, outcome: Outcome) -> u64 {
        self.by_shape
            .iter()
            .map(|r| r[outcome as usize].load(Relaxed))
            .sum()
    }

    /// Records a finding that fails the run.
    pub fn finding(&self, text: String) {
        let mut f = self.findings.lock().expect("stats lock");
        if f.len() < 100 {
            f.push(text);
        }
    }

    /// Records a note (reported, does not fail the run), once per distinct text.
    pub fn note(&self, text: String) {
        let mut n = self.notes.lock().expect("stats lock");
        if n.len() < 100 && !n.contains(&text) {
            n.push(text);
        }
    }

    /// The per-API and per-shape tables.
    pub fn tables(&self) -> String {
        let mut out =
            String::from("  cases by shape      sent   answered   silent   closed  abandoned\n");
        for (i, shape) in Shape::ALL.iter().enumerate() {
            out += &format!(
                "    {:<12}{}\n",
                format!("{shape:?}"),
                cells(&self.by_shape[i])
            );
        }
        out +=
            "  cases by API         sent   answered   silent   closed  abandoned  valid-closed\n";
        for (i, row) in self.by_api.iter().enumerate() {
            let name = ENTRIES
                .get(i)
                .map_or("(other keys)".to_owned(), |e| format!("{:?}", e.api_key));
            let vc = self.valid_closed[i].load(Relaxed);
            out += &format!("    {name:<28}{} {vc:>9}\n", cells(row));
        }
        out
    }
}

fn cells(row: &[AtomicU64; OUTCOMES]) -> String {
    row.iter()
        .map(|c| format!("{:>10}", c.load(Relaxed)))
        .collect::<Vec<_>>()
        .join("")
}

fn row(api_key: i16) -> usize {
    ENTRIES
        .iter()
        .position(|e| e.api_key as i16 == api_key)
        .unwrap_or(ENTRIES.len())
}

/// The name of an api key (or its number).
pub fn api_name(api_key: i16) -> String {
    ApiKey::try_from(api_key).map_or_else(|_| format!("api {api_key}"), |a| format!("{a:?}"))
}
