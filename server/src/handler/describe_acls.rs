//! DescribeAcls (29): the bindings a filter matches (`rill_metadata::acl::AclFilter`), grouped
//! by resource pattern as Kafka's `DescribeAclsResponse.aclsResources` groups them (sorted
//! here; Kafka's order is its hash set's). SECURITY_DISABLED without an authorizer,
//! CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster, INVALID_REQUEST for a filter
//! with an UNKNOWN field closes the connection, as Kafka's parsing does.

use std::collections::BTreeMap;

use rill_metadata::acl::{Operation, WireFilter};
use rill_protocol::kafka_protocol::messages::describe_acls_response::{
    AclDescription, DescribeAclsResource,
};
use rill_protocol::kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use rill_protocol::ErrorCode;

use super::authz::Access;
use super::create_acls::{CLUSTER_DENIED, NO_AUTHORIZER};
use super::{str_bytes, Answer, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: DescribeAclsRequest,
) -> Answer {
    let access = super::authz::access(broker, cx.session);
    match handle(broker, &access, &request) {
        Some(response) => Answer::body(response),
        None => Answer::Close,
    }
}

fn refused(code: ErrorCode, message: &str) -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(str_bytes(message)))
}

/// Answer DescribeAcls as `access` may; `None`: close the connection (a filter with an UNKNOWN
/// field, which Kafka's request parsing refuses).
pub fn handle<B: Broker>(
    broker: &B,
    access: &Access<'_>,
    request: &DescribeAclsRequest,
) -> Option<DescribeAclsResponse> {
    let filter = WireFilter {
        resource_type: request.resource_type_filter,
        name: request.resource_name_filter.as_ref().map(|s| s.to_string()),
        pattern: request.pattern_type_filter,
        principal: request.principal_filter.as_ref().map(|s| s.to_string()),
        host: request.host_filter.as_ref().map(|s| s.to_string()),
        operation: request.operation,
        permission: request.permission_type,
    };
    let filter = filter.validate().ok()?;
    if !access.on() {
        return Some(refused(ErrorCode::SecurityDisabled, NO_AUTHORIZER));
    }
    if !access.cluster(Operation::Describe) {
        return Some(refused(
            ErrorCode::ClusterAuthorizationFailed,
            CLUSTER_DENIED,
        ));
    }
    let acls = super::acl_store::current(broker);
    let mut resources: BTreeMap<_, Vec<AclDescription>> = BTreeMap::new();
    for b in acls.iter().filter(|b| filter.matches(b)) {
        resources
            .entry((b.resource_type, b.name.clone(), b.pattern))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(str_bytes(&b.principal))
                    .with_host(str_bytes(&b.host))
                    .with_operation(b.operation.code())
                    .with_permission_type(b.permission.code()),
            );
    }
    let resources = resources
        .into_iter()
        .map(|((t, name, pattern), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(t.code())
                .with_resource_name(str_bytes(&name))
                .with_pattern_type(pattern.code())
                .with_acls(acls)
        })
        .collect();
    // Kafka answers an empty message, not a null one.
    Some(
        DescribeAclsResponse::default()
            .with_error_message(Some(str_bytes("")))
            .with_resources(resources),
    )
}
