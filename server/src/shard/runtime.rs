//! Start one pinned glommio executor per shard, connect them by channel meshes, serve until the
//! stop flag turns, then close every log cleanly.
//!
//! Start-up never waits for a wake-up: the meshes are built here on the main thread and each
//! shard connects its ends around a [`Rendezvous`] of the shard threads (see [`super::mesh`] for
//! the glommio executor bug this avoids); the same rendezvous, polled on a timer so that shards
//! keep serving each other, holds every shard until all can serve, then they listen. A failed shard, a stop signal or [`STARTUP_TIMEOUT`] abandons the
//! rendezvous, so no shard waits in it for good, and `rill` exits with an error rather than hang.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::future::{select, Either};
use glommio::net::TcpListener;
use glommio::sync::Semaphore;
use glommio::{LocalExecutorBuilder, Placement};
use rill_engine::io::glommio::GlommioStorage;
use rill_engine::io::{Clock, SystemClock};
use rill_engine::read_cache::ReadCache;
use rill_engine::LogManager;
use rill_types::TopicPartitionRef;

use super::rendezvous::{Abandoned, Rendezvous};
use super::router::{self, Router, RouterEnds, RouterLinks, RouterMesh, REMOTE_REQUESTS_MAX};
use super::Shard;
use crate::admin::shard::ShardLocal;
use crate::admin::state::AdminState;
use crate::client_quotas::ClientRates;
use crate::cluster::{deletions, ClusterView};
use crate::config::{available_cores, BrokerConfig};
use crate::group::{GroupCall, GroupReply};
use crate::memory_budget::ByteBudget;
use crate::net::listener::accept_loop;
use crate::net::quotas::ConnectionQuotas;
use crate::partition::ops::{PartitionCall, PartitionReply};
use crate::partition::table::PartitionTable;
use crate::shard::owner::owner_shard;
use crate::shutdown::ShutdownSignal;
use crate::topics::TopicRegistry;
use crate::txn::ops::{TxnCall, TxnReply};
use crate::txn::runtime::RemoteTxns;

/// How often a shard looks at the process-wide stop flag (set by the signal handler thread):
/// how soon SIGTERM starts a shard's drain. Start-up does not depend on it.
const STOP_POLL: Duration = Duration::from_millis(50);
/// How long a stopping shard waits for its blocking jobs (a topics.json fsync under heavy
/// writeback can take seconds) before its executor goes anyway.
const BLOCKING_DRAIN_MAX: Duration = Duration::from_secs(30);

/// Longest a start-up may take until every shard listens; past it `rill` exits with an error
/// instead of hanging (a supervisor can restart it).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// How long shards get to wind down after a stop signal that arrived during start-up.
const STARTUP_STOP_GRACE: Duration = Duration::from_secs(5);

/// How long the other shards get to close their logs after one died, before the process exits
/// without them.
const SHARD_DEATH_GRACE: Duration = Duration::from_secs(5);

/// How long a probe connect to our own port may take before the port counts as free.
const PORT_PROBE_TIMEOUT: Duration = Duration::from_millis(200);

/// How often a prepared shard looks whether all the others are.
const PREPARED_POLL: Duration = Duration::from_millis(1);

/// How often the main thread looks at start-up progress.
const STARTUP_POLL: Duration = Duration::from_millis(10);

/// Process-wide start-up progress shared by the main thread and the shards.
#[derive(Debug)]
struct Startup {
    /// Shards whose listener is bound.
    listening: AtomicUsize,
    /// Shards past their part of start-up that wait for the others before they bind.
    prepared: AtomicUsize,
    /// The shard threads' barrier (meshes connected, all prepared).
    rendezvous: Rendezvous,
}

impl Startup {
    fn new(shards: usize) -> Self {
        Startup {
            listening: AtomicUsize::new(0),
            prepared: AtomicUsize::new(0),
            rendezvous: Rendezvous::new(shards),
        }
    }
}

