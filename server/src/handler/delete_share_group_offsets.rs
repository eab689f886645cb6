//! DeleteShareGroupOffsets (92, KIP-932): forgets a share group's state for whole topics (its
//! partitions start again at `share.auto.offset.reset`); only while the group has no members
//! (NON_EMPTY_GROUP otherwise).

use rill_protocol::kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use rill_protocol::kafka_protocol::messages::{
    DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
};
use rill_protocol::ErrorCode;

use super::{message_bytes, Broker};
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: DeleteShareGroupOffsetsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer DeleteShareGroupOffsets.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &DeleteShareGroupOffsetsRequest,
) -> DeleteShareGroupOffsetsResponse {
    let topics: Vec<_> = req
        .topics
        .iter()
        .map(|t| {
            (
                t.topic_name.clone(),
                broker.topics().get(&t.topic_name.0).map(|m| m.id),
            )
        })
        .collect();
    let ids = topics.iter().filter_map(|(_, id)| *id).collect();
    let code = match broker
        .group(&req.group_id.0, GroupOp::ShareDeleteOffsets(ids))
        .await
    {
        GroupReply::ShareOffsetsChanged(code) | GroupReply::Unavailable(code) => code,
        other => unreachable!("share delete offsets answered with {other:?}"),
    };
    if !code.is_ok() {
        return DeleteShareGroupOffsetsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(message_bytes(&format!(
                "The offsets of group {} were not deleted.",
                req.group_id.0
            ))));
    }
    let responses = topics
        .into_iter()
        .map(|(name, id)| {
            let code = if id.is_some() {
                ErrorCode::None
            } else {
                ErrorCode::UnknownTopicOrPartition
            };
            DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(name)
                .with_topic_id(id.unwrap_or_default())
                .with_error_code(code.code())
        })
        .collect();
    DeleteShareGroupOffsetsResponse::default().with_responses(responses)
}
