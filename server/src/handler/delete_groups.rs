//! DeleteGroups (42): remove empty groups and their committed offsets (durably: tombstones).

use rill_protocol::kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use rill_protocol::kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use super::Broker;
use crate::group::{GroupOp, GroupReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::DeleteGroupsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer DeleteGroups.
pub async fn handle<B: Broker>(broker: &B, req: &DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for id in &req.groups_names {
        let code = match broker.group(&id.0, GroupOp::Delete).await {
            GroupReply::Delete(code) | GroupReply::Unavailable(code) => code,
            other => unreachable!("delete answered with {other:?}"),
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(id.clone())
                .with_error_code(code.code()),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
