//! The admin listener (issue 16): Prometheus metrics, health checks and a status page over
//! HTTP, on `--admin-listen` (default 127.0.0.1:9644, `off` disables it).
//!
//! | path             | answer                                                                  |
//! |------------------|-------------------------------------------------------------------------|
//! | `/metrics`       | Prometheus text format ([`exposition`] lists every family)              |
//! | `/health/live`   | 200 while every shard runs; 503 if one has not run for 10 s             |
//! | `/health/ready`  | 200 once every shard listens and start-up recovery is done; 503 before, and while stopping |
//! | `/v1/status`     | JSON: broker, shards, topics and partition offsets, groups and lag, recent errors ([`status`]) |
//! | `/`              | the same as a read-only HTML page ([`page`])                            |
//!
//! Map:
//! - [`state`]: [`state::AdminState`], what the shards publish (atomics they write, snapshots
//!   they answer) and the admin thread reads.
//! - [`shard`]: the shard side: a thread-local per shard, the hooks the data path calls, the
//!   observer task that flushes metrics and answers snapshots.
//! - [`bound_hits`]: the resource bounds by property name, and how often each bit.
//! - [`metrics`]: data-path counters and histograms (per-shard local copies, flushed).
//! - [`exposition`], [`status`], [`page`]: the three renderings.
//! - [`errors`]: the last warnings and errors, from the `tracing` log.
//! - [`http`]: the HTTP/1.1 server on its own threads (`httparse`).

pub mod bound_hits;
pub mod errors;
pub mod exposition;
pub mod http;
pub mod metrics;
pub mod page;
pub mod settings;
pub mod shard;
pub mod state;
pub mod status;

use std::sync::Arc;

use anyhow::Context;

use crate::config::BrokerConfig;
use state::AdminState;

/// Starts the admin listener if configured; records its address in the state. A bind failure
/// is an error: an operator who configured the port expects it, not a silent absence.
pub fn start(config: &BrokerConfig, state: &Arc<AdminState>) -> anyhow::Result<()> {
    let Some(addr) = config.admin.listen else {
        return Ok(());
    };
    let bound = http::start(addr, state.clone())
        .with_context(|| format!("binding the admin listener on {addr} (--admin-listen)"))?;
    state.info.write().expect("not poisoned").admin_listen = bound.to_string();
    tracing::info!("admin listener on http://{bound}/ (metrics, health, status)");
    Ok(())
}
