//! Start one pinned glommio executor per shard, join them into a channel mesh, serve until the
//! stop flag turns, then close every log cleanly.
//!
//! Start-up is bounded: the main thread watches it and gives up with an error when the shards do
//! not all listen within [`STARTUP_TIMEOUT`], and a stop signal during start-up ends it (each
//! shard watches the stop flag from its first moment, not only once it serves).

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::future::{select, Either};
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::net::TcpListener;
use glommio::sync::Semaphore;
use glommio::{LocalExecutorBuilder, Placement};
use rill_engine::io::glommio::GlommioStorage;
use rill_engine::io::{Clock, SystemClock};
use rill_engine::read_cache::ReadCache;
use rill_engine::LogManager;

use super::mesh::{serve_peer, REMOTE_REQUESTS_MAX};
use super::Shard;
use crate::admin::shard::ShardLocal;
use crate::admin::state::AdminState;
use crate::cluster::{deletions, ClusterView};
use crate::config::{available_cores, BrokerConfig};
use crate::group::router::GroupMesh;
use crate::txn::router::TxnMesh;

/// The coordinators' channel meshes (groups, transactions); `None`s with one shard.
type CoordinatorMeshes = (Option<GroupMesh>, Option<TxnMesh>);
use crate::net::listener::accept_loop;
use crate::partition::ops::ShardMsg;
use crate::partition::table::PartitionTable;
use crate::routing::owner_shard;
use crate::shutdown::ShutdownSignal;
use crate::topics::TopicRegistry;

/// How often a shard looks at the process-wide stop flag. The timer also wakes a shard's
/// reactor at least this often, so no shard parks indefinitely while it waits on a peer.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Longest a start-up may take until every shard listens; past it `rill` exits with an error
/// instead of hanging (a supervisor can restart it).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long shards get to wind down after a stop signal that arrived during start-up.
const STARTUP_STOP_GRACE: Duration = Duration::from_secs(5);

/// How long a probe connect to our own port may take before the port counts as free.
const PORT_PROBE_TIMEOUT: Duration = Duration::from_millis(200);

/// How often the main thread looks at start-up progress.
const STARTUP_POLL: Duration = Duration::from_millis(10);

/// Process-wide start-up progress shared by the main thread and the shards.
#[derive(Debug, Default)]
struct Startup {
    /// Shards whose listener is bound.
    listening: AtomicUsize,
    /// Shards past their part of start-up that wait for the others before they bind.
    prepared: AtomicUsize,
}

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
    if config.cluster.as_ref().is_some_and(|c| !c.roles.broker) {
        return run_controller_only(&config, &registry, &stop);
    }
    if config.listen.port() == 0 {
        // Every shard must bind the same port: pick one now.
        let probe = std::net::TcpListener::bind(config.listen).context("picking a free port")?;
        config.listen = probe.local_addr()?;
        if config.advertise_port == 0 {
            config.advertise_port = config.listen.port();
        }
    } else {
        wait_port_free(config.listen, &stop)?;
    }
    // The cluster side starts first: a voter publishes the metadata it holds before any shard
    // opens a partition, so each shard opens only those this broker leads.
    let cluster = crate::cluster::start(&config, &registry, &stop)?;
    let view = cluster.as_ref().map(|c| c.view.clone());
    let config = Arc::new(config);
    let admin = AdminState::new(&config, registry.clone());
    if let Some(view) = &view {
        admin.set_cluster(view.clone());
    }
    crate::admin::start(&config, &admin)?;
    let startup = Arc::new(Startup::default());
    // Each executor holds a clone until its thread ends (even by panic): when all are gone,
    // `finished` disconnects.
    let (running, finished) = mpsc::channel::<()>();
    // The mesh builders share a plain `Rc` across executors (glommio's design): the originals
    // stay alive here so that no drop on this thread races the shards' own.
    let mesh = (config.shards > 1)
        .then(|| MeshBuilder::<ShardMsg, _>::full(config.shards, config.shard_channel_capacity));
    let group_mesh = (
        crate::group::router::group_mesh(&config),
        crate::txn::router::txn_mesh(&config),
    );
    let meshes = (&mesh, &group_mesh);
    let shared = Shared {
        config: &config,
        registry: &registry,
        admin: &admin,
        cluster: &view,
    };
    let executors = spawn_shards(shared, &stop, &startup, &running, meshes);
    drop(running);
    let started = executors.and_then(|executors| {
        Ok((
            wait_for_startup(&startup, config.shards, &stop, &finished)?,
            executors,
        ))
    });
    let served = match started {
        Ok(((), executors)) => join_shards(executors, &stop),
        Err(e) => {
            // Shards may still run (stuck): leave them the builders rather than race their drop.
            std::mem::forget((mesh, group_mesh));
            Err(e)
        }
    };
    match cluster {
        Some(cluster) => served.and(cluster.shutdown()),
        None => served,
    }
}