/// Abandons start-up when a shard's thread leaves its body, by any path (an error, a panic, a
/// stop): no other shard may wait for it in the rendezvous then. Harmless once start-up is over.
struct AbandonOnExit(Arc<Startup>);

impl Drop for AbandonOnExit {
    fn drop(&mut self) {
        self.0.rendezvous.abandon();
    }
}

/// One shard's ends of the meshes (`None` with one shard).
struct ShardEnds {
    partitions: Option<RouterEnds<PartitionCall, PartitionReply>>,
    groups: Option<RouterEnds<GroupCall, GroupReply>>,
    txns: Option<RouterEnds<TxnCall, TxnReply>>,
}

/// One shard's connected mesh links (`None` with one shard).
struct ShardLinks {
    partitions: Option<RouterLinks<PartitionCall, PartitionReply>>,
    groups: Option<RouterLinks<GroupCall, GroupReply>>,
    txns: Option<RouterLinks<TxnCall, TxnReply>>,
}

impl ShardEnds {
    /// Each shard's ends of the meshes (none with one shard).
    fn all(config: &BrokerConfig) -> Vec<ShardEnds> {
        let mut meshes = (config.shards > 1).then(|| {
            let capacity = config.shard_channel_capacity;
            (
                RouterMesh::<PartitionCall, PartitionReply>::new(config.shards, capacity),
                RouterMesh::<GroupCall, GroupReply>::new(config.shards, capacity),
                RouterMesh::<TxnCall, TxnReply>::new(config.shards, capacity),
            )
        });
        (0..config.shards)
            .map(|shard| ShardEnds {
                partitions: meshes.as_mut().map(|m| m.0.take(shard)),
                groups: meshes.as_mut().map(|m| m.1.take(shard)),
                txns: meshes.as_mut().map(|m| m.2.take(shard)),
            })
            .collect()
    }

    /// Connects every router's meshes (blocking: see [`super::mesh::MeshEnds::connect`]).
    fn connect(self, rendezvous: &Rendezvous) -> Result<ShardLinks, Abandoned> {
        Ok(ShardLinks {
            partitions: self.partitions.map(|e| e.connect(rendezvous)).transpose()?,
            groups: self.groups.map(|e| e.connect(rendezvous)).transpose()?,
            txns: self.txns.map(|e| e.connect(rendezvous)).transpose()?,
        })
    }
}

/// Every shard must bind the same ports: picks the free ones asked for (port 0) now, and waits
/// for the others to be free.
fn pick_ports(config: &mut BrokerConfig, stop: &Arc<AtomicBool>) -> anyhow::Result<()> {
    let mut listeners = Vec::new();
    for listener in &config.listeners.all {
        let mut listener = (**listener).clone();
        if listener.bind.port() == 0 {
            let probe =
                std::net::TcpListener::bind(listener.bind).context("picking a free port")?;
            listener.bind = probe.local_addr()?;
            if listener.advertise_port == 0 {
                listener.advertise_port = listener.bind.port();
            }
        } else {
            wait_port_free(listener.bind, stop)?;
        }
        listeners.push(Arc::new(listener));
    }
    config.listeners.all = listeners;
    let first = config.listeners.all[0].clone();
    config.listen = first.bind;
    config.advertise_port = first.advertise_port;
    Ok(())
}

