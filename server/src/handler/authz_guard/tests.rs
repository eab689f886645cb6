//! The guard against real requests and the in-memory broker: what is refused and how it is
//! answered.

use super::*;
use crate::handler::authz_filter::patch;
use rill_metadata::acl::{
    AclBinding, Acls, AuthorizerConfig, PatternType, Permission, ResourceType,
};
use rill_protocol::kafka_protocol::messages::*;

fn allow(t: ResourceType, name: &str, op: Operation) -> AclBinding {
    AclBinding {
        resource_type: t,
        name: name.to_string(),
        pattern: PatternType::Literal,
        principal: "User:alice".to_string(),
        host: "*".to_string(),
        operation: op,
        permission: Permission::Allow,
    }
}

fn alice<'a>(config: &'a AuthorizerConfig, acls: &[AclBinding]) -> Access<'a> {
    let acls: Acls = acls.iter().cloned().collect();
    Access::for_tests(config, acls, "User:alice", "127.0.0.1")
}

#[test]
fn the_table_names_every_registry_api() {
    for e in rill_protocol::api_registry::entries() {
        let _ = rule(e.api_key);
    }
    assert_eq!(rule(ApiKey::ApiVersions), Rule::Open);
    assert_eq!(rule(ApiKey::ElectLeaders), Rule::Cluster(Operation::Alter));
    assert_eq!(rule(ApiKey::Produce), Rule::PerResource);
    assert_eq!(rule(ApiKey::DescribeConfigs), Rule::PerResource);
    assert_eq!(rule(ApiKey::ListTransactions), Rule::PerResource);
    assert_eq!(rule(ApiKey::ShareFetch), Rule::PerResource);
}

#[test]
fn produce_refuses_the_topics_without_write_and_serves_the_rest() {
    let config = AuthorizerConfig::default();
    let access = alice(
        &config,
        &[allow(ResourceType::Topic, "ok", Operation::Write)],
    );
    let topic = |name: &str| {
        produce_request::TopicProduceData::default()
            .with_name(crate::handler::topic_name(name))
            .with_partition_data(vec![produce_request::PartitionProduceData::default()])
    };
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_topic_data(vec![topic("ok"), topic("read-only")]);
    let (body, refused) = authz_filter::check(&access, 9, RequestKind::Produce(request)).unwrap();
    let RequestKind::Produce(served) = body else {
        panic!()
    };
    assert_eq!(served.topic_data.len(), 1);
    let answer = patch(
        &access,
        refused,
        9,
        Answer::body(ProduceResponse::default()),
    );
    let Answer::Body(ResponseKind::Produce(r)) = answer else {
        panic!()
    };
    assert_eq!(r.responses.len(), 1);
    assert_eq!(
        r.responses[0].partition_responses[0].error_code,
        ErrorCode::TopicAuthorizationFailed.code()
    );
}

#[test]
fn metadata_hides_topics_without_describe_and_refuses_named_ones() {
    let config = AuthorizerConfig::default();
    let access = alice(
        &config,
        &[allow(ResourceType::Topic, "mine", Operation::Read)],
    );
    let named = |n: &str| {
        metadata_request::MetadataRequestTopic::default()
            .with_name(Some(crate::handler::topic_name(n)))
    };
    let request = MetadataRequest::default().with_topics(Some(vec![named("mine"), named("other")]));
    let (body, refused) = authz_filter::check(&access, 12, RequestKind::Metadata(request)).unwrap();
    let RequestKind::Metadata(served) = body else {
        panic!()
    };
    assert_eq!(served.topics.unwrap().len(), 1);
    let shown = |n: &str| {
        metadata_response::MetadataResponseTopic::default()
            .with_name(Some(crate::handler::topic_name(n)))
    };
    let answer = Answer::body(MetadataResponse::default().with_topics(vec![shown("mine")]));
    let Answer::Body(ResponseKind::Metadata(r)) = patch(&access, refused, 12, answer) else {
        panic!()
    };
    let codes: Vec<_> = r.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, vec![0, ErrorCode::TopicAuthorizationFailed.code()]);
    // Every topic asked: the others are left out.
    let (_, refused) = authz_filter::check(
        &access,
        12,
        RequestKind::Metadata(MetadataRequest::default().with_topics(None)),
    )
    .unwrap();
    let answer =
        Answer::body(MetadataResponse::default().with_topics(vec![shown("mine"), shown("other")]));
    let Answer::Body(ResponseKind::Metadata(r)) = patch(&access, refused, 12, answer) else {
        panic!()
    };
    assert_eq!(r.topics.len(), 1);
}

