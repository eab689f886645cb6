//! ListGroups (16): every group on every shard, optionally filtered by state (v4+).

use rill_protocol::kafka_protocol::messages::list_groups_response::ListedGroup;
use rill_protocol::kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{str_bytes, Broker};

/// Answer ListGroups.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &ListGroupsRequest,
) -> ListGroupsResponse {
    let filter: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let groups = broker
        .list_groups()
        .await
        .into_iter()
        .filter(|g| filter.is_empty() || filter.contains(&g.state.to_lowercase()))
        .map(|g| {
            let listed = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(&g.group_id)))
                .with_protocol_type(str_bytes(&g.protocol_type));
            if version >= 4 {
                listed.with_group_state(str_bytes(&g.state))
            } else {
                listed
            }
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
