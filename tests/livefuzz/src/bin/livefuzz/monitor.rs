//! The checks after every batch of cases: each broker process alive and not logging panics or
//! unencodable responses,
//! answering a fresh connection's ApiVersions, within its RSS bound, nothing created beside its
//! data directory; the friendly clients still making progress; no finding from the lanes.

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use rill_protocol::kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, RequestKind, ResponseKind,
};
use rill_protocol::kafka_protocol::protocol::StrBytes;

use crate::client::Conn;
use crate::friendly::Progress;
use crate::launch::{strays, Node};
use crate::stats::Stats;

/// The bounds a check applies.
pub struct Bounds {
    /// Largest RSS allowed, KiB.
    pub rss_max_kib: u64,
    /// Longest a friendly client may go without progress.
    pub stall: Duration,
    /// How long the probe's answer may take.
    pub probe_timeout: Duration,
}

/// What the checks saw, over the run.
#[derive(Default)]
pub struct Seen {
    /// Checks passed.
    pub checks: u64,
    /// Largest RSS sampled, KiB.
    pub rss_max_kib: u64,
}

/// Runs every check once; `Err` says what failed.
pub fn check(
    nodes: &mut [Node],
    stats: &Stats,
    progress: &Progress,
    bounds: &Bounds,
    seen: &mut Seen,
) -> Result<(), String> {
    for node in nodes.iter_mut() {
        node.alive()?;
        if let Some(line) = node.new_defects().first() {
            return Err(format!("broker {} logged a defect: {line}", node.addr));
        }
        if node.pid != 0 {
            let rss = node
                .rss_kib()
                .ok_or_else(|| format!("broker {}: no RSS (gone?)", node.addr))?;
            seen.rss_max_kib = seen.rss_max_kib.max(rss);
            if rss > bounds.rss_max_kib {
                return Err(format!(
                    "broker {} RSS {} MiB is over the bound of {} MiB",
                    node.addr,
                    rss >> 10,
                    bounds.rss_max_kib >> 10
                ));
            }
        }
        if let Some(stray) = strays(node).first() {
            return Err(format!(
                "broker {}: `{stray}` appeared beside the data directory",
                node.addr
            ));
        }
        probe(node, bounds.probe_timeout)?;
    }
    let now = progress.now_ms();
    let stall_ms = bounds.stall.as_millis() as u64;
    let produced = progress.produced_ms.load(Relaxed);
    if now.saturating_sub(produced) > stall_ms {
        return Err(format!(
            "the friendly producer made no progress for {} s",
            (now - produced) / 1000
        ));
    }
    let consumed = progress.consumed_ms.load(Relaxed);
    let behind = stats.friendly_consumed.load(Relaxed) < stats.friendly_acked.load(Relaxed);
    if behind && now.saturating_sub(consumed) > stall_ms {
        return Err(format!(
            "the friendly consumer made no progress for {} s",
            (now - consumed) / 1000
        ));
    }
    if let Some(first) = stats.findings.lock().expect("stats lock").first() {
        return Err(first.clone());
    }
    seen.checks += 1;
    Ok(())
}

/// A fresh connection's ApiVersions v3, answered in time and without error.
fn probe(node: &Node, timeout: Duration) -> Result<(), String> {
    let mut conn = Conn::connect(node.addr, timeout, timeout)
        .map_err(|e| format!("broker {}: probe connect: {e}", node.addr))?;
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("livefuzz-probe"))
        .with_client_software_version(StrBytes::from_static_str("1"));
    match conn.call(ApiKey::ApiVersions, 3, RequestKind::ApiVersions(request)) {
        Ok(ResponseKind::ApiVersions(r)) if r.error_code == 0 => Ok(()),
        Ok(other) => Err(format!("broker {}: probe answered {other:?}", node.addr)),
        Err(e) => Err(format!("broker {}: probe: {e}", node.addr)),
    }
}
