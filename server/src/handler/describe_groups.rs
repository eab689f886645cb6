//! DescribeGroups (15): state, protocol and members of each asked group. A group that does not
//! exist is Dead with no error before v6; v6 (KIP-1043) answers it GROUP_ID_NOT_FOUND with Kafka's
//! message, which the Java AdminClient (and `kafka-consumer-groups.sh --describe`) reports.

use rill_protocol::kafka_protocol::messages::describe_groups_response::{
    DescribedGroup, DescribedGroupMember,
};
use rill_protocol::kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use rill_protocol::ErrorCode;

use super::{message_bytes, str_bytes, Broker};
use crate::group::ops::GroupDescription;
use crate::group::{GroupOp, GroupReply};

/// The state of a group the coordinator does not have.
const DEAD: &str = "Dead";

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::DescribeGroupsRequest,
) -> super::Answer {
    let mut response = handle(broker, cx.version, &request).await;
    if cx.version >= 3 && request.include_authorized_operations {
        let access = super::authz::access(broker, cx.session);
        // As Kafka: only groups described without an error (v6's GROUP_ID_NOT_FOUND) get them.
        for group in response.groups.iter_mut().filter(|g| g.error_code == 0) {
            group.authorized_operations = access.group_operations(group.group_id.0.as_str());
        }
    }
    super::Answer::body(response)
}

/// Answer DescribeGroups.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut groups = Vec::with_capacity(req.groups.len());
    for id in &req.groups {
        let d = match broker.group(&id.0, GroupOp::Describe).await {
            GroupReply::Describe(d) => d,
            GroupReply::Unavailable(code) => GroupDescription {
                error_code: code,
                ..Default::default()
            },
            other => unreachable!("describe answered with {other:?}"),
        };
        groups.push(described(version, id.clone(), d));
    }
    DescribeGroupsResponse::default().with_groups(groups)
}

fn described(
    version: i16,
    id: rill_protocol::kafka_protocol::messages::GroupId,
    d: GroupDescription,
) -> DescribedGroup {
    let members = d
        .members
        .into_iter()
        .map(|m| {
            DescribedGroupMember::default()
                .with_member_id(str_bytes(&m.member_id))
                .with_group_instance_id(if version >= 4 {
                    m.group_instance_id.as_deref().map(str_bytes)
                } else {
                    None
                })
                .with_client_id(str_bytes(&m.client_id))
                .with_client_host(str_bytes(&m.client_host))
                .with_member_metadata(m.metadata)
                .with_member_assignment(m.assignment)
        })
        .collect();
    let missing = version >= 6 && d.error_code == ErrorCode::None && d.state == DEAD;
    let (error, message) = if missing {
        let message = format!("Group {} not found.", id.0.as_str());
        (ErrorCode::GroupIdNotFound, Some(message_bytes(&message)))
    } else {
        (d.error_code, None)
    };
    DescribedGroup::default()
        .with_error_code(error.code())
        .with_error_message(message)
        .with_group_id(id)
        .with_group_state(str_bytes(&d.state))
        .with_protocol_type(str_bytes(&d.protocol_type))
        .with_protocol_data(str_bytes(&d.protocol_data))
        .with_members(members)
        .with_authorized_operations(super::authz::OPERATIONS_NOT_ASKED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::GroupId;

    #[test]
    fn a_missing_group_is_dead_before_v6_and_not_found_from_v6() {
        let broker = FakeBroker::new();
        let req =
            DescribeGroupsRequest::default().with_groups(vec![GroupId(str_bytes("nobody-here"))]);
        let old = block_on(handle(&broker, 5, &req));
        assert_eq!(old.groups[0].error_code, 0);
        assert_eq!(old.groups[0].group_state.as_str(), DEAD);
        let new = block_on(handle(&broker, 6, &req));
        assert_eq!(new.groups[0].error_code, ErrorCode::GroupIdNotFound.code());
        assert_eq!(new.groups[0].group_state.as_str(), DEAD);
        assert_eq!(
            new.groups[0].error_message.as_ref().map(|m| m.as_str()),
            Some("Group nobody-here not found.")
        );
    }
}
