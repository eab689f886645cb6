//! DescribeCluster (60): this one node, its advertised address and the cluster id.

use rill_protocol::kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use rill_protocol::kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse,
};

use super::{str_bytes, Broker};

/// Answer DescribeCluster.
pub fn handle<B: Broker>(broker: &B, _request: &DescribeClusterRequest) -> DescribeClusterResponse {
    let config = broker.config();
    let node = DescribeClusterBroker::default()
        .with_broker_id(BrokerId(config.node_id))
        .with_host(str_bytes(&config.advertise_host))
        .with_port(i32::from(config.advertise_port));
    DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(&broker.topics().cluster_id()))
        .with_controller_id(BrokerId(config.node_id))
        .with_brokers(vec![node])
}
