//! Sockets of the metadata quorum, on plain threads with blocking `std::net` (metadata traffic is
//! a few messages a second; glommio stays with the shards and the client path):
//!
//! - the controller listener: one thread accepts, one thread per connection reads frames
//!   ([`rill_metadata::wire`]) and hands them to the quorum loop; Kafka clients that land here
//!   are refused by their first 8 bytes and disconnected, never crash the node;
//! - [`Peers`]: one sender thread per other voter with a bounded queue; a full queue or a dead
//!   link drops raft messages, which Raft resends;
//! - [`connect`]: a bounded connect for the broker agent.
//!
//! `std::net::TcpListener` does not set SO_REUSEPORT (glommio's does), so a second process on
//! the same controller port fails at start instead of sharing it.

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use rill_metadata::request::ControllerResponse;
use rill_metadata::types::NodeId;
use rill_metadata::wire::{WireError, WireMessage};
use rill_metadata::RaftMessage;

use rustls::{ClientConfig, ServerConfig};

use super::controller_stream::{ControllerStream, SharedReader};
use super::events::QuorumEvent;

/// Connections the controller listener serves at once (voters, brokers); more are closed.
pub const CONNECTIONS_MAX: usize = 256;
/// A controller connection silent this long is closed (peers and brokers send every second).
const IDLE_MAX: Duration = Duration::from_secs(60);
/// Bound on connecting to a controller.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Bound on one frame write.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);
/// Raft messages queued per peer before new ones are dropped.
const PEER_QUEUE_MAX: usize = 1024;
/// How often blocked loops look at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

/// Answers one request on the connection it came from.
#[derive(Clone)]
pub struct Replier {
    stream: Arc<ControllerStream>,
    id: u64,
}

impl Replier {
    /// Write the answer (a broken connection just drops it: the broker retries).
    pub fn send(self, response: ControllerResponse) {
        let frame = WireMessage::Response {
            id: self.id,
            response,
        }
        .encode();
        if let Err(e) = self.stream.write_frame(&frame) {
            tracing::debug!(error = %e, "controller answer not delivered");
        }
    }
}

/// Bind the controller listener now (so a port in use fails the start with context).
pub fn bind(address: SocketAddr, node: NodeId) -> anyhow::Result<TcpListener> {
    TcpListener::bind(address).map_err(|e| {
        anyhow::anyhow!(
            "controller listener {address}: {e} (is another node with node.id={node}, or another \
             process, using it?)"
        )
    })
}

/// Accept until `stop`, one reader thread per connection (each a TLS one with `tls`).
pub fn serve(
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
    quorum: Sender<QuorumEvent>,
    stop: Arc<AtomicBool>,
) {
    if let Err(e) = listener.set_nonblocking(true) {
        tracing::error!(error = %e, "controller listener cannot poll; not serving");
        return;
    }
    let open = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                if open.fetch_add(1, Ordering::SeqCst) >= CONNECTIONS_MAX {
                    open.fetch_sub(1, Ordering::SeqCst);
                    tracing::warn!(%peer, "controller listener full: closing a connection");
                    continue;
                }
                let (quorum, open, tls) = (quorum.clone(), open.clone(), tls.clone());
                let spawned = std::thread::Builder::new()
                    .name("rill-ctl-conn".into())
                    .spawn(move || {
                        read_connection(stream, peer, tls.as_ref(), &quorum);
                        open.fetch_sub(1, Ordering::SeqCst);
                    });
                if let Err(e) = spawned {
                    tracing::warn!(error = %e, "no thread for a controller connection");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(STOP_POLL),
            Err(e) => {
                tracing::warn!(error = %e, "controller accept failed");
                std::thread::sleep(STOP_POLL);
            }
        }
    }
}

