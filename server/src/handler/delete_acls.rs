//! DeleteAcls (31): every binding a filter matches goes, as Kafka's
//! `AclControlManager.deleteAcls` answers it: per filter the bindings it matched (a binding two
//! filters match is listed under each; a filter with an UNKNOWN field closes the connection, as
//! Kafka's request parsing does), SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without ALTER on the
//! cluster. Once answered, this broker authorizes without them.

use rill_metadata::acl::{AclBinding, Operation, WireFilter};
use rill_protocol::kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use rill_protocol::kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use rill_protocol::ErrorCode;

use super::authz::Access;
use super::create_acls::{CLUSTER_DENIED, NO_AUTHORIZER};
use super::{str_bytes, Answer, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: DeleteAclsRequest,
) -> Answer {
    let access = super::authz::access(broker, cx.session);
    match handle(broker, &access, &request).await {
        Some(response) => Answer::body(response),
        None => Answer::Close,
    }
}

fn failed(code: ErrorCode, message: &str) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(code.code())
        .with_error_message(Some(str_bytes(message)))
}

fn matching(b: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(b.resource_type.code())
        .with_resource_name(str_bytes(&b.name))
        .with_pattern_type(b.pattern.code())
        .with_principal(str_bytes(&b.principal))
        .with_host(str_bytes(&b.host))
        .with_operation(b.operation.code())
        .with_permission_type(b.permission.code())
        .with_error_message(None)
}

/// Answer DeleteAcls as `access` may; `None`: close the connection.
pub async fn handle<B: Broker>(
    broker: &B,
    access: &Access<'_>,
    request: &DeleteAclsRequest,
) -> Option<DeleteAclsResponse> {
    let every = |code, message| {
        let results = request
            .filters
            .iter()
            .map(|_| failed(code, message))
            .collect();
        Some(DeleteAclsResponse::default().with_filter_results(results))
    };
    let filters: Vec<_> = request
        .filters
        .iter()
        .map(|f| {
            WireFilter {
                resource_type: f.resource_type_filter,
                name: f.resource_name_filter.as_ref().map(|s| s.to_string()),
                pattern: f.pattern_type_filter,
                principal: f.principal_filter.as_ref().map(|s| s.to_string()),
                host: f.host_filter.as_ref().map(|s| s.to_string()),
                operation: f.operation,
                permission: f.permission_type,
            }
            .validate()
            .ok()
        })
        .collect::<Option<_>>()?;
    if !access.on() {
        return every(ErrorCode::SecurityDisabled, NO_AUTHORIZER);
    }
    if !access.cluster(Operation::Alter) {
        return every(ErrorCode::ClusterAuthorizationFailed, CLUSTER_DENIED);
    }
    let results = match super::acl_store::delete(broker, filters).await {
        Err((code, message)) => return every(code, &message),
        Ok(matched) => matched
            .into_iter()
            .map(|hits| {
                for b in &hits {
                    tracing::info!(binding = ?b, "ACL deleted");
                }
                DeleteAclsFilterResult::default()
                    .with_error_message(None)
                    .with_matching_acls(hits.iter().map(matching).collect())
            })
            .collect(),
    };
    Some(DeleteAclsResponse::default().with_filter_results(results))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use futures::executor::block_on;
    use rill_metadata::acl::{AclChange, AuthorizerConfig, PatternType, Permission, ResourceType};
    use rill_protocol::kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;

    fn binding(name: &str, pattern: PatternType) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            name: name.to_string(),
            pattern,
            principal: "User:alice".to_string(),
            host: "*".to_string(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn each_filter_lists_its_matches_and_they_are_gone() {
        let broker = FakeBroker::new();
        let lit = binding("t", PatternType::Literal);
        let pre = binding("t", PatternType::Prefixed);
        broker
            .topics()
            .alter_acls(|_| ((), vec![AclChange::Add(lit.clone()), AclChange::Add(pre)]))
            .unwrap();
        let config = AuthorizerConfig {
            super_users: ["User:admin".to_string()].into(),
            ..Default::default()
        };
        let admin = Access::for_tests(&config, Default::default(), "User:admin", "127.0.0.1");
        let filter = |pattern: i8, op: i8| {
            DeleteAclsFilter::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(Some(str_bytes("t")))
                .with_pattern_type_filter(pattern)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(op)
                .with_permission_type(1)
        };
        // An UNKNOWN operation: Kafka closes the connection, and deletes nothing.
        let unknown = DeleteAclsRequest::default().with_filters(vec![filter(3, 1), filter(3, 0)]);
        assert!(block_on(handle(&broker, &admin, &unknown)).is_none());
        assert_eq!(broker.topics().acls().len(), 2);
        let request = DeleteAclsRequest::default().with_filters(vec![filter(3, 1), filter(1, 3)]);
        let r = block_on(handle(&broker, &admin, &request)).unwrap();
        let results = &r.filter_results;
        assert_eq!(results[0].error_code, 0);
        assert_eq!(results[0].matching_acls.len(), 1);
        assert_eq!(results[0].matching_acls[0].pattern_type, 3);
        assert_eq!(results[1].matching_acls.len(), 2);
        assert!(broker.topics().acls().is_empty());
        let _ = lit;
    }
}
