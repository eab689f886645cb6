//! CreateAcls (30): new ACL bindings, as Kafka's `AclApis.handleCreateAcls` and
//! `AclControlManager.createAcls` answer it: SECURITY_DISABLED without an authorizer,
//! CLUSTER_AUTHORIZATION_FAILED without ALTER on the cluster, INVALID_REQUEST (Kafka's
//! messages) for a binding Kafka would not store, and a binding that exists is answered
//! created. Stored by [`super::acl_store::create`].

use rill_metadata::acl::{AclError, Operation, WireAcl};
use rill_protocol::kafka_protocol::messages::create_acls_response::AclCreationResult;
use rill_protocol::kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use rill_protocol::ErrorCode;

use super::authz::Access;
use super::{str_bytes, Answer, Broker};

/// Kafka's message when no authorizer is configured (`AclApis`).
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// Kafka's message of CLUSTER_AUTHORIZATION_FAILED (`Errors`).
pub const CLUSTER_DENIED: &str = "Cluster authorization failed.";

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: CreateAclsRequest,
) -> Answer {
    let access = super::authz::access(broker, cx.session);
    match handle(broker, &access, &request).await {
        Some(response) => Answer::body(response),
        None => Answer::Close,
    }
}

fn result(code: ErrorCode, message: Option<&str>) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(code.code())
        .with_error_message(message.map(str_bytes))
}

/// Answer CreateAcls as `access` may; `None`: close the connection (a creation with an
/// UNKNOWN field, which Kafka's request parsing refuses).
pub async fn handle<B: Broker>(
    broker: &B,
    access: &Access<'_>,
    request: &CreateAclsRequest,
) -> Option<CreateAclsResponse> {
    let every = |code, message: Option<&str>| {
        let results = request
            .creations
            .iter()
            .map(|_| result(code, message))
            .collect();
        Some(CreateAclsResponse::default().with_results(results))
    };
    let checked = validate(request);
    if checked
        .iter()
        .any(|c| matches!(c, Err(AclError::Malformed)))
    {
        return None;
    }
    if !access.on() {
        return every(ErrorCode::SecurityDisabled, Some(NO_AUTHORIZER));
    }
    if !access.cluster(Operation::Alter) {
        return every(ErrorCode::ClusterAuthorizationFailed, Some(CLUSTER_DENIED));
    }
    if checked
        .iter()
        .any(|c| matches!(c, Err(AclError::Unbuildable)))
    {
        return every(ErrorCode::UnknownServerError, None);
    }
    let valid = checked
        .iter()
        .filter_map(|c| c.as_ref().ok().cloned())
        .collect();
    let stored = super::acl_store::create(broker, valid).await;
    let results = checked
        .iter()
        .map(|c| match (c, &stored) {
            (Err(AclError::Refused(code, message)), _) => result(*code, Some(message)),
            (Err(_), _) => result(ErrorCode::UnknownServerError, None),
            (Ok(_), Err((code, message))) => result(*code, Some(message)),
            (Ok(binding), Ok(())) => {
                tracing::info!(?binding, "ACL created");
                // Kafka answers a created binding with an empty message, not a null one.
                result(ErrorCode::None, Some(""))
            }
        })
        .collect();
    Some(CreateAclsResponse::default().with_results(results))
}

/// Each creation as a binding, or why not.
fn validate(request: &CreateAclsRequest) -> Vec<Result<rill_metadata::acl::AclBinding, AclError>> {
    request
        .creations
        .iter()
        .map(|c| {
            WireAcl {
                resource_type: c.resource_type,
                name: c.resource_name.to_string(),
                pattern: c.resource_pattern_type,
                principal: c.principal.to_string(),
                host: c.host.to_string(),
                operation: c.operation,
                permission: c.permission_type,
            }
            .validate()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::describe_acls;
    use crate::handler::fake::FakeBroker;
    use futures::executor::block_on;
    use rill_metadata::acl::AuthorizerConfig;
    use rill_protocol::kafka_protocol::messages::create_acls_request::AclCreation;
    use rill_protocol::kafka_protocol::messages::DescribeAclsRequest;

    fn creation(t: i8, name: &str, pattern: i8, principal: &str, op: i8) -> AclCreation {
        AclCreation::default()
            .with_resource_type(t)
            .with_resource_name(str_bytes(name))
            .with_resource_pattern_type(pattern)
            .with_principal(str_bytes(principal))
            .with_host(str_bytes("*"))
            .with_operation(op)
            .with_permission_type(3)
    }

    fn codes(r: &CreateAclsResponse) -> Vec<i16> {
        r.results.iter().map(|r| r.error_code).collect()
    }

    #[test]
    fn without_an_authorizer_or_cluster_alter_nothing_is_created() {
        let broker = FakeBroker::new();
        let request =
            CreateAclsRequest::default().with_creations(vec![creation(2, "t", 3, "User:alice", 3)]);
        let r = block_on(handle(&broker, &Access::open(), &request)).unwrap();
        assert_eq!(codes(&r), vec![ErrorCode::SecurityDisabled.code()]);
        assert_eq!(r.results[0].error_message.as_deref(), Some(NO_AUTHORIZER));
        let config = AuthorizerConfig::default();
        let alice = Access::for_tests(&config, Default::default(), "User:alice", "127.0.0.1");
        let r = block_on(handle(&broker, &alice, &request)).unwrap();
        assert_eq!(
            codes(&r),
            vec![ErrorCode::ClusterAuthorizationFailed.code()]
        );
        assert!(broker.topics().acls().is_empty());
    }

    #[test]
    fn valid_bindings_are_stored_and_invalid_ones_refused_one_by_one() {
        let broker = FakeBroker::new();
        let config = AuthorizerConfig {
            super_users: ["User:admin".to_string()].into(),
            ..Default::default()
        };
        let admin = Access::for_tests(&config, Default::default(), "User:admin", "127.0.0.1");
        let request = CreateAclsRequest::default().with_creations(vec![
            creation(2, "t", 3, "User:alice", 3),
            creation(2, "", 3, "User:alice", 3),
            creation(3, "g-", 4, "User:alice", 3),
            creation(2, "t", 3, "alice", 3),
            creation(2, "t", 3, "User:alice", 3),
        ]);
        let r = block_on(handle(&broker, &admin, &request)).unwrap();
        let invalid = ErrorCode::InvalidRequest.code();
        assert_eq!(codes(&r), vec![0, invalid, 0, invalid, 0]);
        assert_eq!(broker.topics().acls().len(), 2);
        let d = describe_acls::handle(
            &broker,
            &admin,
            &DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(None)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
        )
        .unwrap();
        assert_eq!(d.error_code, 0);
        assert_eq!(d.resources.len(), 2);
    }
}
