//! The broker's side of KIP-631, on one thread: it keeps a connection to the active controller
//! and, over it,
//!
//! - registers this broker (once per process start) and heartbeats every
//!   `broker.heartbeat.interval.ms` with how far it applied the metadata log (the controller
//!   unfences it once it caught up, fences it when heartbeats stop);
//! - on stop, asks to be fenced at once (controlled shutdown), so clients move on immediately;
//! - keeps a block of producer ids in the topic registry (ids unique across brokers);
//! - on a broker that is not a voter (an observer), fetches the metadata image;
//! - forwards the handlers' requests (CreateTopics, ...) and hands back the answers.
//!
//! A NOT_CONTROLLER answer names the controller (or not): the request is resent there (or to the
//! next voter). Every request carries a deadline; past it the handler gets REQUEST_TIMED_OUT. A
//! controller that lets a request time out (hung, stopped, partitioned) is left: the connection
//! is dropped and what is in flight goes to the next voter. Heartbeats time out after one
//! heartbeat interval, so a stuck controller costs a broker well under its session timeout.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rill_metadata::controller::PRODUCER_ID_BLOCK;
use rill_metadata::record::BrokerIdentity;
use rill_metadata::request::{ControllerRequest, ControllerResponse};
use rill_metadata::types::{BrokerEpoch, Endpoint, NodeId};
use rill_metadata::wire::WireMessage;
use rill_types::ErrorCode;
use uuid::Uuid;

use super::events::{AgentEvent, Reply};

use super::controller_stream::{ControllerStream, SharedReader};
use super::mirror::mirror;
use super::transport::connect;
use super::view::ClusterView;
use crate::topics::TopicRegistry;

/// How long a forwarded request may wait for a controller's answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause before retrying a registration or a connection.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// How often an observer asks for a newer image ("visible within a second").
const IMAGE_FETCH_EVERY: Duration = Duration::from_millis(200);
/// How long a controlled shutdown waits for the controller to fence this broker.
const SHUTDOWN_WAIT_MAX: Duration = Duration::from_secs(3);
/// Longest sleep of the loop (it also looks at the stop flag).
const LOOP_WAIT_MAX: Duration = Duration::from_millis(50);

enum Purpose {
    Handler(Reply),
    Register,
    Heartbeat { shutting_down: bool },
    ProducerIds,
    FetchImage,
}

struct Inflight {
    request: ControllerRequest,
    purpose: Purpose,
    deadline: Instant,
    /// The connection it was last written to.
    sent_on: Option<u64>,
}

struct Connection {
    id: u64,
    node: NodeId,
    stream: Arc<ControllerStream>,
}

/// This broker's registration.
struct Registration {
    identity: BrokerIdentity,
    epoch: Option<BrokerEpoch>,
    fenced: bool,
    shut_down: bool,
}

/// The agent (see the module doc).
pub struct Agent {
    view: Arc<ClusterView>,
    registry: Arc<TopicRegistry>,
    voters: Vec<(NodeId, String)>,
    events: Receiver<AgentEvent>,
    events_tx: Sender<AgentEvent>,
    connection: Option<Connection>,
    /// The controller to try next (a hint from NOT_CONTROLLER, else rotating over voters).
    target: Option<NodeId>,
    rotation: usize,
    next_connect: Instant,
    next_conn_id: u64,
    next_request_id: u64,
    inflight: BTreeMap<u64, Inflight>,
    registration: Registration,
    next_heartbeat: Instant,
    next_image_fetch: Instant,
    is_broker: bool,
    is_observer: bool,
    /// Set once the controlled shutdown began.
    stopping: bool,
}

impl Agent {
    /// An agent for this node (`endpoint`: its advertised inter-broker listener; `listeners`:
    /// every advertised listener by name).
    pub fn new(
        view: Arc<ClusterView>,
        registry: Arc<TopicRegistry>,
        (endpoint, listeners): (Endpoint, BTreeMap<String, Endpoint>),
        log_dir_id: Uuid,
    ) -> (Self, Sender<AgentEvent>) {
        let (events_tx, events) = std::sync::mpsc::channel();
        let config = view.config().clone();
        let replica_secret_sha256 = Some(view.replica_secret_sha256());
        let now = Instant::now();
        let agent = Self {
            voters: config
                .voters
                .iter()
                .map(|v| (v.id, v.address.clone()))
                .collect(),
            view,
            registry,
            events,
            events_tx: events_tx.clone(),
            connection: None,
            target: None,
            rotation: 0,
            next_connect: now,
            next_conn_id: 0,
            next_request_id: 0,
            inflight: BTreeMap::new(),
            registration: Registration {
                identity: BrokerIdentity {
                    node_id: config.node_id,
                    incarnation_id: Uuid::new_v4(),
                    log_dir_id,
                    endpoint,
                    listeners,
                    rack: None,
                    replica_secret_sha256,
                },
                epoch: None,
                fenced: true,
                shut_down: false,
            },
            next_heartbeat: now,
            next_image_fetch: now,
            is_broker: config.roles.broker,
            is_observer: !config.roles.controller,
            stopping: false,
        };
        (agent, events_tx)
    }

