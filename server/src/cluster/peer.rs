//! Kafka requests this broker sends to another broker's inter-broker listener, as Kafka brokers do
//! for transactions: WriteTxnMarkers from a transaction coordinator to partition leaders and
//! group coordinators, the verify-only AddPartitionsToTxn from a partition leader back to the
//! coordinator (KIP-890).
//!
//! One request per connection, bounded by [`PEER_REQUEST_TIMEOUT`]: these are per-transaction
//! control messages, not the data path, and a fresh loopback connection costs far less than
//! the `fdatasync` each marker waits for. Any failure is a retriable error code for the caller
//! (the coordinator retries markers every tick; a producer retries its append).

use std::time::Duration;

use rill_metadata::types::Endpoint;
use rill_protocol::frame::REQUEST_BYTES_MAX_DEFAULT;
use rill_protocol::kafka_protocol::protocol::Request;
use rill_protocol::ErrorCode;

use super::peer_connect::{connect, PeerError};
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
    let mut connection = connect(client, endpoint, CLIENT_ID, PEER_REQUEST_TIMEOUT).await?;
    let response = connection
        .call(version, request, REQUEST_BYTES_MAX_DEFAULT)
        .await;
    connection.close().await;
    response
}