#[test]
fn group_apis_need_read_on_the_group() {
    let config = AuthorizerConfig::default();
    let access = alice(&config, &[allow(ResourceType::Group, "g", Operation::Read)]);
    let join = |g: &str| {
        RequestKind::JoinGroup(
            JoinGroupRequest::default().with_group_id(GroupId(crate::handler::str_bytes(g))),
        )
    };
    assert!(authz_filter::check(&access, 5, join("g")).is_ok());
    let Err(answer) = authz_filter::check(&access, 5, join("h")) else {
        panic!()
    };
    let Answer::Body(ResponseKind::JoinGroup(r)) = *answer else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::GroupAuthorizationFailed.code());
}

#[test]
fn configs_are_described_and_altered_resource_by_resource() {
    use crate::handler::str_bytes;
    let config = AuthorizerConfig::default();
    let access = alice(
        &config,
        &[allow(ResourceType::Topic, "mine", Operation::AlterConfigs)],
    );
    let resource = |name: &str| {
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(str_bytes(name))
    };
    let request =
        DescribeConfigsRequest::default().with_resources(vec![resource("mine"), resource("other")]);
    let (_, refused) =
        authz_filter::check(&access, 4, RequestKind::DescribeConfigs(request)).unwrap();
    let result = |name: &str| {
        describe_configs_response::DescribeConfigsResult::default()
            .with_resource_type(2)
            .with_resource_name(str_bytes(name))
    };
    let answer = Answer::body(
        DescribeConfigsResponse::default().with_results(vec![result("mine"), result("other")]),
    );
    let Answer::Body(ResponseKind::DescribeConfigs(r)) = patch(&access, refused, 4, answer) else {
        panic!()
    };
    let codes: Vec<_> = r.results.iter().map(|x| x.error_code).collect();
    assert_eq!(codes, vec![0, ErrorCode::TopicAuthorizationFailed.code()]);
    // A broker's configs need the operation on the cluster.
    let alter = |kind: i8, name: &str| {
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(str_bytes(name))
    };
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        alter(2, "mine"),
        alter(4, "1"),
        alter(2, "other"),
    ]);
    let (body, refused) =
        authz_filter::check(&access, 1, RequestKind::IncrementalAlterConfigs(request)).unwrap();
    let RequestKind::IncrementalAlterConfigs(served) = body else {
        panic!()
    };
    assert_eq!(served.resources.len(), 1);
    let answer = Answer::body(IncrementalAlterConfigsResponse::default());
    let Answer::Body(ResponseKind::IncrementalAlterConfigs(r)) = patch(&access, refused, 1, answer)
    else {
        panic!()
    };
    let codes: Vec<_> = r.responses.iter().map(|x| x.error_code).collect();
    assert_eq!(
        codes,
        vec![
            ErrorCode::ClusterAuthorizationFailed.code(),
            ErrorCode::TopicAuthorizationFailed.code()
        ]
    );
}

#[test]
fn txn_offset_commit_needs_the_transactional_id_the_group_and_the_topics() {
    use crate::handler::{str_bytes, topic_name};
    let config = AuthorizerConfig::default();
    let access = alice(
        &config,
        &[
            allow(ResourceType::TransactionalId, "tx", Operation::Write),
            allow(ResourceType::Group, "g", Operation::Read),
            allow(ResourceType::Topic, "t", Operation::Read),
        ],
    );
    let request = |tx: &str| {
        let topic = |n: &str| {
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(topic_name(n))
                .with_partitions(vec![Default::default()])
        };
        TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(str_bytes(tx)))
            .with_group_id(GroupId(str_bytes("g")))
            .with_topics(vec![topic("t"), topic("u")])
    };
    let codes = |tx: &str| {
        let (body, refused) =
            authz_filter::check(&access, 3, RequestKind::TxnOffsetCommit(request(tx))).unwrap();
        let RequestKind::TxnOffsetCommit(served) = body else {
            panic!()
        };
        let answer = Answer::body(TxnOffsetCommitResponse::default());
        let Answer::Body(ResponseKind::TxnOffsetCommit(r)) = patch(&access, refused, 3, answer)
        else {
            panic!()
        };
        let refused: Vec<_> = r
            .topics
            .iter()
            .map(|t| t.partitions[0].error_code)
            .collect();
        (served.topics.len(), refused)
    };
    assert_eq!(
        codes("tx"),
        (1, vec![ErrorCode::TopicAuthorizationFailed.code()])
    );
    let txn = ErrorCode::TransactionalIdAuthorizationFailed.code();
    assert_eq!(codes("other"), (0, vec![txn, txn]));
}

