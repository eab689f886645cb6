//! ACLs (CreateAcls, DescribeAcls, DeleteAcls): valid and invalid bindings, every filter kind,
//! deletions. Without an authorizer (the suite's default) both brokers answer each request
//! SECURITY_DISABLED; `KDIFF_AUTHORIZER=1 tests/differential/run.sh --only acls` starts both
//! with Kafka's StandardAuthorizer and `super.users=User:ANONYMOUS`, so the same requests compare
//! the bindings themselves. One binding per described resource: Kafka's answer order is a hash
//! set's.

use rill_protocol::kafka_protocol::messages::create_acls_request::AclCreation;
use rill_protocol::kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use rill_protocol::kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest, RequestKind,
};

use super::{sb, Case};
use crate::pair::Pair;

pub const CASES: &[Case] = &[("acls", acls)];

/// (resource type, name, pattern, principal, operation, permission)
type Row = (i8, &'static str, i8, &'static str, i8, i8);

const CREATED: &[Row] = &[
    (2, "kd-acl-t", 3, "User:alice", 3, 3),
    (2, "kd-acl-", 4, "User:bob", 4, 2),
    (3, "kd-acl-g", 3, "User:alice", 3, 3),
    (4, "kafka-cluster", 3, "User:carol", 12, 3),
    (5, "kd-acl-tx", 3, "User:alice", 4, 3),
];

const REFUSED: &[Row] = &[
    (4, "not-the-cluster", 3, "User:a", 7, 3),
    (2, "", 3, "User:a", 3, 3),
    (2, "kd-acl-x", 1, "User:a", 3, 3),
    (2, "kd-acl-x", 3, "User:a", 1, 3),
    (2, "kd-acl-x", 3, "User:a", 3, 1),
    (1, "kd-acl-x", 3, "User:a", 3, 3),
    (2, "kd-acl-x", 2, "User:a", 3, 3),
    (2, "kd-acl-x", 3, "alice", 3, 3),
    (2, "kd-acl-x", 3, "User:a", 0, 3),
];

fn creation(&(t, name, pattern, principal, op, permission): &Row) -> AclCreation {
    AclCreation::default()
        .with_resource_type(t)
        .with_resource_name(sb(name))
        .with_resource_pattern_type(pattern)
        .with_principal(sb(principal))
        .with_host(sb("*"))
        .with_operation(op)
        .with_permission_type(permission)
}

fn describe(t: i8, name: Option<&str>, pattern: i8) -> RequestKind {
    RequestKind::DescribeAcls(
        DescribeAclsRequest::default()
            .with_resource_type_filter(t)
            .with_resource_name_filter(name.map(sb))
            .with_pattern_type_filter(pattern)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1),
    )
}

fn filter(t: i8, name: Option<&str>, pattern: i8, op: i8) -> DeleteAclsFilter {
    DeleteAclsFilter::default()
        .with_resource_type_filter(t)
        .with_resource_name_filter(name.map(sb))
        .with_pattern_type_filter(pattern)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(op)
        .with_permission_type(1)
}

fn acls(pair: &mut Pair) -> anyhow::Result<()> {
    let create = |rows: &[Row]| {
        RequestKind::CreateAcls(
            CreateAclsRequest::default().with_creations(rows.iter().map(creation).collect()),
        )
    };
    for version in pair.versions(ApiKey::CreateAcls) {
        pair.both(version, |_| create(CREATED))?;
        for refused in REFUSED {
            pair.both(version, |_| create(std::slice::from_ref(refused)))?;
        }
    }
    // Kafka's authorizer applies the metadata log's records a moment after CreateAcls answers.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for version in pair.versions(ApiKey::DescribeAcls) {
        pair.both(version, |_| describe(2, Some("kd-acl-t"), 3))?;
        pair.both(version, |_| describe(2, Some("kd-acl-"), 4))?;
        pair.both(version, |_| describe(3, Some("kd-acl-g"), 1))?;
        pair.both(version, |_| describe(4, None, 1))?;
        pair.both(version, |_| describe(5, Some("kd-acl-tx"), 2))?;
        pair.both(version, |_| describe(2, Some("kd-acl-nothing"), 3))?;
        pair.both(version, |_| describe(0, None, 1))?;
        pair.both(version, |_| describe(2, None, 0))?;
    }
    for version in pair.versions(ApiKey::DeleteAcls) {
        let request = |filters: Vec<DeleteAclsFilter>| {
            RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(filters))
        };
        pair.both(version, |_| {
            request(vec![
                filter(2, Some("kd-acl-t"), 3, 1),
                filter(2, None, 0, 1),
            ])
        })?;
        pair.both(version, |_| {
            request(vec![filter(3, Some("kd-acl-g"), 1, 8)])
        })?;
        pair.both(version, |_| request(vec![filter(2, Some("kd-acl-"), 4, 1)]))?;
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for version in pair.versions(ApiKey::DescribeAcls) {
        pair.both(version, |_| describe(2, Some("kd-acl-t"), 3))?;
        pair.both(version, |_| describe(3, Some("kd-acl-g"), 1))?;
    }
    let cleanup = |_: &_| {
        RequestKind::DeleteAcls(
            DeleteAclsRequest::default().with_filters(vec![filter(1, None, 1, 1)]),
        )
    };
    pair.send(2, &cleanup)?;
    Ok(())
}
