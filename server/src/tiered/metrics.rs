//! Tiered storage's metrics, process-wide (object-store work is rare next to requests, so
//! these are shared atomic counters, not per-shard local ones):
//!
//! | metric                                        | type    | what                                   |
//! |-----------------------------------------------|---------|----------------------------------------|
//! | `rill_remote_copy_segments_total`             | counter | segments whose copy finished           |
//! | `rill_remote_copy_bytes_total`                | counter | bytes put (every object of a copy)     |
//! | `rill_remote_copy_errors_total`               | counter | copies that failed (retried later)     |
//! | `rill_remote_delete_segments_total`           | counter | remote segments deleted (retention, cleanup) |
//! | `rill_remote_fetch_requests_total`            | counter | fetches served from the remote tier    |
//! | `rill_remote_fetch_bytes_total`               | counter | record bytes they returned             |
//! | `rill_remote_fetch_errors_total`              | counter | remote fetches that failed             |
//! | `rill_remote_fetch_duration_seconds`          | histogram | time to serve a read from the remote tier |
//! | `rill_remote_upload_lag_bytes`                | gauge   | bytes of sealed segments below the high watermark not yet copied, summed over tiered partitions |
//! | `rill_remote_upload_lag_segments`             | gauge   | the same in segments                   |

use std::sync::LazyLock;

use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge, Registry};

/// The metrics (see the module doc).
pub struct TierMetrics {
    /// `rill_remote_copy_segments_total`.
    pub copy_segments: IntCounter,
    /// `rill_remote_copy_bytes_total`.
    pub copy_bytes: IntCounter,
    /// `rill_remote_copy_errors_total`.
    pub copy_errors: IntCounter,
    /// `rill_remote_delete_segments_total`.
    pub delete_segments: IntCounter,
    /// `rill_remote_fetch_requests_total`.
    pub fetch_requests: IntCounter,
    /// `rill_remote_fetch_bytes_total`.
    pub fetch_bytes: IntCounter,
    /// `rill_remote_fetch_errors_total`.
    pub fetch_errors: IntCounter,
    /// `rill_remote_fetch_duration_seconds`.
    pub fetch_duration: Histogram,
    /// `rill_remote_upload_lag_bytes` (each partition adds its change).
    pub upload_lag_bytes: IntGauge,
    /// `rill_remote_upload_lag_segments`.
    pub upload_lag_segments: IntGauge,
}

fn counter(name: &str, help: &str) -> IntCounter {
    IntCounter::new(name, help).expect("valid metric")
}

fn gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::new(name, help).expect("valid metric")
}

/// The process's tiered-storage metrics.
pub static TIER: LazyLock<TierMetrics> = LazyLock::new(|| TierMetrics {
    copy_segments: counter(
        "rill_remote_copy_segments_total",
        "Segments copied to the remote tier (COPY_FINISHED).",
    ),
    copy_bytes: counter(
        "rill_remote_copy_bytes_total",
        "Bytes put to the object store by segment copies.",
    ),
    copy_errors: counter(
        "rill_remote_copy_errors_total",
        "Segment copies that failed (retried with backoff).",
    ),
    delete_segments: counter(
        "rill_remote_delete_segments_total",
        "Remote segments deleted (total retention, cleanup of failed copies).",
    ),
    fetch_requests: counter(
        "rill_remote_fetch_requests_total",
        "Partition reads served from the remote tier.",
    ),
    fetch_bytes: counter(
        "rill_remote_fetch_bytes_total",
        "Record bytes read from the remote tier.",
    ),
    fetch_errors: counter(
        "rill_remote_fetch_errors_total",
        "Partition reads from the remote tier that failed.",
    ),
    fetch_duration: Histogram::with_opts(
        HistogramOpts::new(
            "rill_remote_fetch_duration_seconds",
            "Time to serve a partition read from the remote tier (index lookup and ranged GETs).",
        )
        .buckets(crate::admin::metrics::LATENCY_BUCKETS.to_vec()),
    )
    .expect("valid metric"),
    upload_lag_bytes: gauge(
        "rill_remote_upload_lag_bytes",
        "Bytes of sealed segments below the high watermark not yet copied to the remote tier.",
    ),
    upload_lag_segments: gauge(
        "rill_remote_upload_lag_segments",
        "Sealed segments below the high watermark not yet copied to the remote tier.",
    ),
});

/// Adds the metrics to the admin listener's registry.
pub fn register(registry: &Registry) {
    let m = &*TIER;
    let counters = [
        &m.copy_segments,
        &m.copy_bytes,
        &m.copy_errors,
        &m.delete_segments,
        &m.fetch_requests,
        &m.fetch_bytes,
        &m.fetch_errors,
    ];
    for c in counters {
        registry
            .register(Box::new(c.clone()))
            .expect("unique metric names");
    }
    registry
        .register(Box::new(m.fetch_duration.clone()))
        .expect("unique metric names");
    for g in [&m.upload_lag_bytes, &m.upload_lag_segments] {
        registry
            .register(Box::new(g.clone()))
            .expect("unique metric names");
    }
}