#[test]
fn transactions_are_listed_and_described_only_with_describe_on_their_id() {
    use crate::handler::str_bytes;
    let config = AuthorizerConfig::default();
    let access = alice(
        &config,
        &[allow(
            ResourceType::TransactionalId,
            "mine",
            Operation::Write,
        )],
    );
    let listed = |id: &str| {
        list_transactions_response::TransactionState::default()
            .with_transactional_id(TransactionalId(str_bytes(id)))
    };
    let (_, refused) = authz_filter::check(
        &access,
        1,
        RequestKind::ListTransactions(ListTransactionsRequest::default()),
    )
    .unwrap();
    let answer = Answer::body(
        ListTransactionsResponse::default()
            .with_transaction_states(vec![listed("mine"), listed("theirs")]),
    );
    let Answer::Body(ResponseKind::ListTransactions(r)) = patch(&access, refused, 1, answer) else {
        panic!()
    };
    assert_eq!(r.transaction_states.len(), 1, "WRITE implies DESCRIBE");
    let described = |id: &str| {
        describe_transactions_response::TransactionState::default()
            .with_transactional_id(TransactionalId(str_bytes(id)))
    };
    let (_, refused) = authz_filter::check(
        &access,
        0,
        RequestKind::DescribeTransactions(DescribeTransactionsRequest::default()),
    )
    .unwrap();
    let answer = Answer::body(
        DescribeTransactionsResponse::default()
            .with_transaction_states(vec![described("mine"), described("theirs")]),
    );
    let Answer::Body(ResponseKind::DescribeTransactions(r)) = patch(&access, refused, 0, answer)
    else {
        panic!()
    };
    let codes: Vec<_> = r.transaction_states.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![0, ErrorCode::TransactionalIdAuthorizationFailed.code()]
    );
}

#[test]
fn share_groups_need_read_on_the_group() {
    use crate::handler::str_bytes;
    let config = AuthorizerConfig::default();
    let access = alice(
        &config,
        &[allow(ResourceType::Group, "sg", Operation::Read)],
    );
    let fetch = |g: &str| {
        RequestKind::ShareFetch(
            ShareFetchRequest::default().with_group_id(Some(GroupId(str_bytes(g)))),
        )
    };
    assert!(authz_filter::check(&access, 1, fetch("sg")).is_ok());
    let Err(answer) = authz_filter::check(&access, 1, fetch("other")) else {
        panic!()
    };
    let Answer::Body(ResponseKind::ShareFetch(r)) = *answer else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::GroupAuthorizationFailed.code());
    let describe = ShareGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(str_bytes("sg")), GroupId(str_bytes("other"))]);
    let (_, refused) =
        authz_filter::check(&access, 1, RequestKind::ShareGroupDescribe(describe)).unwrap();
    let described = |g: &str| {
        share_group_describe_response::DescribedGroup::default()
            .with_group_id(GroupId(str_bytes(g)))
    };
    let answer = Answer::body(
        ShareGroupDescribeResponse::default()
            .with_groups(vec![described("sg"), described("other")]),
    );
    let Answer::Body(ResponseKind::ShareGroupDescribe(r)) = patch(&access, refused, 1, answer)
    else {
        panic!()
    };
    let codes: Vec<_> = r.groups.iter().map(|g| g.error_code).collect();
    assert_eq!(
        codes,
        vec![0, ErrorCode::GroupAuthorizationFailed.code()],
        "READ implies DESCRIBE"
    );
}

#[test]
fn topic_operations_report_what_the_principal_may_do() {
    // Without an authorizer every topic operation, as Kafka answers (KIP-430: 3576).
    assert_eq!(Access::open().topic_operations("t"), 3576);
    let config = AuthorizerConfig::default();
    // Nothing granted: nothing.
    assert_eq!(alice(&config, &[]).topic_operations("t"), 0);
    // READ implies DESCRIBE (bits 3 and 8); on another topic, nothing.
    let read = alice(&config, &[allow(ResourceType::Topic, "t", Operation::Read)]);
    assert_eq!(read.topic_operations("t"), 1 << 3 | 1 << 8);
    assert_eq!(read.topic_operations("u"), 0);
}

