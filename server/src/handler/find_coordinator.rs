//! FindCoordinator (10): this single node coordinates every group and transaction; the group's
//! state then lives on one of its shards (requests reaching another shard are forwarded).

use rill_protocol::kafka_protocol::messages::find_coordinator_response::Coordinator;
use rill_protocol::kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse,
};
use rill_protocol::kafka_protocol::protocol::StrBytes;

use super::{str_bytes, Broker};
use rill_protocol::ErrorCode;

/// Key types Kafka defines: 0 = group, 1 = transaction.
const KEY_TYPES: [i8; 2] = [0, 1];

/// Answer FindCoordinator (v0-3: one key; v4+: a batch of keys).
pub fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let config = broker.config();
    let error = if KEY_TYPES.contains(&req.key_type) {
        ErrorCode::None
    } else {
        ErrorCode::InvalidRequest
    };
    let (node_id, host, port) = if error.is_ok() {
        (
            config.node_id,
            str_bytes(&config.advertise_host),
            i32::from(config.advertise_port),
        )
    } else {
        (-1, StrBytes::default(), -1)
    };
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|key| {
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(node_id))
                    .with_host(host.clone())
                    .with_port(port)
                    .with_error_code(error.code())
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    FindCoordinatorResponse::default()
        .with_error_code(error.code())
        .with_node_id(BrokerId(node_id))
        .with_host(host)
        .with_port(port)
}
