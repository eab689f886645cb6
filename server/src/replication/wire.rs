//! [`LeaderLink`]: a follower's connection to its leader's Kafka listener, speaking Fetch v12
//! (replica id, current leader epoch, last fetched epoch; the diverging epoch in the answer).

use std::time::Duration;

use rill_metadata::types::Endpoint;
use rill_protocol::kafka_protocol::messages::{FetchRequest, FetchResponse};

use crate::cluster::peer_connect::{connect, PeerConnection};
use crate::security::peer_client::PeerClient;

/// The Fetch version followers speak: the first with the diverging epoch (KIP-320/595) and the
/// last with `replica_id` in the body.
pub const FETCH_VERSION: i16 = 12;
/// The tag of the Fetch request's tagged field (flexible versions, v12+) in which a follower
/// presents its replica secret (`crate::cluster::ClusterView::is_replica`). Kafka's own tags
/// in FetchRequest are 0 (ClusterId) and 1 (ReplicaState); a Kafka broker skips unknown tags.
pub const REPLICA_SECRET_TAG: i32 = 0x5249;
/// Largest answer accepted from a leader.
const RESPONSE_BYTES_MAX: usize = 256 << 20;
/// Bound on connecting to a leader (TLS handshake and SASL login included).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One connection to a leader, over its inter-broker listener.
pub struct LeaderLink {
    connection: PeerConnection,
}

impl LeaderLink {
    /// Connects to the leader at `endpoint` as `client` says.
    pub async fn connect(
        client: &PeerClient,
        endpoint: &Endpoint,
        node_id: i32,
    ) -> anyhow::Result<LeaderLink> {
        let client_id = format!("rill-replica-{node_id}");
        let connection = connect(client, endpoint, &client_id, CONNECT_TIMEOUT)
            .await
            .map_err(|e| {
                anyhow::anyhow!("connecting to {}:{}: {e}", endpoint.host, endpoint.port)
            })?;
        Ok(LeaderLink { connection })
    }

    /// Sends one Fetch and waits for its answer.
    pub async fn fetch(&mut self, request: &FetchRequest) -> anyhow::Result<FetchResponse> {
        Ok(self
            .connection
            .call(FETCH_VERSION, request, RESPONSE_BYTES_MAX)
            .await?)
    }
}