    /// Serve until `stop`, then shut down in a controlled way (bounded).
    pub fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            self.step(LOOP_WAIT_MAX);
        }
        if self.is_broker && self.registration.epoch.is_some() {
            self.controlled_shutdown();
        }
        for (_, inflight) in std::mem::take(&mut self.inflight) {
            if let Purpose::Handler(reply) = inflight.purpose {
                answer(reply, stopping());
            }
        }
    }

    fn step(&mut self, wait: Duration) {
        match self.events.recv_timeout(wait) {
            Ok(event) => self.handle(event),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => unreachable!("the agent holds a sender"),
        }
        while let Ok(event) = self.events.try_recv() {
            self.handle(event);
        }
        self.timers();
        self.flush();
    }

    fn controlled_shutdown(&mut self) {
        self.stopping = true;
        let deadline = Instant::now() + SHUTDOWN_WAIT_MAX;
        self.heartbeat(true);
        while Instant::now() < deadline && !self.registration.shut_down {
            self.step(LOOP_WAIT_MAX);
        }
        tracing::info!(
            fenced = self.registration.shut_down,
            "controlled shutdown: the controller fenced this broker"
        );
    }

    fn handle(&mut self, event: AgentEvent) {
        match event {
            AgentEvent::Submit { request, reply } => {
                self.send(request, Purpose::Handler(reply));
            }
            AgentEvent::Response { conn, id, response } => {
                if self.connection.as_ref().is_some_and(|c| c.id == conn) {
                    self.on_response(id, response);
                }
            }
            AgentEvent::Closed { conn } => {
                if self.connection.as_ref().is_some_and(|c| c.id == conn) {
                    self.drop_connection();
                }
            }
        }
    }

    fn timers(&mut self) {
        let now = Instant::now();
        let expired: Vec<u64> = self
            .inflight
            .iter()
            .filter(|(_, i)| i.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            let inflight = self.inflight.remove(&id).expect("listed above");
            if inflight.sent_on.is_some()
                && inflight.sent_on == self.connection.as_ref().map(|c| c.id)
            {
                // This controller did not answer in time: try another.
                let node = self.connection.as_ref().map(|c| c.node.0);
                tracing::info!(
                    ?node,
                    "controller did not answer in time: trying another voter"
                );
                self.drop_connection();
            }
            self.settle(inflight.purpose, timed_out());
        }
        if self.is_broker {
            self.keep_registered(now);
        }
        if self.is_observer
            && now >= self.next_image_fetch
            && !self.has(|p| matches!(p, Purpose::FetchImage))
        {
            self.next_image_fetch = now + IMAGE_FETCH_EVERY;
            let applied_index = self.view.applied_index();
            self.send(
                ControllerRequest::FetchImage { applied_index },
                Purpose::FetchImage,
            );
        }
    }

    fn keep_registered(&mut self, now: Instant) {
        let registering = self.has(|p| matches!(p, Purpose::Register));
        if self.registration.epoch.is_none() {
            if !registering && now >= self.next_heartbeat {
                self.next_heartbeat = now + RETRY_PAUSE;
                self.register();
            }
            return;
        }
        if now >= self.next_heartbeat && !self.has(|p| matches!(p, Purpose::Heartbeat { .. })) {
            // Fenced and not stopping (just registered, catching up): ask again soon, so the
            // controller unfences this broker as soon as it caught up.
            let interval = if self.registration.fenced && !self.stopping {
                RETRY_PAUSE
            } else {
                Duration::from_millis(self.view.config().heartbeat_interval_ms)
            };
            self.next_heartbeat = now + interval;
            self.heartbeat(false);
        }
        let low = self.registry.producer_ids_left() < PRODUCER_ID_BLOCK / 2;
        if low && !self.has(|p| matches!(p, Purpose::ProducerIds)) {
            let node_id = self.view.node_id();
            self.send(
                ControllerRequest::AllocateProducerIds { node_id },
                Purpose::ProducerIds,
            );
        }
    }

    fn register(&mut self) {
        let request = ControllerRequest::RegisterBroker(self.registration.identity.clone());
        self.send(request, Purpose::Register);
    }

    fn heartbeat(&mut self, shutting_down: bool) {
        let Some(broker_epoch) = self.registration.epoch else {
            return;
        };
        let request = ControllerRequest::BrokerHeartbeat {
            node_id: self.view.node_id(),
            broker_epoch,
            applied_index: self.view.applied_index(),
            want_shut_down: shutting_down,
        };
        self.send(request, Purpose::Heartbeat { shutting_down });
    }

    fn has(&self, purpose: impl Fn(&Purpose) -> bool) -> bool {
        self.inflight.values().any(|i| purpose(&i.purpose))
    }

    fn send(&mut self, request: ControllerRequest, purpose: Purpose) {
        let id = self.next_request_id;
        self.next_request_id += 1;
        let timeout = match purpose {
            Purpose::Heartbeat { .. } | Purpose::Register | Purpose::FetchImage => {
                Duration::from_millis(self.view.config().heartbeat_interval_ms)
            }
            Purpose::Handler(_) | Purpose::ProducerIds => REQUEST_TIMEOUT,
        };
        let inflight = Inflight {
            request,
            purpose,
            deadline: Instant::now() + timeout,
            sent_on: None,
        };
        self.inflight.insert(id, inflight);
        self.flush();
    }

    /// Write every request not yet written on the current connection (connecting if needed;
    /// a dropped connection marks every request unsent).
    fn flush(&mut self) {
        let unsent: Vec<u64> = self
            .inflight
            .iter()
            .filter(|(_, i)| i.sent_on.is_none())
            .map(|(id, _)| *id)
            .collect();
        if unsent.is_empty() || !self.ensure_connected() {
            return;
        }
        for id in unsent {
            let inflight = self.inflight.get_mut(&id).expect("listed above");
            let frame = WireMessage::Request {
                id,
                request: inflight.request.clone(),
            }
            .encode();
            let connection = self.connection.as_mut().expect("connected above");
            inflight.sent_on = Some(connection.id);
            if let Err(e) = connection.stream.write_frame(&frame) {
                tracing::debug!(node = connection.node.0, error = %e, "controller link broken");
                self.drop_connection();
                return;
            }
        }
    }

    fn ensure_connected(&mut self) -> bool {
        if self.connection.is_some() {
            return true;
        }
        if Instant::now() < self.next_connect {
            return false;
        }
        let node = self.target.take().unwrap_or_else(|| {
            self.rotation += 1;
            self.voters[self.rotation % self.voters.len()].0
        });
        let Some((_, address)) = self.voters.iter().find(|(id, _)| *id == node).cloned() else {
            return false;
        };
        let tls = self.view.controller_tls().map(|t| &t.client);
        match connect(&address, tls) {
            Ok(stream) => {
                let stream = Arc::new(stream);
                let id = self.next_conn_id;
                self.next_conn_id += 1;
                spawn_reader(SharedReader(stream.clone()), id, self.events_tx.clone());
                self.connection = Some(Connection { id, node, stream });
                true
            }
            Err(e) => {
                tracing::debug!(node = node.0, address, error = %e, "controller unreachable");
                self.next_connect = Instant::now() + RETRY_PAUSE;
                false
            }
        }
    }

    fn drop_connection(&mut self) {
        if let Some(connection) = self.connection.take() {
            let _ = connection
                .stream
                .socket()
                .shutdown(std::net::Shutdown::Both);
        }
        for inflight in self.inflight.values_mut() {
            inflight.sent_on = None;
        }
    }

    fn on_response(&mut self, id: u64, response: ControllerResponse) {
        if let ControllerResponse::NotController { leader } = response {
            let here = self.connection.as_ref().map(|c| c.node);
            self.view.set_controller(leader);
            self.target = leader.filter(|l| Some(*l) != here);
            self.drop_connection();
            if leader.is_none() {
                self.next_connect = Instant::now() + RETRY_PAUSE;
            }
            return;
        }
        let Some(inflight) = self.inflight.remove(&id) else {
            return;
        };
        self.view
            .set_controller(self.connection.as_ref().map(|c| c.node));
        self.settle(inflight.purpose, response);
    }

    fn settle(&mut self, purpose: Purpose, response: ControllerResponse) {
        match purpose {
            Purpose::Handler(reply) => answer(reply, response),
            Purpose::Register => self.on_registered(response),
            Purpose::Heartbeat { shutting_down } => self.on_heartbeat(response, shutting_down),
            Purpose::ProducerIds => {
                if let ControllerResponse::ProducerIds { first, count } = response {
                    self.registry.add_producer_id_block(first, count);
                }
            }
            Purpose::FetchImage => {
                if let ControllerResponse::Image { image: Some(image) } = response {
                    let image = Arc::new(*image);
                    if let Err(e) = mirror(&self.registry, &image) {
                        tracing::error!(error = %e, "cannot mirror the metadata into the registry");
                    }
                    self.view.publish(image);
                }
            }
        }
    }

    fn on_registered(&mut self, response: ControllerResponse) {
        match response {
            ControllerResponse::Registered { broker_epoch } => {
                tracing::info!(
                    broker_epoch = broker_epoch.0,
                    "registered with the controller"
                );
                self.registration.epoch = Some(broker_epoch);
                self.view.set_registered(broker_epoch);
                self.next_heartbeat = Instant::now();
            }
            ControllerResponse::Error {
                error_code: ErrorCode::DuplicateBrokerRegistration,
                message,
            } => {
                self.view.fail(format!(
                    "node.id={} is already used by another live broker: {message}. Give each \
                     node its own node.id (if this node's data directory was replaced, wait \
                     broker.session.timeout.ms before restarting it)",
                    self.view.node_id()
                ));
            }
            other => tracing::debug!(?other, "registration not accepted yet; retrying"),
        }
    }

    fn on_heartbeat(&mut self, response: ControllerResponse, shutting_down: bool) {
        match response {
            ControllerResponse::Heartbeat {
                fenced,
                should_shut_down,
            } => {
                if fenced != self.registration.fenced {
                    tracing::info!(fenced, "broker fencing changed");
                }
                self.registration.fenced = fenced;
                if shutting_down && should_shut_down {
                    self.registration.shut_down = true;
                } else if shutting_down {
                    self.heartbeat(true);
                }
            }
            ControllerResponse::Error {
                error_code: ErrorCode::StaleBrokerEpoch | ErrorCode::BrokerIdNotRegistered,
                ..
            } => {
                tracing::info!("the controller lost this registration: registering again");
                self.registration.epoch = None;
            }
            other => tracing::debug!(?other, "heartbeat not answered"),
        }
    }
}