#[test]
fn group_and_cluster_operations_report_what_the_principal_may_do() {
    // Without an authorizer, Kafka 4's answers (seen by the differential suite).
    assert_eq!(Access::open().group_operations("g"), 3400);
    assert_eq!(Access::open().cluster_operations(), 8096);
    let config = AuthorizerConfig::default();
    let read = alice(&config, &[allow(ResourceType::Group, "g", Operation::Read)]);
    assert_eq!(read.group_operations("g"), 1 << 3 | 1 << 8);
    assert_eq!(read.group_operations("h"), 0);
    assert_eq!(read.cluster_operations(), 0);
    let alter = alice(
        &config,
        &[allow(
            ResourceType::Cluster,
            "kafka-cluster",
            Operation::Alter,
        )],
    );
    // ALTER implies DESCRIBE (bits 7 and 8).
    assert_eq!(alter.cluster_operations(), 1 << 7 | 1 << 8);
}

#[test]
fn a_consumer_group_heartbeat_naming_a_topic_it_may_not_describe_is_refused_whole() {
    let config = AuthorizerConfig::default();
    let access = alice(
        &config,
        &[
            allow(ResourceType::Group, "g", Operation::Read),
            allow(ResourceType::Topic, "seen", Operation::Read),
        ],
    );
    let heartbeat = |names: Option<Vec<&str>>, regex: Option<&str>| {
        RequestKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(crate::handler::str_bytes("g")))
                .with_subscribed_topic_names(
                    names.map(|n| n.into_iter().map(crate::handler::topic_name).collect()),
                )
                .with_subscribed_topic_regex(regex.map(crate::handler::str_bytes)),
        )
    };
    let served = |body| authz_filter::check(&access, 1, body).is_ok();
    assert!(served(heartbeat(Some(vec!["seen"]), None)));
    // A regex is let through: its matches are filtered when the handler resolves it.
    assert!(served(heartbeat(None, Some("s.*"))));
    let Err(answer) =
        authz_filter::check(&access, 1, heartbeat(Some(vec!["seen", "hidden"]), None))
    else {
        panic!("a subscription to a hidden topic was served")
    };
    let Answer::Body(ResponseKind::ConsumerGroupHeartbeat(r)) = *answer else {
        panic!()
    };
    assert_eq!(r.error_code, ErrorCode::TopicAuthorizationFailed.code());
}

#[test]
fn a_described_group_holding_a_topic_the_caller_may_not_describe_is_not_shown() {
    use consumer_group_describe_response::{Assignment, DescribedGroup, Member, TopicPartitions};
    let config = AuthorizerConfig::default();
    let access = alice(
        &config,
        &[
            allow(ResourceType::Group, "g", Operation::Describe),
            allow(ResourceType::Group, "h", Operation::Describe),
            allow(ResourceType::Topic, "seen", Operation::Describe),
        ],
    );
    let holding = |topic: &str| {
        Assignment::default().with_topic_partitions(vec![TopicPartitions::default()
            .with_topic_name(crate::handler::topic_name(topic))
            .with_partitions(vec![0])])
    };
    let group = |id: &str, assigned: &str, target: &str| {
        DescribedGroup::default()
            .with_group_id(GroupId(crate::handler::str_bytes(id)))
            .with_members(vec![Member::default()
                .with_assignment(holding(assigned))
                .with_target_assignment(holding(target))])
    };
    let answer = ConsumerGroupDescribeResponse::default().with_groups(vec![
        group("g", "seen", "seen"),
        // Only the target assignment names the hidden topic: hidden all the same.
        group("h", "seen", "hidden"),
    ]);
    let Answer::Body(ResponseKind::ConsumerGroupDescribe(r)) = patch(
        &access,
        authz_filter::Refused::FilterAnswer,
        0,
        Answer::body(answer),
    ) else {
        panic!()
    };
    assert_eq!(r.groups[0].error_code, 0);
    assert_eq!(r.groups[0].members.len(), 1);
    assert_eq!(
        r.groups[1].error_code,
        ErrorCode::TopicAuthorizationFailed.code()
    );
    assert!(r.groups[1].members.is_empty());
    assert_eq!(
        r.groups[1].error_message.as_deref(),
        Some(authz_filter::HIDDEN_TOPICS)
    );
}