/// A node with `process.roles=controller`: the metadata quorum only, no client listener.
fn run_controller_only(
    config: &BrokerConfig,
    registry: &Arc<TopicRegistry>,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let cluster = crate::cluster::start(config, registry, stop)?
        .ok_or_else(|| anyhow::anyhow!("a controller needs controller.quorum.voters"))?;
    let admin = AdminState::controller_only(config, registry.clone());
    admin.set_cluster(cluster.view.clone());
    crate::admin::start(config, &admin)?;
    tracing::info!("controller only: no client listener");
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(STOP_POLL);
    }
    admin.health.stopping.store(true, Ordering::Relaxed);
    cluster.shutdown()
}

/// Wait until nothing else listens on `addr`. The shards bind with SO_REUSEPORT, which would
/// silently share the port with another listener: a second broker, or the listener of a broker
/// killed a moment ago, which the kernel keeps accepting on (and then resets) until the dead
/// process's io_uring is torn down, tens of milliseconds after its death.
fn wait_port_free(addr: std::net::SocketAddr, stop: &AtomicBool) -> anyhow::Result<()> {
    let mut target = addr;
    if target.ip().is_unspecified() {
        target.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    // A connect that succeeds means some socket listens there now.
    while std::net::TcpStream::connect_timeout(&target, PORT_PROBE_TIMEOUT).is_ok() {
        if Instant::now() >= deadline || stop.load(Ordering::SeqCst) {
            return Err(anyhow::anyhow!(
                "{addr} is in use: another process listens on it"
            ));
        }
        std::thread::sleep(STARTUP_POLL);
    }
    Ok(())
}

type ShardExecutor = glommio::ExecutorJoinHandle<anyhow::Result<()>>;
type PartitionMesh = MeshBuilder<ShardMsg, glommio::channels::channel_mesh::Full>;

/// What every shard shares with the process.
#[derive(Clone, Copy)]
struct Shared<'a> {
    config: &'a Arc<BrokerConfig>,
    registry: &'a Arc<TopicRegistry>,
    admin: &'a Arc<AdminState>,
    /// The cluster this broker belongs to (`None` on a single node).
    cluster: &'a Option<Arc<ClusterView>>,
}

fn spawn_shards(
    shared: Shared<'_>,
    stop: &Arc<AtomicBool>,
    startup: &Arc<Startup>,
    running: &mpsc::Sender<()>,
    (mesh, group_mesh): (&Option<PartitionMesh>, &CoordinatorMeshes),
) -> anyhow::Result<Vec<ShardExecutor>> {
    let config = shared.config;
    let pin = config.shards <= available_cores();
    let mut executors = Vec::with_capacity(config.shards);
    for index in 0..config.shards {
        let placement = if pin {
            Placement::Fixed(index)
        } else {
            Placement::Unbound
        };
        let (config, registry, mesh) = (config.clone(), shared.registry.clone(), mesh.clone());
        let admin = shared.admin.clone();
        let cluster = shared.cluster.clone();
        let (group_mesh, startup, running) = (group_mesh.clone(), startup.clone(), running.clone());
        let shard_stop = stop.clone();
        let executor = LocalExecutorBuilder::new(placement)
            .name(&format!("rill-shard-{index}"))
            .io_memory(config.io_memory_bytes)
            .spawn(move || async move {
                let _running = running;
                // First of all, so that metrics and liveness cover start-up too.
                let observer = crate::admin::shard::install(index, admin);
                let result = shard_main(
                    config,
                    (registry, cluster),
                    mesh,
                    group_mesh,
                    shard_stop.clone(),
                    startup,
                    observer,
                )
                .await;
                if result.is_err() {
                    // Take the other shards down too: a broker missing a shard is broken.
                    shard_stop.store(true, Ordering::SeqCst);
                }
                result
            });
        match executor {
            Ok(executor) => executors.push(executor),
            Err(e) => {
                // The shards already started must not wait for this one forever.
                stop.store(true, Ordering::SeqCst);
                return Err(anyhow::anyhow!("starting executor for shard {index}: {e}"));
            }
        }
    }
    Ok(executors)
}