fn read_connection(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<&Arc<ServerConfig>>,
    quorum: &Sender<QuorumEvent>,
) {
    let setup = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(IDLE_MAX)))
        .and_then(|()| stream.set_write_timeout(Some(WRITE_TIMEOUT)))
        .and_then(|()| stream.set_nodelay(true));
    if let Err(e) = setup {
        tracing::debug!(%peer, error = %e, "controller connection setup failed");
        return;
    }
    let writer = match ControllerStream::accept(stream, tls) {
        Ok(stream) => Arc::new(stream),
        Err(e) => {
            // A plaintext or unauthenticated peer on a TLS controller listener lands here.
            tracing::warn!(%peer, error = %e, "controller connection refused: TLS handshake failed");
            return;
        }
    };
    let mut reader = std::io::BufReader::new(SharedReader(writer.clone()));
    loop {
        let event = match WireMessage::read_from(&mut reader) {
            Ok(WireMessage::Raft(message)) => QuorumEvent::Raft(message),
            Ok(WireMessage::Request { id, request }) => QuorumEvent::Request {
                request,
                reply: Replier {
                    stream: writer.clone(),
                    id,
                },
            },
            Ok(WireMessage::Response { .. }) => continue,
            Err(WireError::NotController(magic)) => {
                tracing::warn!(
                    %peer,
                    ?magic,
                    "not a controller frame (a Kafka client on the controller listener?): closing"
                );
                return;
            }
            Err(WireError::Io(e)) => {
                tracing::debug!(%peer, error = %e, "controller connection closed");
                return;
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "bad controller frame: closing");
                return;
            }
        };
        if quorum.send(event).is_err() {
            return; // the quorum loop stopped
        }
    }
}

/// Connect to a controller at `address` (`host:port`), bounded; over TLS with `tls`.
pub fn connect(
    address: &str,
    tls: Option<&Arc<ClientConfig>>,
) -> std::io::Result<ControllerStream> {
    let target = address
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{address} resolves to nothing")))?;
    let stream = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT)?;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ControllerStream::connect(stream, tls, host)
}

/// Outbound raft links to the other voters.
pub struct Peers {
    links: Vec<(NodeId, SyncSender<RaftMessage>)>,
}

impl Peers {
    /// One sender thread per voter in `voters` other than `me`; failures are reported to the
    /// quorum loop as [`QuorumEvent::Unreachable`].
    pub fn start(
        me: NodeId,
        voters: &[(NodeId, String)],
        tls: Option<&Arc<ClientConfig>>,
        quorum: &Sender<QuorumEvent>,
    ) -> Self {
        let links = voters
            .iter()
            .filter(|(id, _)| *id != me)
            .map(|(id, address)| {
                let (tx, rx) = mpsc::sync_channel(PEER_QUEUE_MAX);
                let (id, address, quorum) = (*id, address.clone(), quorum.clone());
                let tls = tls.cloned();
                std::thread::Builder::new()
                    .name(format!("rill-raft-to-{id}"))
                    .spawn(move || send_loop(id, &address, tls.as_ref(), &rx, &quorum))
                    .expect("spawning a raft sender thread");
                (id, tx)
            })
            .collect();
        Self { links }
    }

    /// Queue `message` for the voter it is addressed to (dropped if that queue is full).
    pub fn send(&self, message: RaftMessage) {
        let Some(to) = NodeId::from_raft_id(message.to) else {
            return;
        };
        if let Some((_, link)) = self.links.iter().find(|(id, _)| *id == to) {
            match link.try_send(message) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) => {
                    tracing::debug!(to = to.0, "raft queue full: dropped")
                }
            }
        }
    }
}

fn send_loop(
    to: NodeId,
    address: &str,
    tls: Option<&Arc<ClientConfig>>,
    queue: &Receiver<RaftMessage>,
    quorum: &Sender<QuorumEvent>,
) {
    let mut stream: Option<ControllerStream> = None;
    while let Ok(message) = queue.recv() {
        if stream.is_none() {
            match connect(address, tls) {
                Ok(s) => stream = Some(s),
                Err(e) => {
                    tracing::debug!(to = to.0, address, error = %e, "voter unreachable");
                    let _ = quorum.send(QuorumEvent::Unreachable(to));
                    // Drop what queued up meanwhile: raft resends what still matters.
                    std::thread::sleep(Duration::from_millis(100));
                    while queue.try_recv().is_ok() {}
                    continue;
                }
            }
        }
        let frame = WireMessage::Raft(message).encode();
        let written = stream.as_ref().map(|s| s.write_frame(&frame));
        if let Some(Err(e)) = written {
            tracing::debug!(to = to.0, error = %e, "raft link broken");
            stream = None;
            let _ = quorum.send(QuorumEvent::Unreachable(to));
        }
    }
}
