//! Start one pinned glommio executor per shard, join them into a channel mesh, serve until the
//! stop flag turns, then close every log cleanly.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::net::TcpListener;
use glommio::sync::Semaphore;
use glommio::{LocalExecutorBuilder, Placement};
use rill_engine::io::glommio::GlommioStorage;
use rill_engine::io::{Clock, SystemClock};
use rill_engine::LogManager;

use super::mesh::{serve_peer, REMOTE_REQUESTS_MAX};
use super::Shard;
use crate::config::{available_cores, BrokerConfig};
use crate::net::listener::accept_loop;
use crate::partition::ops::ShardMsg;
use crate::partition::table::PartitionTable;
use crate::routing::owner_shard;
use crate::shutdown::ShutdownSignal;
use crate::topics::TopicRegistry;

/// How often a shard looks at the process-wide stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Run the broker until `stop` turns true; returns after every shard closed its logs.
pub fn run(mut config: BrokerConfig, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating data dir {}", config.data_dir.display()))?;
    let _lock = crate::data_dir_lock::DataDirLock::acquire(&config.data_dir)
        .context("locking the data dir")?;
    let registry = Arc::new(
        TopicRegistry::open(&config.data_dir)
            .with_context(|| format!("opening topic metadata in {}", config.data_dir.display()))?,
    );
    if config.listen.port() == 0 {
        // Every shard must bind the same port: pick one now.
        let probe = std::net::TcpListener::bind(config.listen).context("picking a free port")?;
        config.listen = probe.local_addr()?;
        if config.advertise_port == 0 {
            config.advertise_port = config.listen.port();
        }
    }
    let config = Arc::new(config);
    let mesh = (config.shards > 1)
        .then(|| MeshBuilder::<ShardMsg, _>::full(config.shards, config.shard_channel_capacity));
    let group_mesh = crate::group::router::group_mesh(&config);
    let pin = config.shards <= available_cores();
    let mut executors = Vec::with_capacity(config.shards);
    for index in 0..config.shards {
        let placement = if pin {
            Placement::Fixed(index)
        } else {
            Placement::Unbound
        };
        let (config, registry, mesh, stop) =
            (config.clone(), registry.clone(), mesh.clone(), stop.clone());
        let group_mesh = group_mesh.clone();
        let executor = LocalExecutorBuilder::new(placement)
            .name(&format!("rill-shard-{index}"))
            .io_memory(config.io_memory_bytes)
            .spawn(move || async move {
                let result = shard_main(config, registry, mesh, group_mesh, stop.clone()).await;
                if result.is_err() {
                    // Take the other shards down too: a broker missing a shard is broken.
                    stop.store(true, Ordering::SeqCst);
                }
                result
            })
            .map_err(|e| anyhow::anyhow!("starting executor for shard {index}: {e}"))?;
        executors.push(executor);
    }
    let mut first_error = None;
    for executor in executors {
        let result = executor
            .join()
            .map_err(|e| anyhow::anyhow!("shard executor failed: {e}"))
            .and_then(|r| r);
        if let Err(e) = result {
            tracing::error!(error = %e, "shard stopped with an error");
            stop.store(true, Ordering::SeqCst);
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

async fn shard_main(
    config: Arc<BrokerConfig>,
    registry: Arc<TopicRegistry>,
    mesh: Option<MeshBuilder<ShardMsg, glommio::channels::channel_mesh::Full>>,
    group_mesh: Option<crate::group::router::GroupMesh>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let (senders, receivers) = match mesh {
        Some(mesh) => {
            let (s, r) = mesh
                .join()
                .await
                .map_err(|_| anyhow::anyhow!("channel mesh join failed"))?;
            (Some(s), Some(r))
        }
        None => (None, None),
    };
    let id = senders.as_ref().map_or(0, |s| s.peer_id());
    let (groups, group_router) = crate::group::router::start(&config, group_mesh).await?;
    let log_manager = Rc::new(LogManager::new(
        GlommioStorage::new(),
        config.data_dir.clone(),
    ));
    let clock: Rc<dyn Clock> = Rc::new(SystemClock);
    let table = Rc::new(PartitionTable::new(
        log_manager,
        registry.clone(),
        config.clone(),
        clock,
    ));
    if let Some(mut receivers) = receivers {
        let permits = Rc::new(Semaphore::new(REMOTE_REQUESTS_MAX));
        for (_, stream) in receivers.streams() {
            glommio::spawn_local(serve_peer(stream, table.clone(), permits.clone())).detach();
        }
    }
    let shards = config.shards;
    table.open_owned(|topic, partition| owner_shard(topic, partition, shards) == id);
    let inflight_bytes = Rc::new(Semaphore::new(config.shard_inflight_bytes_max as u64));
    let shard = Rc::new(Shard {
        id,
        shards,
        config: config.clone(),
        registry,
        table,
        mesh: senders,
        inflight_bytes,
        groups,
        group_router,
    });
    let shutdown = Rc::new(ShutdownSignal::default());
    glommio::spawn_local(watch_stop_flag(stop, shutdown.clone())).detach();
    let (groups, signal) = (shard.groups.clone(), shutdown.clone());
    glommio::spawn_local(async move {
        signal.wait().await;
        groups.release_waiters(); // parked JoinGroups must not hold up the drain
    })
    .detach();
    let listener = TcpListener::bind(config.listen)
        .map_err(|e| anyhow::anyhow!("shard {id}: binding {}: {e}", config.listen))?;
    let local = listener
        .local_addr()
        .map_err(|e| anyhow::anyhow!("local address: {e}"))?;
    tracing::info!(shard = id, "listening on {local}");
    accept_loop(listener, shard.clone(), shutdown).await;
    shard.table.close_all().await;
    shard.groups.journal().close().await;
    tracing::info!(shard = id, "shard stopped; partition logs closed");
    Ok(())
}

async fn watch_stop_flag(stop: Arc<AtomicBool>, shutdown: Rc<ShutdownSignal>) {
    while !stop.load(Ordering::SeqCst) {
        glommio::timer::sleep(STOP_POLL).await;
    }
    shutdown.fire();
}
