//! DeleteAcls (31): every binding a filter matches goes, as Kafka's
//! `AclControlManager.deleteAcls` answers it: per filter the bindings it matched (a binding two
//! filters match is listed under each), INVALID_REQUEST for a filter with an UNKNOWN field,
//! SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED without ALTER on the
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
    Answer::body(handle(broker, &access, &request).await)
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
}

/// Answer DeleteAcls as `access` may.
pub async fn handle<B: Broker>(
    broker: &B,
    access: &Access<'_>,
    request: &DeleteAclsRequest,
) -> DeleteAclsResponse {
    let every = |code, message| {
        let results = request
            .filters
            .iter()
            .map(|_| failed(code, message))
            .collect();
        DeleteAclsResponse::default().with_filter_results(results)
    };
    if !access.on() {
        return every(ErrorCode::SecurityDisabled, NO_AUTHORIZER);
    }
    if !access.cluster(Operation::Alter) {
        return every(ErrorCode::ClusterAuthorizationFailed, CLUSTER_DENIED);
    }
    let checked: Vec<_> = request
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
        })
        .collect();
    let valid = checked
        .iter()
        .filter_map(|c| c.as_ref().ok().cloned())
        .collect();
    let deleted = super::acl_store::delete(broker, valid).await;
    let mut matched = match &deleted {
        Ok(matched) => matched.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    let results = checked
        .iter()
        .map(|c| match (c, &deleted) {
            (Err((code, message)), _) | (Ok(_), Err((code, message))) => failed(*code, message),
            (Ok(_), Ok(_)) => {
                let hits = matched.next().unwrap_or_default();
                for b in &hits {
                    tracing::info!(binding = ?b, "ACL deleted");
                }
                DeleteAclsFilterResult::default()
                    .with_matching_acls(hits.iter().map(matching).collect())
            }
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
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
        let request = DeleteAclsRequest::default().with_filters(vec![
            filter(3, 1),
            filter(3, 0),
            filter(1, 3),
        ]);
        let r = block_on(handle(&broker, &admin, &request));
        let results = &r.filter_results;
        assert_eq!(results[0].error_code, 0);
        assert_eq!(results[0].matching_acls.len(), 1);
        assert_eq!(results[0].matching_acls[0].pattern_type, 3);
        assert_eq!(results[1].error_code, ErrorCode::InvalidRequest.code());
        assert_eq!(results[2].matching_acls.len(), 2);
        assert!(broker.topics().acls().is_empty());
        let _ = lit;
    }
}