fn answer(reply: Reply, response: ControllerResponse) {
    match reply {
        Reply::Future(sender) => {
            let _ = sender.send(response);
        }
        Reply::Callback(done) => done(response),
    }
}

fn timed_out() -> ControllerResponse {
    ControllerResponse::error(ErrorCode::RequestTimedOut, "no controller answered in time")
}

fn stopping() -> ControllerResponse {
    ControllerResponse::error(ErrorCode::RequestTimedOut, "this broker is stopping")
}

fn spawn_reader(stream: SharedReader, conn: u64, events: Sender<AgentEvent>) {
    let spawned = std::thread::Builder::new()
        .name("rill-ctl-client".into())
        .spawn(move || {
            let mut reader = std::io::BufReader::new(stream);
            loop {
                match WireMessage::read_from(&mut reader) {
                    Ok(WireMessage::Response { id, response }) => {
                        if events
                            .send(AgentEvent::Response { conn, id, response })
                            .is_err()
                        {
                            return;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => {
                        let _ = events.send(AgentEvent::Closed { conn });
                        return;
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "no thread for a controller connection");
    }
}

/// This data directory's id (KIP-858's `directory.id`), kept with `node.id` in
/// `<data-dir>/meta.properties` as Kafka does: a restarted broker presents the same id; a data
/// directory written by another `node.id` is refused (a misconfiguration, named).
pub fn log_dir_id(data_dir: &Path, node_id: NodeId) -> anyhow::Result<Uuid> {
    const FILE: &str = "meta.properties";
    let path = data_dir.join(FILE);
    if let Ok(text) = std::fs::read_to_string(&path) {
        let map: BTreeMap<String, String> = java_properties::read(text.as_bytes())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            .into_iter()
            .collect();
        let stored_node = map.get("node.id").and_then(|v| v.parse::<i32>().ok());
        if stored_node != Some(node_id.0) {
            anyhow::bail!(
                "node.id={node_id} but the data directory {} belongs to node.id={}",
                data_dir.display(),
                map.get("node.id").map_or("?", |v| v.as_str())
            );
        }
        let id = map
            .get("directory.id")
            .and_then(|v| Uuid::parse_str(v).ok());
        return id.ok_or_else(|| anyhow::anyhow!("{}: no directory.id", path.display()));
    }
    let id = Uuid::new_v4();
    let text = format!("version=1\nnode.id={}\ndirectory.id={id}\n", node_id.0);
    crate::topics::write_atomically(data_dir, FILE, text.as_bytes())?;
    Ok(id)
}