/// Block until every shard listens, the shards all ended (an error, reported by the join), or a
/// stop signal ended start-up. Errors when start-up overruns [`STARTUP_TIMEOUT`] or shards do not
/// wind down after a stop: the caller then returns without joining the stuck threads (the
/// process exits), so a start-up can never hang.
fn wait_for_startup(
    startup: &Startup,
    shards: usize,
    stop: &AtomicBool,
    finished: &mpsc::Receiver<()>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if startup.listening.load(Ordering::SeqCst) == shards {
            tracing::info!(shards, "all shards listening");
            return Ok(());
        }
        if stop.load(Ordering::SeqCst) {
            return match finished.recv_timeout(STARTUP_STOP_GRACE) {
                Err(mpsc::RecvTimeoutError::Disconnected) => Ok(()),
                _ => Err(anyhow::anyhow!(
                    "stopped during start-up, but shards did not wind down within {:?}",
                    STARTUP_STOP_GRACE
                )),
            };
        }
        match finished.recv_timeout(STARTUP_POLL) {
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            _ if Instant::now() < deadline => {}
            _ => {
                stop.store(true, Ordering::SeqCst);
                return Err(anyhow::anyhow!(
                    "start-up did not finish within {:?}: {} of {shards} shards listening, {} \
                     past start-up; giving up",
                    STARTUP_TIMEOUT,
                    startup.listening.load(Ordering::SeqCst),
                    startup.prepared.load(Ordering::SeqCst),
                ));
            }
        }
    }
}