/// Run the broker until `stop` turns true; returns after every shard closed its logs.
pub fn run(mut config: BrokerConfig, stop: Arc<AtomicBool>) -> anyhow::Result<()> {
    // glommio opens directories (io_uring, `Directory::open`) without the process's working
    // directory, so a relative data dir (the default `./rill-data`) fails there: anchor it now.
    config.data_dir = std::path::absolute(&config.data_dir)
        .with_context(|| format!("resolving data dir {}", config.data_dir.display()))?;
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
    pick_ports(&mut config, &stop)?;
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
    // A restarted broker learns the current leaders before its shards take partition roles
    // and listen (however long that takes); its admin listener answers meanwhile (not ready).
    // Stopped before that, it never serves.
    let catch_up = view
        .as_ref()
        .map(|v| crate::cluster::catch_up_before_serving(v, &stop));
    if catch_up == Some(crate::cluster::CatchUp::Stopped) {
        admin.health.stopping.store(true, Ordering::Relaxed);
        return cluster.map_or(Ok(()), crate::cluster::ClusterRuntime::shutdown);
    }
    crate::test_hooks::install(&config.test_hooks);
    let startup = Arc::new(Startup::new(config.shards));
    // Each executor holds a clone until its thread ends (even by panic): when all are gone,
    // `finished` disconnects.
    let (running, finished) = mpsc::channel::<()>();
    let ends = ShardEnds::all(&config);
    let connections = ConnectionQuotas::new(config.connection_quota_limits());
    let client_rates = Arc::new(
        ClientRates::new(config.quota_window)
            .with_controller_window(config.controller_quota_window),
    );
    let shared = Shared {
        config: &config,
        registry: &registry,
        admin: &admin,
        cluster: &view,
        connections: &connections,
        client_rates: &client_rates,
    };
    let executors = spawn_shards(shared, &stop, &startup, &running, ends);
    drop(running);
    let started = executors.and_then(|executors| {
        Ok((
            wait_for_startup(&startup, config.shards, &stop, &finished)?,
            executors,
        ))
    });
    let served = match started {
        Ok(((), executors)) => join_shards(executors, &stop),
        Err(e) => Err(e),
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

/// What every shard shares with the process.
#[derive(Clone, Copy)]
struct Shared<'a> {
    config: &'a Arc<BrokerConfig>,
    registry: &'a Arc<TopicRegistry>,
    admin: &'a Arc<AdminState>,
    /// The cluster this broker belongs to (`None` on a single node).
    cluster: &'a Option<Arc<ClusterView>>,
    /// `max.connections` and `max.connections.per.ip`, counted over every shard.
    connections: &'a Arc<ConnectionQuotas>,
    /// Every client's byte rates (client quotas), measured over every shard.
    client_rates: &'a Arc<ClientRates>,
}

fn spawn_shards(
    shared: Shared<'_>,
    stop: &Arc<AtomicBool>,
    startup: &Arc<Startup>,
    running: &mpsc::Sender<()>,
    ends: Vec<ShardEnds>,
) -> anyhow::Result<Vec<ShardExecutor>> {
    let config = shared.config;
    let pin = config.shards <= available_cores();
    let mut executors = Vec::with_capacity(config.shards);
    for (index, ends) in ends.into_iter().enumerate() {
        let placement = if pin {
            Placement::Fixed(index)
        } else {
            Placement::Unbound
        };
        let (config, registry) = (config.clone(), shared.registry.clone());
        let admin = shared.admin.clone();
        let cluster = shared.cluster.clone();
        let connections = shared.connections.clone();
        let client_rates = shared.client_rates.clone();
        let (shard_startup, running) = (startup.clone(), running.clone());
        let shard_stop = stop.clone();
        let executor = LocalExecutorBuilder::new(placement)
            .name(&format!("rill-shard-{index}"))
            .io_memory(config.io_memory_bytes)
            .spawn(move || async move {
                let _running = running;
                let startup = shard_startup;
                let _abandon = AbandonOnExit(startup.clone());
                // First of all, so that metrics and liveness cover start-up too.
                let observer = crate::admin::shard::install(index, admin);
                let result = shard_main(
                    config,
                    (registry, cluster, connections, client_rates),
                    ends,
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
                startup.rendezvous.abandon();
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
            startup.rendezvous.abandon(); // shards blocked in it cannot see the stop flag
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
                startup.rendezvous.abandon();
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

/// Waits for every shard to end, in whatever order they end. A shard that ends before the
/// stop flag turned (a panic outside any request, an error) ends the broker: the others are
/// stopped, given [`SHARD_DEATH_GRACE`] to close their logs, and the process then exits with an
/// error either way. A broker missing a shard serves nothing of that shard's partitions, groups
/// and connections while it looks alive: it must not outlive it.
fn join_shards(executors: Vec<ShardExecutor>, stop: &AtomicBool) -> anyhow::Result<()> {
    let shards = executors.len();
    let (ended, endings) = mpsc::channel();
    for (index, executor) in executors.into_iter().enumerate() {
        let ended = ended.clone();
        // join() blocks: one watcher thread per shard, so the first shard to end is seen at
        // once, whatever its index.
        let watcher = std::thread::Builder::new()
            .name(format!("rill-watch-{index}"))
            .spawn(move || {
                let result = executor
                    .join()
                    .map_err(|e| anyhow::anyhow!("shard {index} executor failed: {e}"))
                    .and_then(|r| r);
                let _ = ended.send((index, result));
            });
        if let Err(e) = watcher {
            stop.store(true, Ordering::SeqCst);
            return Err(anyhow::anyhow!(
                "starting the watcher of shard {index}: {e}"
            ));
        }
    }
    drop(ended);
    let mut first_error = None;
    let mut deadline: Option<Instant> = None;
    for _ in 0..shards {
        let ending = match deadline {
            None => endings.recv().map_err(|_| ()),
            Some(deadline) => endings
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .map_err(|_| ()),
        };
        let Ok((index, result)) = ending else {
            // Past the grace: the rest may be stuck on the dead shard; exit without them.
            let e = first_error.unwrap_or_else(|| anyhow::anyhow!("a shard died"));
            tracing::error!(error = %e, "shards did not stop within {SHARD_DEATH_GRACE:?}; exiting");
            std::process::exit(1);
        };
        let unexpected = !stop.swap(true, Ordering::SeqCst);
        let result = match (result, unexpected) {
            (Ok(()), true) => Err(anyhow::anyhow!("shard {index} stopped unasked")),
            (result, _) => result,
        };
        if let Err(e) = result {
            tracing::error!(
                shard = index,
                error = %e,
                "a shard died; the broker cannot serve without it: stopping the others"
            );
            deadline.get_or_insert(Instant::now() + SHARD_DEATH_GRACE);
            first_error.get_or_insert(e);
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The shard's share of tiered storage when the broker enables it (`crate::tiered`).
fn shard_tier(config: &BrokerConfig) -> anyhow::Result<Option<Rc<crate::tiered::tier::ShardTier>>> {
    let settings = &config.remote;
    if !settings.system_enable {
        return Ok(None);
    }
    let s3 = crate::tiered::store::s3_client(settings)
        .map_err(|e| anyhow::anyhow!("the remote tier's object store: {e}"))?;
    Ok(Some(Rc::new(crate::tiered::tier::ShardTier {
        store: crate::tiered::store::RemoteStore::new(s3, settings.requests_per_shard),
        indexes: Default::default(),
        settings: settings.clone(),
        pacer: crate::tiered::pacer::CopyPacer::new(
            settings
                .copy_bytes_per_second
                .map(|rate| (rate / config.shards as u64).max(1)),
        ),
    })))
}

async fn shard_main(
    config: Arc<BrokerConfig>,
    (registry, cluster, connections, client_rates): (
        Arc<TopicRegistry>,
        Option<Arc<ClusterView>>,
        Arc<ConnectionQuotas>,
        Arc<ClientRates>,
    ),
    ends: ShardEnds,
    stop: Arc<AtomicBool>,
    startup: Arc<Startup>,
    observer: Rc<ShardLocal>,
) -> anyhow::Result<()> {
    // Watch the stop flag from the first moment: a signal during start-up must end it.
    let shutdown = Rc::new(ShutdownSignal::default());
    glommio::spawn_local(watch_stop_flag(stop, shutdown.clone())).detach();
    let Ok(links) = ends.connect(&startup.rendezvous) else {
        tracing::info!("start-up abandoned before the meshes connected: shard not started");
        return Ok(());
    };
    let prepare = Box::pin(prepare_shard(
        config.clone(),
        (registry, cluster, client_rates),
        links,
    ));
    let (shard, txn_inbox, mut serving) = match select(prepare, Box::pin(shutdown.wait())).await {
        Either::Left((prepared, _)) => prepared?,
        Either::Right(_) => {
            tracing::info!("stop signal during start-up: shard not started");
            return Ok(());
        }
    };
    let groups = shard.groups.clone();
    observer.set_group_source(move || groups.snapshot());
    let txns = shard.txns.clone();
    observer.set_txn_source(move || txns.count_by_state());
    let budgets = (shard.request_bytes.clone(), shard.fetch_bytes.clone());
    observer.set_budget_source(move || [budgets.0.stats(), budgets.1.stats()]);
    if let Some(cluster) = &shard.cluster {
        let topics = cluster.topics_at_start().clone();
        let (table, registry) = (shard.table.clone(), shard.registry.clone());
        let shape = (shard.id, shard.shards);
        let follow = deletions::follow(table.clone(), registry, topics, shape, shutdown.clone());
        glommio::spawn_local(follow).detach();
        let moved = deletions::follow_replicas(table, cluster.clone(), shape, shutdown.clone());
        glommio::spawn_local(moved).detach();
        let replicas = crate::replication::manager::open_followed(
            shard.table.clone(),
            cluster.clone(),
            shape,
            shutdown.clone(),
        );
        glommio::spawn_local(replicas).detach();
    }
    let (groups, signal) = (shard.groups.clone(), shutdown.clone());
    glommio::spawn_local(async move {
        signal.wait().await;
        groups.release_waiters(); // parked JoinGroups must not hold up the drain
    })
    .detach();
    // Transactions act through the shard: served from now on.
    let txns = RemoteTxns::new(&shard.txns, &shard);
    serving.push(serve_inbox(txn_inbox, Rc::new(txns)));
    crate::txn::runtime::run_timers(&shard.txns, &shard);
    crate::txn::runtime::follow_leadership(&shard.txns, &shard);
    // Finish transactions decided before a crash (markers, group offsets) before clients come:
    // a consumer must not read the offsets of a group from before a commit it cannot see yet.
    shard.txns.tick(&*shard).await;
    startup.prepared.fetch_add(1, Ordering::SeqCst);
    // Listen only once every shard can serve: a request forwarded to a shard still starting
    // would wait on it (or on its partitions) while the client already counts its timeout.
    if all_prepared(&startup.rendezvous).await.is_ok() {
        listen_all(&config, &shard, shutdown, connections, &startup).await?;
    }
    shard.table.close_all().await;
    shard.groups.journal().close().await;
    shard.txns.journal().close().await;
    // Other shards' calls still waiting here answer "unavailable" rather than wait for good.
    for serving in &serving {
        serving.stop().await;
    }
    drain_blocking_jobs(&shard).await;
    tracing::info!(shard = shard.id, "shard stopped; partition logs closed");
    Ok(())
}

/// A blocking job left by a request that stopped waiting must answer before the shard's
/// executor goes (see `shard::blocking`); waits for them, bounded.
async fn drain_blocking_jobs<S: rill_engine::io::Storage + 'static>(shard: &Shard<S>) {
    if !shard.blocking_jobs.drained(BLOCKING_DRAIN_MAX).await {
        let running = shard.blocking_jobs.running();
        tracing::warn!(
            shard = shard.id,
            running,
            "blocking jobs still running at stop"
        );
    }
}

/// Binds every listener on this shard and accepts on all of them until shutdown.
async fn listen_all<S: rill_engine::io::Storage + 'static>(
    config: &BrokerConfig,
    shard: &Rc<Shard<S>>,
    shutdown: Rc<ShutdownSignal>,
    connections: Arc<ConnectionQuotas>,
    startup: &Startup,
) -> anyhow::Result<()> {
    let mut loops = Vec::new();
    for listener in &config.listeners.all {
        let socket = TcpListener::bind(listener.bind)
            .map_err(|e| anyhow::anyhow!("shard {}: binding {}: {e}", shard.id, listener.bind))?;
        let local = socket
            .local_addr()
            .map_err(|e| anyhow::anyhow!("local address: {e}"))?;
        tracing::info!(
            shard = shard.id,
            listener = %listener.name,
            protocol = listener.protocol.name(),
            "listening on {local}"
        );
        let (shard, shutdown, connections) = (shard.clone(), shutdown.clone(), connections.clone());
        loops.push(accept_loop(
            socket,
            listener.clone(),
            shard,
            shutdown,
            connections,
        ));
    }
    startup.listening.fetch_add(1, Ordering::SeqCst);
    crate::admin::shard::hooks::listening();
    crate::test_hooks::maybe_kill_shard_later(shard.id);
    futures::future::join_all(loops).await;
    Ok(())
}

/// Other shards' transaction calls, to be served once the shard exists.
type TxnInbox = router::Inbox<TxnCall, TxnReply>;

/// Start the group and transaction coordinators, open the owned partitions, serve other
/// shards' partition and group requests (transaction ones need the shard: see [`TxnInbox`]).
/// The storage and the clock are chosen here, at the glommio edge, and handed in below.
async fn prepare_shard(
    config: Arc<BrokerConfig>,
    (registry, cluster, client_rates): (
        Arc<TopicRegistry>,
        Option<Arc<ClusterView>>,
        Arc<ClientRates>,
    ),
    links: ShardLinks,
) -> anyhow::Result<(Rc<Shard<GlommioStorage>>, TxnInbox, Vec<router::Serving>)> {
    let id = links.partitions.as_ref().map_or(0, RouterLinks::shard);
    let clock: Rc<dyn Clock> = Rc::new(SystemClock);
    let read_cache = Rc::new(ReadCache::with_write_through(
        config.read_cache_bytes_per_shard(),
        config.read_cache_write_through,
    ));
    read_cache
        .flush_gate()
        .set_piece_bytes(config.read_ahead_hold_piece_bytes);
    if let Some(observer) = crate::admin::shard::local() {
        let cache = read_cache.clone();
        observer.set_read_cache_source(move || {
            let s = cache.stats();
            (s.hits + s.hits_loading, s.misses, cache.bytes() as u64)
        });
    }
    let log_manager = Rc::new(
        LogManager::new(GlommioStorage::new(), config.data_dir.clone())
            .with_read_cache(read_cache)
            .with_prealloc_budget(config.shard_prealloc_bytes_max),
    );
    let tier = shard_tier(&config)?;
    let table = Rc::new(
        PartitionTable::new(log_manager, registry.clone(), config.clone(), clock.clone())
            .with_cluster(cluster.clone())
            .with_tier(tier),
    );
    // In a cluster the coordinators write through the table (`crate::internal_topics::replicated`).
    let internal = || cluster.clone().map(|c| (table.clone(), c));
    let storage = (id, GlommioStorage::new());
    let groups = crate::group::runtime::start(&config, storage, clock.clone(), internal()).await?;
    let (group_router, serving_groups) = route(links.groups, &groups);
    let storage = (id, GlommioStorage::new());
    let txns = crate::txn::runtime::start(&config, storage, clock.clone(), internal()).await?;
    let (txn_router, txn_inbox) = connect_router(links.txns);
    if cluster.is_none() {
        serve_internal_logs(&table, &groups, &txns);
    }
    let (partitions, serving_partitions) = route(links.partitions, &table);
    let shards = config.shards;
    // In a cluster, only partitions this broker leads live here.
    let leads = |tp: TopicPartitionRef<'_>| cluster.as_ref().is_none_or(|c| c.leads(tp));
    table
        .open_owned(|tp| owner_shard(tp, shards) == id && leads(tp))
        .await;
    let request_bytes = ByteBudget::new(config.shard_request_bytes_max());
    let fetch_bytes = ByteBudget::new(config.shard_fetch_bytes_max as u64);
    let shard = Shard {
        id,
        shards,
        config,
        registry,
        table,
        partitions,
        request_bytes,
        fetch_bytes,
        groups,
        group_router,
        cluster,
        txns,
        txn_router,
        client_rates,
        blocking_jobs: Rc::default(),
    };
    let serving = vec![serving_groups, serving_partitions];
    Ok((Rc::new(shard), txn_inbox, serving))
}

/// On a single node: the internal topics' partitions this shard owns are its coordinators'
/// private logs, which its table serves read-only (`crate::internal_topics::single_node`).
fn serve_internal_logs<S: rill_engine::io::Storage + 'static>(
    table: &PartitionTable<S>,
    groups: &crate::group::runtime::ShardCoordinator<S>,
    txns: &crate::txn::runtime::ShardTxnCoordinator<S>,
) {
    use crate::partition::internal::InternalLog;
    if let crate::group::runtime::ShardJournal::Private(journal) = groups.journal() {
        for (partition, log) in journal.logs() {
            let log = InternalLog::new(log.clone());
            let tp = TopicPartitionRef::new(crate::group::OFFSETS_TOPIC, partition);
            table.serve_internal(tp, log);
        }
    }
    if let crate::txn::runtime::ShardTxnJournal::Private(journal) = txns.journal() {
        for (partition, log) in journal.logs() {
            let log = InternalLog::new(log.clone());
            let tp = TopicPartitionRef::new(crate::txn::TXN_TOPIC, partition);
            table.serve_internal(tp, log);
        }
    }
}

/// The router over `links` (a single-shard router without), serving other shards' requests
/// with `service`, at most [`REMOTE_REQUESTS_MAX`] at once (stop it before the shard leaves).
fn route<Req, Rep, S>(
    links: Option<RouterLinks<Req, Rep>>,
    service: &Rc<S>,
) -> (Router<Req, Rep>, router::Serving)
where
    Req: Send + 'static,
    Rep: Send + 'static,
    S: router::Service<Req, Reply = Rep> + 'static,
{
    let (router, receivers) = connect_router(links);
    let serving = serve_inbox(receivers, service.clone());
    (router, serving)
}

/// The router over `links` (a single-shard router without), and the receivers of other shards'
/// requests.
fn connect_router<Req: Send + 'static, Rep: Send + 'static>(
    links: Option<RouterLinks<Req, Rep>>,
) -> (Router<Req, Rep>, router::Inbox<Req, Rep>) {
    match links {
        Some(links) => Router::over(links),
        None => (Router::single(), Vec::new()),
    }
}

/// Serves other shards' requests from `receivers` with `service`, at most
/// [`REMOTE_REQUESTS_MAX`] at once, until stopped.
fn serve_inbox<Req, Rep, S>(receivers: router::Inbox<Req, Rep>, service: Rc<S>) -> router::Serving
where
    Req: Send + 'static,
    Rep: Send + 'static,
    S: router::Service<Req, Reply = Rep> + 'static,
{
    let permits = Rc::new(Semaphore::new(REMOTE_REQUESTS_MAX));
    router::serve(receivers, service, permits)
}

/// Resolves once every shard is past its part of start-up, or start-up was abandoned. Polled on
/// a timer rather than blocking the thread like the mesh connect: meanwhile this shard must
/// serve the others, whose transaction coordinators may still be finishing decided
/// transactions with this shard's partitions and groups. A timer always fires, so this wait
/// cannot be lost (see [`super::mesh`] for the one that could).
async fn all_prepared(rendezvous: &Rendezvous) -> Result<(), Abandoned> {
    let ticket = rendezvous.arrive()?;
    while !rendezvous.passed(ticket)? {
        glommio::timer::sleep(PREPARED_POLL).await;
    }
    Ok(())
}

async fn watch_stop_flag(stop: Arc<AtomicBool>, shutdown: Rc<ShutdownSignal>) {
    while !stop.load(Ordering::SeqCst) {
        glommio::timer::sleep(STOP_POLL).await;
    }
    crate::admin::shard::hooks::stopping();
    shutdown.fire();
}
