//! One fuzz connection: its lane's cases, a window at a time, written back to back and their
//! answers read in order. Correlation ids tell an answered case from a silent one (acks=0); a
//! close ends the window and a new connection starts. What a case met is counted; a broken
//! answer, or no answer where one is due, is a finding.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rill_livefuzz::case::{Case, CaseGen, Shape};
use rill_livefuzz::entropy::Seeded;
use rill_livefuzz::oracle::{check_response, correlation_id};
use rill_protocol::kafka_protocol::messages::ApiKey;

use crate::client::{Conn, ReadEnd};
use crate::stats::{api_name, Outcome, Stats};

/// Most cases one connection has in flight.
pub const WINDOW_MAX: usize = 4;
/// Frames kept per lane for a failure's replay file (and bytes at most).
const KEPT_FRAMES_MAX: usize = 64;
const KEPT_BYTES_MAX: usize = 4 << 20;
/// Correlation id of the sync request that follows a possibly silent Produce.
const SYNC_CORRELATION_ID: i32 = i32::MAX;

/// What a lane needs.
pub struct Lane {
    /// Its index: the seed's lane (so its cases depend only on the seed and this).
    pub index: u64,
    /// The run's seed.
    pub seed: u64,
    /// Brokers to spread connections over (a lane reconnects to the next one).
    pub addrs: Vec<SocketAddr>,
    /// Shared counters.
    pub stats: Arc<Stats>,
    /// Cases the whole run may still send (claimed a window at a time; what a window does not
    /// send is given back).
    pub budget: Arc<AtomicU64>,
    /// Set when the run ends.
    pub stop: Arc<AtomicBool>,
    /// How long an answer may take before the connection is given up on.
    pub answer_timeout: Duration,
}

/// The recent frames of a lane, for the replay file.
pub type Kept = VecDeque<(Shape, Vec<u8>)>;

/// Runs the lane until the budget is spent or the run stops; returns its recent frames.
pub fn run(lane: Lane) -> Kept {
    let mut e = Seeded::new(lane.seed, lane.index);
    let mut gen = CaseGen::new(lane.index);
    let mut kept = Kept::new();
    let mut kept_bytes = 0;
    let mut target = lane.index as usize;
    while !lane.stop.load(Relaxed) {
        target += 1;
        let addr = lane.addrs[target % lane.addrs.len()];
        let Ok(mut conn) = Conn::connect(addr, Duration::from_secs(5), lane.answer_timeout) else {
            // The monitor's probe decides whether the broker is down; just retry.
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        lane.stats.connects.fetch_add(1, Relaxed);
        loop {
            let want = claim(&lane.budget, WINDOW_MAX);
            if want == 0 || lane.stop.load(Relaxed) {
                return kept;
            }
            let window = next_window(&mut gen, &mut e, want);
            for case in &window {
                kept_bytes += case.frame.len();
                kept.push_back((case.shape, case.frame.clone()));
                while kept.len() > KEPT_FRAMES_MAX || kept_bytes > KEPT_BYTES_MAX && kept.len() > 1
                {
                    kept_bytes -= kept.pop_front().map_or(0, |(_, f)| f.len());
                }
            }
            let (open, sent) = exchange(&lane, &mut conn, &mut gen, &window);
            // What was claimed and not sent (a window cut short by its generator or by a
            // close) goes back, so `--requests` counts cases sent.
            lane.budget.fetch_add((want - sent) as u64, Relaxed);
            if !open {
                gen.interrupt();
                break;
            }
        }
    }
    kept
}

/// Takes up to `n` cases from the run's budget.
fn claim(budget: &AtomicU64, n: usize) -> usize {
    let mut have = budget.load(Relaxed);
    loop {
        let take = have.min(n as u64);
        if take == 0 {
            return 0;
        }
        match budget.compare_exchange_weak(have, have - take, Relaxed, Relaxed) {
            Ok(_) => return take as usize,
            Err(now) => have = now,
        }
    }
}

/// Up to `n` cases; a case that ends its connection (Torn, BadSize) or may hold it for long
/// (a JoinGroup waits for its rebalance) ends the window.
fn next_window(gen: &mut CaseGen, e: &mut Seeded, n: usize) -> Vec<Case> {
    let mut window = Vec::with_capacity(n);
    while window.len() < n {
        let case = gen.next(e);
        let last = matches!(case.shape, Shape::Torn | Shape::BadSize)
            || case.api_key == ApiKey::JoinGroup as i16;
        window.push(case);
        if last {
            break;
        }
    }
    window
}

/// Sends `window` and reads its answers: whether the connection is still open, and how many
/// cases were written.
fn exchange(lane: &Lane, conn: &mut Conn, gen: &mut CaseGen, window: &[Case]) -> (bool, usize) {
    let stats = &lane.stats;
    let mut sent = 0;
    for case in window {
        if conn.send(&case.frame).is_err() {
            break; // closed under us: the cases not written are not counted
        }
        stats.count(case.api_key, case.shape, Outcome::Sent);
        sent += 1;
    }
    let window = &window[..sent];
    let Some(last) = window.last() else {
        return (false, 0);
    };
    if matches!(last.shape, Shape::Torn | Shape::BadSize) {
        // Torn: the broker waits for bytes that never come; the close must free them.
        // BadSize: the broker must close. Either way the answers before it are due first.
        conn.shutdown_write();
    }
    let mut synced = false;
    if last.may_be_silent() && !matches!(last.shape, Shape::Torn | Shape::BadSize) {
        synced = conn.send(&sync_request()).is_ok();
        if synced {
            stats.syncs.fetch_add(1, Relaxed);
        }
    }
    (read_answers(lane, conn, gen, window, synced), sent)
}

/// An ApiVersions v0 request: its answer shows every earlier case was seen.
fn sync_request() -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&(ApiKey::ApiVersions as i16).to_be_bytes());
    body.extend_from_slice(&0i16.to_be_bytes());
    body.extend_from_slice(&SYNC_CORRELATION_ID.to_be_bytes());
    body.extend_from_slice(&8i16.to_be_bytes());
    body.extend_from_slice(b"livefuzz");
    rill_livefuzz::wire::frame(&body)
}

