//! Kafka requests this broker sends to another broker's inter-broker listener, as Kafka brokers do
//! for transactions: WriteTxnMarkers from a transaction coordinator to partition leaders and
//! group coordinators, the verify-only AddPartitionsToTxn from a partition leader back to the
//! coordinator (KIP-890).
//!
//! Each request is bounded by [`PEER_REQUEST_TIMEOUT`], connection included. Connections are
//! kept for the next request ([`IDLE_PER_PEER`] idle ones per peer and shard, each for at most
//! [`IDLE_FOR`]), as a Kafka broker keeps its connections to the others: over SASL_SSL a new
//! one costs a TLS handshake and a login (SCRAM: thousands of PBKDF2 rounds). A connection is
//! kept only after a whole exchange succeeded; any failure drops it and is a retriable error
//! code for the caller (the coordinator retries markers every tick; a producer retries its
//! append).

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use rill_metadata::types::Endpoint;
use rill_protocol::frame::REQUEST_BYTES_MAX_DEFAULT;
use rill_protocol::kafka_protocol::protocol::Request;
use rill_protocol::ErrorCode;

use super::peer_connect::{connect, PeerConnection, PeerError};
use crate::security::peer_client::PeerClient;

/// How long one request to a peer may take, connection included.
pub const PEER_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The client id peers see in their logs.
const CLIENT_ID: &str = "rill-broker";

/// Send `request` at `version` to the broker at `endpoint` (over its inter-broker listener, as
/// `client` says) and decode its answer. NETWORK_EXCEPTION if it cannot be reached or answers
/// nothing sensible in time.
pub async fn call<R: Request>(
    client: &PeerClient,
    endpoint: &Endpoint,
    version: i16,
    request: &R,
) -> Result<R::Response, ErrorCode> {
    let exchange = exchange(client, endpoint, version, request);
    let why =
        match glommio::timer::timeout(PEER_REQUEST_TIMEOUT, async { Ok(exchange.await) }).await {
            Ok(Ok(response)) => return Ok(response),
            Ok(Err(why)) => why.to_string(),
            Err(_) => format!("no answer within {PEER_REQUEST_TIMEOUT:?}"),
        };
    let (host, port) = (&endpoint.host, endpoint.port);
    tracing::warn!(%host, port, api = R::KEY, %why, "request to a peer broker failed");
    Err(ErrorCode::NetworkException)
}

async fn exchange<R: Request>(
    client: &PeerClient,
    endpoint: &Endpoint,
    version: i16,
    request: &R,
) -> Result<R::Response, PeerError> {
    let key = (endpoint.host.clone(), endpoint.port);
    if let Some(mut kept) = take_idle(&key) {
        match kept.call(version, request, REQUEST_BYTES_MAX_DEFAULT).await {
            Ok(response) => {
                give_back(key, kept);
                return Ok(response);
            }
            // The peer restarted or closed it meanwhile: once more on a new connection, as
            // the caller would retry (markers and verifications may be sent again).
            Err(e) => {
                tracing::debug!(error = %e, "a kept connection to a peer failed; reconnecting")
            }
        }
    }
    let mut connection = connect(client, endpoint, CLIENT_ID, PEER_REQUEST_TIMEOUT).await?;
    let response = connection
        .call(version, request, REQUEST_BYTES_MAX_DEFAULT)
        .await?;
    // Dropped instead when the exchange failed or timed out (the future, and it, dropped):
    // what is left on such a connection is unknown.
    give_back(key, connection);
    Ok(response)
}

/// Idle connections kept per peer broker (by this shard).
pub const IDLE_PER_PEER: usize = 4;

/// How long a connection may wait idle for its next request: well under a peer's
/// `connections.max.idle.ms` (Kafka's default 10 minutes), so a kept one is rarely closed by
/// the peer first.
pub const IDLE_FOR: Duration = Duration::from_secs(30);

/// A peer broker's address, as the pool keys it.
type PeerKey = (String, u16);

/// This shard's idle connections (a glommio thread is one shard, and its sockets belong to it).
#[derive(Default)]
struct Idle {
    by_peer: HashMap<PeerKey, Vec<(PeerConnection, Instant)>>,
}

impl Drop for Idle {
    fn drop(&mut self) {
        // Run when the shard's thread exits, after its executor: a socket dropped then would
        // reach for a reactor that is gone. The process is ending; the kernel closes them.
        for (_, connections) in self.by_peer.drain() {
            for connection in connections {
                std::mem::forget(connection);
            }
        }
    }
}

thread_local! {
    static IDLE: RefCell<Idle> = RefCell::new(Idle::default());
}

/// The most recently used idle connection to `key` still young enough, if any (stale ones are
/// dropped, which closes them).
fn take_idle(key: &PeerKey) -> Option<PeerConnection> {
    IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        let kept = idle.by_peer.get_mut(key)?;
        kept.retain(|(c, since)| since.elapsed() < IDLE_FOR && c.reusable());
        kept.pop().map(|(connection, _)| connection)
    })
}

/// Keeps `connection` for the next request to `key`, unless it is retired or as many are kept
/// already (then it is dropped, which closes it).
fn give_back(key: PeerKey, connection: PeerConnection) {
    if !connection.reusable() {
        return;
    }
    IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        let kept = idle.by_peer.entry(key).or_default();
        if kept.len() < IDLE_PER_PEER {
            kept.push((connection, Instant::now()));
        }
        debug_assert!(kept.len() <= IDLE_PER_PEER);
    });
}
