//! DescribeCluster (60): the live brokers with their advertised addresses, the controller and
//! the cluster id (on a single node: this node, which is its own controller).

use rill_protocol::kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use rill_protocol::kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse,
};

use super::{str_bytes, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::DescribeClusterRequest,
) -> super::Answer {
    let mut response = handle_on(broker, &request, &cx.session.listener);
    if request.include_cluster_authorized_operations {
        response.cluster_authorized_operations =
            super::authz::access(broker, cx.session).cluster_operations();
    }
    super::Answer::body(response)
}

/// Answer DescribeCluster as asked on the first listener.
pub fn handle<B: Broker>(broker: &B, request: &DescribeClusterRequest) -> DescribeClusterResponse {
    let first = broker.config().listeners.all[0].clone();
    handle_on(broker, request, &first)
}

/// Answer DescribeCluster as asked on `listener` (the brokers are given at its endpoints).
pub fn handle_on<B: Broker>(
    broker: &B,
    _request: &DescribeClusterRequest,
    listener: &crate::security::listeners::Listener,
) -> DescribeClusterResponse {
    let config = broker.config();
    let entry = |id: i32, host: &str, port: u16| {
        DescribeClusterBroker::default()
            .with_broker_id(BrokerId(id))
            .with_host(str_bytes(host))
            .with_port(i32::from(port))
    };
    let brokers = match broker.cluster() {
        None => {
            let me = entry(
                config.node_id,
                &listener.advertise_host,
                listener.advertise_port,
            );
            vec![me]
        }
        Some(cluster) => {
            let image = cluster.image();
            image
                .live_brokers()
                .filter_map(|b| {
                    let e = b.endpoint_on(&listener.name)?;
                    Some(entry(b.node_id.0, &e.host, e.port))
                })
                .collect()
        }
    };
    DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(&broker.topics().cluster_id()))
        .with_controller_id(super::metadata::named_controller(broker))
        .with_brokers(brokers)
}
