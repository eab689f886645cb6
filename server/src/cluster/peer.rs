//! Kafka requests this broker sends to another broker's client listener, as Kafka brokers do
//! for transactions: WriteTxnMarkers from a transaction coordinator to partition leaders and
//! group coordinators, the verify-only AddPartitionsToTxn from a partition leader back to the
//! coordinator (KIP-890).
//!
//! One request per connection, bounded by [`PEER_REQUEST_TIMEOUT`]: these are per-transaction
//! control messages, not the data path, and a fresh loopback connection costs far less than
//! the `fdatasync` each marker waits for. Any failure is a retriable error code for the caller
//! (the coordinator retries markers every tick; a producer retries its append).

use std::time::Duration;

use bytes::{Buf, BytesMut};
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use rill_metadata::types::Endpoint;
use rill_protocol::frame::{body_len, REQUEST_BYTES_MAX_DEFAULT};
use rill_protocol::kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use rill_protocol::kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use rill_protocol::ErrorCode;

/// How long one request to a peer may take, connection included.
pub const PEER_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The client id peers see in their logs.
const CLIENT_ID: &str = "rill-broker";

/// Send `request` at `version` to the broker at `endpoint` and decode its answer.
/// NETWORK_EXCEPTION if it cannot be reached or answers nothing sensible in time.
pub async fn call<R: Request>(
    endpoint: &Endpoint,
    version: i16,
    request: &R,
) -> Result<R::Response, ErrorCode> {
    let exchange = exchange(endpoint, version, request);
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

/// Why one exchange failed (reported, then mapped to NETWORK_EXCEPTION).
#[derive(Debug, thiserror::Error)]
enum PeerError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("connect: {0}")]
    Connect(String),
    #[error("encode: {0}")]
    Encode(String),
    #[error("decode: {0}")]
    Decode(String),
    #[error("answer to correlation id {got}, asked {sent}")]
    Correlation { sent: i32, got: i32 },
}

async fn exchange<R: Request>(
    endpoint: &Endpoint,
    version: i16,
    request: &R,
) -> Result<R::Response, PeerError> {
    let correlation_id = 1;
    let api_key = ApiKey::try_from(R::KEY).map_err(|_| PeerError::Encode("api key".into()))?;
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
    let mut frame = BytesMut::new();
    frame.extend_from_slice(&[0; 4]);
    header
        .encode(&mut frame, api_key.request_header_version(version))
        .and_then(|()| request.encode(&mut frame, version))
        .map_err(|e| PeerError::Encode(format!("{e:#}")))?;
    let size = i32::try_from(frame.len() - 4).map_err(|_| PeerError::Encode("too large".into()))?;
    frame[..4].copy_from_slice(&size.to_be_bytes());

    let address = format!("{}:{}", endpoint.host, endpoint.port);
    let mut stream = TcpStream::connect(address.as_str())
        .await
        .map_err(|e| PeerError::Connect(format!("{address}: {e}")))?;
    stream
        .set_nodelay(true)
        .map_err(|e| PeerError::Connect(e.to_string()))?;
    stream.write_all(&frame).await?;
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).await?;
    let len = body_len(i32::from_be_bytes(prefix), REQUEST_BYTES_MAX_DEFAULT)
        .map_err(|e| PeerError::Decode(e.to_string()))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    let _ = stream.close().await;

    let mut body = bytes::Bytes::from(body);
    let answer = ResponseHeader::decode(&mut body, api_key.response_header_version(version))
        .map_err(|e| PeerError::Decode(format!("header: {e:#}")))?;
    if answer.correlation_id != correlation_id {
        return Err(PeerError::Correlation {
            sent: correlation_id,
            got: answer.correlation_id,
        });
    }
    let response = R::Response::decode(&mut body, version)
        .map_err(|e| PeerError::Decode(format!("body: {e:#}")))?;
    if body.has_remaining() {
        tracing::debug!(
            left = body.remaining(),
            "peer answer longer than its message"
        );
    }
    Ok(response)
}
