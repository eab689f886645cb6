//! FindCoordinator (10): on a single node this node coordinates every group and transaction; the
//! group's state then lives on one of its shards (requests reaching another shard are
//! forwarded). In a cluster a group's coordinator is the broker leading its `__consumer_offsets`
//! partition and a transactional id's the broker leading its `__transaction_state` partition,
//! so every broker names the same coordinator and they spread over the brokers.

use crate::security::listeners::Listener;
use rill_protocol::kafka_protocol::messages::find_coordinator_response::Coordinator;
use rill_protocol::kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse,
};
use rill_protocol::kafka_protocol::protocol::StrBytes;

use super::{str_bytes, Broker};
use rill_protocol::ErrorCode;

/// Key types Kafka defines: 0 = group, 1 = transaction.
const KEY_TYPES: [i8; 2] = [0, 1];

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::FindCoordinatorRequest,
) -> super::Answer {
    super::Answer::body(handle_on(
        broker,
        cx.version,
        &request,
        &cx.session.listener,
    ))
}

/// Answer FindCoordinator as asked on the first listener.
pub fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let first = broker.config().listeners.all[0].clone();
    handle_on(broker, version, req, &first)
}

/// Answer FindCoordinator (v0-3: one key; v4+: a batch of keys) as asked on `listener`: the
/// coordinator is given at its endpoint of that listener.
pub fn handle_on<B: Broker>(
    broker: &B,
    version: i16,
    req: &FindCoordinatorRequest,
    listener: &Listener,
) -> FindCoordinatorResponse {
    if version >= 4 {
        let coordinators = req
            .coordinator_keys
            .iter()
            .map(|key| {
                let (error, node_id, host, port) = coordinator(broker, req.key_type, key, listener);
                Coordinator::default()
                    .with_key(key.clone())
                    .with_node_id(BrokerId(node_id))
                    .with_host(host)
                    .with_port(port)
                    .with_error_code(error.code())
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let (error, node_id, host, port) = coordinator(broker, req.key_type, &req.key, listener);
    FindCoordinatorResponse::default()
        .with_error_code(error.code())
        .with_node_id(BrokerId(node_id))
        .with_host(host)
        .with_port(port)
}

/// The coordinator of one key: (error, node id, host, port); -1 and empty on an error.
fn coordinator<B: Broker>(
    broker: &B,
    key_type: i8,
    key: &StrBytes,
    listener: &Listener,
) -> (ErrorCode, i32, StrBytes, i32) {
    let none = |error| (error, -1, StrBytes::default(), -1);
    if !KEY_TYPES.contains(&key_type) {
        return none(ErrorCode::InvalidRequest);
    }
    let config = broker.config();
    let this_node = (
        ErrorCode::None,
        config.node_id,
        str_bytes(&listener.advertise_host),
        i32::from(listener.advertise_port),
    );
    let Some(cluster) = broker.cluster() else {
        return this_node;
    };
    let coordinator = if key_type == 0 {
        cluster.ensure_offsets_topic();
        cluster.group_coordinator(key.as_str())
    } else {
        cluster.ensure_txn_topic();
        cluster.txn_coordinator(key.as_str())
    };
    let found = coordinator.and_then(|node| {
        cluster
            .endpoint_on(node, &listener.name)
            .map(|e| (node, e))
            .ok_or(ErrorCode::CoordinatorNotAvailable)
    });
    match found {
        Ok((node, endpoint)) => (
            ErrorCode::None,
            node.0,
            str_bytes(&endpoint.host),
            i32::from(endpoint.port),
        ),
        Err(code) => none(code),
    }
}
