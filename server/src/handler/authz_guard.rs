//! The ONE table of what each API must be allowed (Kafka's "Operations and Resources on
//! Protocols" in its security docs, as `KafkaApis` / `AclApis` / the group and transaction
//! handlers of Kafka 4 check them), and its enforcement at dispatch: [`guard`] runs before the
//! handler and either refuses the whole request, or lets it through with what it refused;
//! [`Patch::apply`] puts the refused resources back into the answer with Kafka's error codes.
//! With no authorizer configured nothing is checked.
//!
//! | API | Kafka requires | refused with |
//! |-----|----------------|--------------|
//! | ApiVersions, SaslHandshake, SaslAuthenticate, DescribeCluster | nothing | |
//! | Produce | WRITE on the transactional id (if one is named), WRITE on each topic | TRANSACTIONAL_ID_AUTHORIZATION_FAILED (every partition), TOPIC_AUTHORIZATION_FAILED |
//! | Fetch (consumer) | READ on each topic | TOPIC_AUTHORIZATION_FAILED |
//! | Fetch (follower) | CLUSTER_ACTION on the cluster: here the replica secret (SECURITY.md, "Replication") | |
//! | ListOffsets, OffsetForLeaderEpoch | DESCRIBE on each topic | TOPIC_AUTHORIZATION_FAILED |
//! | Metadata | DESCRIBE on each topic: all-topic requests leave the others out | TOPIC_AUTHORIZATION_FAILED |
//! | OffsetCommit | READ on the group, READ on each topic | GROUP_AUTHORIZATION_FAILED (every partition), TOPIC_AUTHORIZATION_FAILED |
//! | OffsetFetch | DESCRIBE on the group, DESCRIBE on each topic (all-topic requests leave the others out) | GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED |
//! | FindCoordinator | DESCRIBE on the group, or on the transactional id | GROUP_ / TRANSACTIONAL_ID_AUTHORIZATION_FAILED |
//! | JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat | READ on the group | GROUP_AUTHORIZATION_FAILED |
//! | DescribeGroups, ConsumerGroupDescribe | DESCRIBE on each group | GROUP_AUTHORIZATION_FAILED |
//! | ListGroups | DESCRIBE on the cluster, else only the groups it may DESCRIBE are listed | |
//! | DeleteGroups | DELETE on each group | GROUP_AUTHORIZATION_FAILED |
//! | CreateTopics | CREATE on the cluster or on each topic | TOPIC_AUTHORIZATION_FAILED |
//! | DeleteTopics | DELETE on each topic (one named by id: by its name) | TOPIC_AUTHORIZATION_FAILED |
//! | InitProducerId | WRITE on the transactional id; without one IDEMPOTENT_WRITE on the cluster or WRITE on some topic | TRANSACTIONAL_ID_ / CLUSTER_AUTHORIZATION_FAILED |
//! | EndTxn | WRITE on the transactional id | TRANSACTIONAL_ID_AUTHORIZATION_FAILED |
//! | AddOffsetsToTxn | WRITE on the transactional id, READ on the group | TRANSACTIONAL_ID_ / GROUP_AUTHORIZATION_FAILED |
//! | AddPartitionsToTxn v0-3 | WRITE on the transactional id, WRITE on each topic | as Produce; the other partitions OPERATION_NOT_ATTEMPTED |
//! | AddPartitionsToTxn v4-5, WriteTxnMarkers | CLUSTER_ACTION on the cluster (brokers' own requests) | CLUSTER_AUTHORIZATION_FAILED |
//! | TxnOffsetCommit | WRITE on the transactional id, READ on the group, READ on each topic | TRANSACTIONAL_ID_ / GROUP_AUTHORIZATION_FAILED (every partition), TOPIC_AUTHORIZATION_FAILED |
//! | OffsetDelete | DELETE on the group, READ on each topic | GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED |
//! | DeleteRecords | DELETE on each topic | TOPIC_AUTHORIZATION_FAILED |
//! | CreatePartitions | ALTER on each topic | TOPIC_AUTHORIZATION_FAILED |
//! | DescribeConfigs / AlterConfigs, IncrementalAlterConfigs | DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic, the group, or for brokers the cluster | TOPIC_ / GROUP_ / CLUSTER_AUTHORIZATION_FAILED |
//! | DescribeTopicPartitions | DESCRIBE on each topic (all-topic requests leave the others out) | TOPIC_AUTHORIZATION_FAILED |
//! | DescribeProducers | READ on each topic | TOPIC_AUTHORIZATION_FAILED |
//! | DescribeTransactions / ListTransactions | DESCRIBE on each transactional id (listing: the others left out) | TRANSACTIONAL_ID_AUTHORIZATION_FAILED |
//! | ShareGroupHeartbeat, ShareFetch, ShareAcknowledge | READ on the share group; READ on each topic fetched or acknowledged, DESCRIBE on each subscribed | GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED |
//! | ShareGroupDescribe, DescribeShareGroupOffsets | DESCRIBE on each group (and topic) | GROUP_ / TOPIC_AUTHORIZATION_FAILED |
//! | AlterShareGroupOffsets / DeleteShareGroupOffsets | ALTER / DELETE on the group, READ on each topic | GROUP_ / TOPIC_AUTHORIZATION_FAILED |
//! | CreateAcls, DeleteAcls / DescribeAcls | ALTER / DESCRIBE on the cluster (in their handlers) | CLUSTER_AUTHORIZATION_FAILED |
//! | ElectLeaders, AlterPartitionReassignments, AlterReplicaLogDirs, AlterUserScramCredentials | ALTER on the cluster | CLUSTER_AUTHORIZATION_FAILED |
//! | ListPartitionReassignments, DescribeLogDirs, DescribeUserScramCredentials | DESCRIBE on the cluster | CLUSTER_AUTHORIZATION_FAILED |
//! | DescribeClientQuotas / AlterClientQuotas | DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster | CLUSTER_AUTHORIZATION_FAILED |
//!
//! [`Rule::Interim`] (an API Kafka checks per resource, allowed here only with an operation on
//! the cluster until that is written) is used by none now.
//!
//! A whole request refused is answered with the API's top-level error code where its response
//! has one at that version (`crate::panic_guard::error_body`), else the connection is closed.

