//! [`LeaderLink`]: a follower's connection to its leader's Kafka listener, speaking Fetch v12
//! (replica id, current leader epoch, last fetched epoch; the diverging epoch in the answer).

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use rill_protocol::kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, RequestHeader, ResponseHeader,
};
use rill_protocol::kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};

/// The Fetch version followers speak: the first with the diverging epoch (KIP-320/595) and the
/// last with `replica_id` in the body.
pub const FETCH_VERSION: i16 = 12;
/// The tag of the Fetch request's tagged field (flexible versions, v12+) in which a follower
/// presents its replica secret (`crate::cluster::ClusterView::is_replica`). Kafka's own tags
/// in FetchRequest are 0 (ClusterId) and 1 (ReplicaState); a Kafka broker skips unknown tags.
pub const REPLICA_SECRET_TAG: i32 = 0x5249;
/// Largest answer accepted from a leader.
const RESPONSE_BYTES_MAX: usize = 256 << 20;
/// Bound on connecting to a leader.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One connection to a leader.
pub struct LeaderLink {
    stream: TcpStream,
    correlation_id: i32,
    client_id: StrBytes,
}

impl LeaderLink {
    /// Connects to the leader at `addr` (`host:port`).
    pub async fn connect(addr: &str, node_id: i32) -> anyhow::Result<LeaderLink> {
        let socket = std::net::ToSocketAddrs::to_socket_addrs(addr)?
            .next()
            .ok_or_else(|| anyhow::anyhow!("{addr} resolves to nothing"))?;
        let stream = TcpStream::connect_timeout(socket, CONNECT_TIMEOUT)
            .await
            .map_err(|e| anyhow::anyhow!("connecting to {addr}: {e}"))?;
        stream
            .set_nodelay(true)
            .map_err(|e| anyhow::anyhow!("TCP_NODELAY: {e}"))?;
        Ok(LeaderLink {
            stream,
            correlation_id: 0,
            client_id: StrBytes::from_string(format!("rill-replica-{node_id}")),
        })
    }

    /// Sends one Fetch and waits for its answer.
    pub async fn fetch(&mut self, request: &FetchRequest) -> anyhow::Result<FetchResponse> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Fetch as i16)
            .with_request_api_version(FETCH_VERSION)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut body = BytesMut::new();
        header.encode(&mut body, FetchRequest::header_version(FETCH_VERSION))?;
        request.encode(&mut body, FETCH_VERSION)?;
        let mut frame = BytesMut::with_capacity(4 + body.len());
        frame.put_i32(i32::try_from(body.len())?);
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).await?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).await?;
        let size = usize::try_from(i32::from_be_bytes(size))?;
        anyhow::ensure!(size <= RESPONSE_BYTES_MAX, "a {size}-byte answer");
        let mut answer = vec![0u8; size];
        self.stream.read_exact(&mut answer).await?;
        let mut answer = Bytes::from(answer);
        let header =
            ResponseHeader::decode(&mut answer, FetchResponse::header_version(FETCH_VERSION))?;
        anyhow::ensure!(
            header.correlation_id == self.correlation_id,
            "answer to request {} while waiting for {}",
            header.correlation_id,
            self.correlation_id
        );
        FetchResponse::decode(&mut answer, FETCH_VERSION)
    }
}
