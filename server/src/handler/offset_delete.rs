//! OffsetDelete (47): forget a group's committed offsets for partitions it no longer uses.

use rill_protocol::kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use rill_protocol::kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use rill_protocol::ErrorCode;

use super::Broker;
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::OffsetDeleteRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer OffsetDelete.
pub async fn handle<B: Broker>(broker: &B, req: &OffsetDeleteRequest) -> OffsetDeleteResponse {
    let topics: Vec<(String, Vec<i32>)> = req
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let count: usize = topics.iter().map(|(_, p)| p.len()).sum();
    let (top, errors) = match broker
        .group(&req.group_id.0, GroupOp::DeleteOffsets(topics))
        .await
    {
        GroupReply::DeleteOffsets(top, errors) => (top, errors),
        GroupReply::Unavailable(code) => (code, vec![ErrorCode::None; count]),
        other => unreachable!("offset delete answered with {other:?}"),
    };
    let mut errors = errors.into_iter();
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(errors.next().unwrap_or(ErrorCode::None).code())
                })
                .collect();
            OffsetDeleteResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetDeleteResponse::default()
        .with_error_code(top.code())
        .with_topics(if top.is_ok() { topics } else { Vec::new() })
}