use rill_metadata::acl::Operation;
use rill_protocol::kafka_protocol::messages::{ApiKey, RequestKind};
use rill_protocol::ErrorCode;

use super::authz::{self, Access};
use super::authz_filter::{self, Refused};
use super::{Answer, Broker};
use crate::security::session::Session;

/// What an API asks of the cluster resource as a whole, or that its resources are checked one
/// by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Nothing.
    Open,
    /// Checked resource by resource ([`authz_filter`], or the ACL handlers themselves).
    PerResource,
    /// Kafka's own rule: this operation on the cluster.
    Cluster(Operation),
    /// Kafka checks each resource; until that is written here, this operation on the cluster.
    Interim(Operation),
}

/// The rule of `api` (the table in the module doc).
pub fn rule(api: ApiKey) -> Rule {
    use ApiKey::*;
    use Operation::{Alter, AlterConfigs, ClusterAction, Describe, DescribeConfigs};
    match api {
        ApiVersions | SaslHandshake | SaslAuthenticate | DescribeCluster => Rule::Open,
        ElectLeaders
        | AlterPartitionReassignments
        | AlterReplicaLogDirs
        | AlterUserScramCredentials => Rule::Cluster(Alter),
        ListPartitionReassignments | DescribeLogDirs | DescribeUserScramCredentials => {
            Rule::Cluster(Describe)
        }
        WriteTxnMarkers => Rule::Cluster(ClusterAction),
        DescribeClientQuotas => Rule::Cluster(DescribeConfigs),
        AlterClientQuotas => Rule::Cluster(AlterConfigs),
        _ => Rule::PerResource,
    }
}

/// What [`guard`] decided.
#[derive(Debug)]
pub enum Guarded<'a> {
    /// Serve this request (what is left of it), then [`Patch::apply`] the answer.
    Serve(RequestKind, Patch<'a>),
    /// Answer this without serving.
    Answer(Answer),
}

/// What the answer must be given back: the refused resources, and the access to filter by.
#[derive(Debug)]
pub struct Patch<'a> {
    access: Access<'a>,
    refused: Refused,
}

impl Patch<'_> {
    /// The handler's answer with the refused resources put back (and, for listing requests,
    /// what the principal may not see taken out).
    pub fn apply(self, version: i16, answer: Answer) -> Answer {
        if !self.access.on() {
            return answer;
        }
        authz_filter::patch(&self.access, self.refused, version, answer)
    }
}

/// The whole request refused with `code`: its top-level error where it has one, else closed.
pub fn refuse_whole(api: ApiKey, version: i16, code: ErrorCode) -> Answer {
    match crate::panic_guard::error_body(api, version, code) {
        Some(body) => Answer::Body(body),
        None => {
            tracing::debug!(?api, version, ?code, "request refused; closing connection");
            Answer::Close
        }
    }
}

/// Checks `body` (of `api` v`version`) against the ACLs of `session`'s principal.
pub fn guard<'a, B: Broker>(
    broker: &'a B,
    session: &Session,
    api: ApiKey,
    version: i16,
    body: RequestKind,
) -> Guarded<'a> {
    let access = authz::access(broker, session);
    if !access.on() {
        return Guarded::Serve(
            body,
            Patch {
                access,
                refused: Refused::Nothing,
            },
        );
    }
    let denied = match rule(api) {
        Rule::Open | Rule::PerResource => None,
        Rule::Cluster(op) | Rule::Interim(op) => (!access.cluster(op)).then_some(op),
    };
    if let Some(op) = denied {
        tracing::debug!(?api, ?op, "not authorized on the cluster");
        return Guarded::Answer(authz_filter::cluster_denied(api, version, &body));
    }
    match authz_filter::check(&access, version, body) {
        Ok((body, refused)) => Guarded::Serve(body, Patch { access, refused }),
        Err(answer) => Guarded::Answer(*answer),
    }
}

#[cfg(test)]
mod tests;