/// Reads the answers to `window` (and to the sync request after it, when `synced`).
fn read_answers(
    lane: &Lane,
    conn: &mut Conn,
    gen: &mut CaseGen,
    window: &[Case],
    mut synced: bool,
) -> bool {
    let mut next = 0; // the first case not yet accounted for
    let mut buf = Vec::new();
    let deadline = Instant::now() + lane.answer_timeout;
    let ends_connection = window
        .last()
        .is_some_and(|c| matches!(c.shape, Shape::Torn | Shape::BadSize));
    loop {
        let done = next == window.len();
        if done && !synced && !ends_connection {
            return true;
        }
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let _ = conn.set_read_timeout(left);
        match conn.read_frame(&mut buf) {
            Ok(()) => {
                let Some(id) = correlation_id(&buf) else {
                    let n = buf.len();
                    lane.stats.finding(format!(
                        "lane {}: a response frame of {n} bytes",
                        lane.index
                    ));
                    return false;
                };
                if id == SYNC_CORRELATION_ID && synced {
                    // Every case left was silent.
                    window[next..].iter().for_each(|case| silent(lane, case));
                    next = window.len();
                    synced = false;
                } else if !account(lane, gen, window, &mut next, id, &buf) {
                    return false;
                }
            }
            Err(end) => {
                ended(lane, &window[next..], end);
                return false;
            }
        }
    }
}

/// Accounts for the answer with correlation id `id`: the cases before it were silent. False
/// when no case in flight has that id (a finding).
fn account(
    lane: &Lane,
    gen: &mut CaseGen,
    window: &[Case],
    next: &mut usize,
    id: i32,
    response: &[u8],
) -> bool {
    let Some(at) = window[*next..].iter().position(|c| c.correlation_id == id) else {
        let waiting: Vec<i32> = window[*next..].iter().map(|c| c.correlation_id).collect();
        lane.stats.finding(format!(
            "lane {}: response with correlation id {id}, expected one of {waiting:?}",
            lane.index
        ));
        return false;
    };
    window[*next..*next + at]
        .iter()
        .for_each(|case| silent(lane, case));
    answered(lane, gen, &window[*next + at], response);
    *next += at + 1;
    true
}

/// The connection ended (closed, timed out, or sent nonsense) with `left` cases unanswered.
fn ended(lane: &Lane, left: &[Case], end: ReadEnd) {
    let stats = &lane.stats;
    match end {
        ReadEnd::Closed | ReadEnd::Io => {
            if let Some(case) = left.first().filter(|c| c.must_answer()) {
                stats.valid_closed(case.api_key);
            }
            left.iter()
                .for_each(|c| stats.count(c.api_key, c.shape, Outcome::Closed));
        }
        ReadEnd::TimedOut => {
            left.iter()
                .for_each(|c| stats.count(c.api_key, c.shape, Outcome::Abandoned));
            if let Some(case) = left.first() {
                stats.note(format!(
                    "{} v{} ({:?}) was not answered within {:?}; connection abandoned",
                    api_name(case.api_key),
                    case.version,
                    case.shape,
                    lane.answer_timeout
                ));
            }
        }
        ReadEnd::Absurd(size) => {
            stats.finding(format!("lane {}: response size prefix {size}", lane.index));
        }
    }
}

fn silent(lane: &Lane, case: &Case) {
    lane.stats.count(case.api_key, case.shape, Outcome::Silent);
    if case.must_answer() {
        lane.stats.finding(format!(
            "lane {}: {} v{} (Valid, correlation id {}) got no answer while a later request did",
            lane.index,
            api_name(case.api_key),
            case.version,
            case.correlation_id
        ));
    }
}

fn answered(lane: &Lane, gen: &mut CaseGen, case: &Case, response: &[u8]) {
    lane.stats
        .count(case.api_key, case.shape, Outcome::Answered);
    if matches!(case.shape, Shape::Torn | Shape::BadSize | Shape::UnknownApi) {
        lane.stats.finding(format!(
            "lane {}: a {:?} case (api {}) was answered",
            lane.index, case.shape, case.api_key
        ));
        return;
    }
    if let Err(e) = check_response(case, response) {
        lane.stats
            .finding(format!("lane {}: {:?} case: {e}", lane.index, case.shape));
        return;
    }
    gen.state
        .learn(case.api_key, case.version, &case.picked, response);
}
