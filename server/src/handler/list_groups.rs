//! ListGroups (16): every group on every shard, optionally filtered by state (v4+, KIP-518) and
//! by type (v5+, KIP-848): "classic" (JoinGroup), "consumer" (ConsumerGroupHeartbeat) or "share"
//! (ShareGroupHeartbeat, KIP-932).

use rill_protocol::kafka_protocol::messages::list_groups_response::ListedGroup;
use rill_protocol::kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{str_bytes, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::ListGroupsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer ListGroups.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &ListGroupsRequest,
) -> ListGroupsResponse {
    let filter: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let type_wanted = |group_type: &str| {
        req.types_filter.is_empty()
            || req
                .types_filter
                .iter()
                .any(|t| t.eq_ignore_ascii_case(group_type))
    };
    let groups = broker
        .list_groups()
        .await
        .into_iter()
        .filter(|g| type_wanted(g.group_type))
        .filter(|g| filter.is_empty() || filter.contains(&g.state.to_lowercase()))
        .map(|g| {
            let listed = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(&g.group_id)))
                .with_protocol_type(str_bytes(&g.protocol_type));
            match version {
                5.. => listed
                    .with_group_state(str_bytes(&g.state))
                    .with_group_type(str_bytes(g.group_type)),
                4 => listed.with_group_state(str_bytes(&g.state)),
                _ => listed,
            }
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