fn join_shards(executors: Vec<ShardExecutor>, stop: &AtomicBool) -> anyhow::Result<()> {
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
    (registry, cluster): (Arc<TopicRegistry>, Option<Arc<ClusterView>>),
    mesh: Option<PartitionMesh>,
    group_mesh: CoordinatorMeshes,
    stop: Arc<AtomicBool>,
    startup: Arc<Startup>,
    observer: Rc<ShardLocal>,
) -> anyhow::Result<()> {
    // Watch the stop flag from the first moment: a signal during start-up must end it.
    let shutdown = Rc::new(ShutdownSignal::default());
    glommio::spawn_local(watch_stop_flag(stop, shutdown.clone())).detach();
    let prepare = Box::pin(prepare_shard(
        config.clone(),
        (registry, cluster),
        mesh,
        group_mesh,
    ));
    let shard = match select(prepare, Box::pin(shutdown.wait())).await {
        Either::Left((shard, _)) => shard?,
        Either::Right(_) => {
            tracing::info!("stop signal during start-up: shard not started");
            return Ok(());
        }
    };
    let groups = shard.groups.clone();
    observer.set_group_source(move || groups.snapshot());
    let txns = shard.txns.clone();
    observer.set_txn_source(move || txns.count_by_state());
    if let Some(cluster) = &shard.cluster {
        let topics = cluster.topics_at_start().clone();
        let (table, registry) = (shard.table.clone(), shard.registry.clone());
        let shape = (shard.id, shard.shards);
        let follow = deletions::follow(table, registry, topics, shape, shutdown.clone());
        glommio::spawn_local(follow).detach();
    }
    let (groups, signal) = (shard.groups.clone(), shutdown.clone());
    glommio::spawn_local(async move {
        signal.wait().await;
        groups.release_waiters(); // parked JoinGroups must not hold up the drain
    })
    .detach();
    crate::txn::router::serve(&shard.txns, &shard.txn_router, &shard);
    // Finish transactions decided before a crash (markers, group offsets) before clients come:
    // a consumer must not read the offsets of a group from before a commit it cannot see yet.
    shard.txns.tick(&*shard).await;
    startup.prepared.fetch_add(1, Ordering::SeqCst);
    // Listen only once every shard can serve: a request forwarded to a shard still starting
    // would wait on it (or on its partitions) while the client already counts its timeout.
    let all_prepared = Box::pin(wait_all_prepared(&startup, config.shards));
    let prepared = matches!(
        select(all_prepared, Box::pin(shutdown.wait())).await,
        Either::Left(_)
    );
    if prepared {
        let listener = TcpListener::bind(config.listen)
            .map_err(|e| anyhow::anyhow!("shard {}: binding {}: {e}", shard.id, config.listen))?;
        let local = listener
            .local_addr()
            .map_err(|e| anyhow::anyhow!("local address: {e}"))?;
        tracing::info!(shard = shard.id, "listening on {local}");
        startup.listening.fetch_add(1, Ordering::SeqCst);
        crate::admin::shard::hooks::listening();
        accept_loop(listener, shard.clone(), shutdown).await;
    }
    shard.table.close_all().await;
    shard.groups.journal().close().await;
    shard.txns.journal().close().await;
    tracing::info!(shard = shard.id, "shard stopped; partition logs closed");
    Ok(())
}

/// Join the meshes, start the group and transaction coordinators and open the owned partitions.
async fn prepare_shard(
    config: Arc<BrokerConfig>,
    (registry, cluster): (Arc<TopicRegistry>, Option<Arc<ClusterView>>),
    mesh: Option<PartitionMesh>,
    (group_mesh, txn_mesh): CoordinatorMeshes,
) -> anyhow::Result<Rc<Shard<GlommioStorage>>> {
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
    let (txns, txn_router) = crate::txn::router::start(&config, txn_mesh).await?;
    let read_cache = Rc::new(ReadCache::new(config.read_cache_bytes));
    if let Some(observer) = crate::admin::shard::local() {
        let cache = read_cache.clone();
        observer.set_read_cache_source(move || {
            let s = cache.stats();
            (s.hits + s.hits_loading, s.misses)
        });
    }
    let log_manager = Rc::new(
        LogManager::new(GlommioStorage::new(), config.data_dir.clone())
            .with_read_cache(read_cache)
            .with_prealloc_budget(config.shard_prealloc_bytes_max),
    );
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
    // In a cluster, only partitions this broker leads live here.
    let leads = |topic: &str, partition| cluster.as_ref().is_none_or(|c| c.leads(topic, partition));
    table.open_owned(|topic, partition| {
        owner_shard(topic, partition, shards) == id && leads(topic, partition)
    });
    let inflight_bytes = Rc::new(Semaphore::new(config.shard_inflight_bytes_max as u64));
    Ok(Rc::new(Shard {
        id,
        shards,
        config,
        registry,
        table,
        mesh: senders,
        inflight_bytes,
        groups,
        group_router,
        cluster,
        txns,
        txn_router,
    }))
}

/// Resolves once every shard is past its part of start-up (a barrier across executors; polled,
/// as it runs once per start).
async fn wait_all_prepared(startup: &Startup, shards: usize) {
    while startup.prepared.load(Ordering::SeqCst) < shards {
        glommio::timer::sleep(Duration::from_millis(2)).await;
    }
}

async fn watch_stop_flag(stop: Arc<AtomicBool>, shutdown: Rc<ShutdownSignal>) {
    while !stop.load(Ordering::SeqCst) {
        glommio::timer::sleep(STOP_POLL).await;
    }
    crate::admin::shard::hooks::stopping();
    shutdown.fire();
}
