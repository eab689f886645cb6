//! What a connection may do: the ACL check of one request's resources, with the semantics of
//! Kafka's StandardAuthorizer (`rill_metadata::acl`). Off unless `authorizer.class.name` names
//! it; off, everything is allowed, as in Kafka without an authorizer.
//!
//! [`Access`] is taken once per request: the principal (`User:` and the session's name), the
//! client's address and the bindings in force then. Which operation each API asks is the table
//! in `crate::handler::authz_guard`.

use std::sync::Arc;

use rill_metadata::acl::{
    Acls, Authorizer, AuthorizerConfig, Operation, Requester, ResourceType, CLUSTER_NAME,
};

use super::Broker;
use crate::security::session::Session;

/// The operations a topic has (Kafka's `AclEntry.supportedOperations(TOPIC)`), which KIP-430's
/// authorized-operations fields report on.
const TOPIC_OPERATIONS: [Operation; 8] = [
    Operation::Read,
    Operation::Write,
    Operation::Create,
    Operation::Delete,
    Operation::Alter,
    Operation::Describe,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
];

/// The operations a group has (`AclEntry.supportedOperations(GROUP)`; Kafka 4 adds the
/// group configs': 3400 with no authorizer, as the differential suite sees Kafka answer).
const GROUP_OPERATIONS: [Operation; 5] = [
    Operation::Read,
    Operation::Describe,
    Operation::Delete,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
];

/// The operations the cluster has (`AclEntry.supportedOperations(CLUSTER)`).
const CLUSTER_OPERATIONS: [Operation; 7] = [
    Operation::Create,
    Operation::ClusterAction,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
    Operation::IdempotentWrite,
    Operation::Alter,
    Operation::Describe,
];

/// KIP-430's value of an authorized-operations field the client did not ask for (Kafka's
/// `Integer.MIN_VALUE`).
pub const OPERATIONS_NOT_ASKED: i32 = i32::MIN;

/// The empty set of bindings, shared: no allocation per request.
fn no_acls() -> Arc<Acls> {
    static NONE: std::sync::OnceLock<Arc<Acls>> = std::sync::OnceLock::new();
    NONE.get_or_init(Arc::default).clone()
}

/// One request's view of the authorizer.
#[derive(Debug, Clone)]
pub struct Access<'a> {
    /// The settings, `None` with no authorizer.
    config: Option<&'a AuthorizerConfig>,
    /// The bindings in force when the request arrived (empty with no authorizer).
    acls: Arc<Acls>,
    /// Kafka's principal: `User:alice`, `User:ANONYMOUS`, `User:CN=client,O=Acme`.
    principal: String,
    /// The client's address as Kafka writes it (`127.0.0.1`); `*` matches it whatever it is.
    host: String,
    /// The topics a request finds (`None` in tests): what a Metadata or Produce would create.
    registry: Option<&'a crate::topics::TopicRegistry>,
    /// `auto.create.topics.enable`.
    auto_create: bool,
}

/// The access of `session`'s requests on `broker` now.
pub fn access<'a, B: Broker>(broker: &'a B, session: &Session) -> Access<'a> {
    let Some(config) = broker.config().authorizer() else {
        // No authorizer: nothing to look up, and nothing allocated on the request's path.
        return Access::open();
    };
    Access {
        config: Some(config),
        acls: super::acl_store::current(broker),
        principal: format!("User:{}", session.principal()),
        host: session
            .peer
            .map_or_else(String::new, |peer| peer.ip().to_string()),
        registry: Some(broker.topics()),
        auto_create: broker.config().auto_create_topics,
    }
}

impl Access<'_> {
    /// Everything allowed (no authorizer): what in-process callers without a session use.
    pub fn open() -> Access<'static> {
        Access {
            config: None,
            acls: no_acls(),
            principal: String::new(),
            host: String::new(),
            registry: None,
            auto_create: false,
        }
    }

    /// An authorizer with `config` over `acls`, for `principal` from `host` (tests).
    #[cfg(test)]
    pub fn for_tests<'a>(
        config: &'a AuthorizerConfig,
        acls: Acls,
        principal: &str,
        host: &str,
    ) -> Access<'a> {
        Access {
            config: Some(config),
            acls: Arc::new(acls),
            principal: principal.to_string(),
            host: host.to_string(),
            registry: None,
            auto_create: false,
        }
    }

    /// Whether an authorizer is configured.
    pub fn on(&self) -> bool {
        self.config.is_some()
    }

    /// Whether `op` on `(resource_type, name)` is allowed.
    pub fn allows(&self, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        let Some(config) = self.config else {
            return true;
        };
        let who = Requester {
            principal: &self.principal,
            host: &self.host,
        };
        Authorizer {
            config,
            acls: &self.acls,
        }
        .authorize(who, op, resource_type, name)
    }

    /// KIP-430's bit field of the operations on a topic this principal may do (bit `code` set
    /// for each allowed one), over Kafka's topic operations
    /// (`AclEntry.supportedOperations(TOPIC)`); with no authorizer all of them, as Kafka answers.
    pub fn topic_operations(&self, name: &str) -> i32 {
        self.operations(&TOPIC_OPERATIONS, ResourceType::Topic, name)
    }

    /// [`Self::topic_operations`] for the group `name`.
    pub fn group_operations(&self, name: &str) -> i32 {
        self.operations(&GROUP_OPERATIONS, ResourceType::Group, name)
    }

    /// [`Self::topic_operations`] for the cluster.
    pub fn cluster_operations(&self) -> i32 {
        self.operations(&CLUSTER_OPERATIONS, ResourceType::Cluster, CLUSTER_NAME)
    }

    fn operations(&self, ops: &[Operation], resource_type: ResourceType, name: &str) -> i32 {
        ops.iter()
            .filter(|&&op| self.allows(op, resource_type, name))
            .fold(0, |bits, op| bits | 1 << op.code())
    }

    /// Whether `op` on some resource of `resource_type` is allowed (Kafka's
    /// `authorizeByResourceType`).
    pub fn allows_any(&self, op: Operation, resource_type: ResourceType) -> bool {
        let Some(config) = self.config else {
            return true;
        };
        let who = Requester {
            principal: &self.principal,
            host: &self.host,
        };
        Authorizer {
            config,
            acls: &self.acls,
        }
        .authorize_any(who, op, resource_type)
    }

    /// Whether a request naming the topic `name` would auto-create it without CREATE on the
    /// cluster or the topic (Kafka's Metadata then answers TOPIC_AUTHORIZATION_FAILED).
    pub fn would_create_unallowed(&self, name: &str) -> bool {
        let Some(registry) = self.registry.filter(|_| self.on() && self.auto_create) else {
            return false;
        };
        !crate::internal_topics::is_internal(name)
            && registry.get(name).is_none()
            && !self.cluster(Operation::Create)
            && !self.topic(Operation::Create, name)
    }

    /// The name of the topic `id` names, if this broker knows it.
    pub fn topic_name_of(&self, id: uuid::Uuid) -> Option<String> {
        self.registry?.by_id(id).map(|(name, _)| name)
    }

    /// `op` on the topic `name`.
    pub fn topic(&self, op: Operation, name: &str) -> bool {
        self.allows(op, ResourceType::Topic, name)
    }

    /// `op` on the group `name`.
    pub fn group(&self, op: Operation, name: &str) -> bool {
        self.allows(op, ResourceType::Group, name)
    }

    /// `op` on the transactional id `name`.
    pub fn transactional_id(&self, op: Operation, name: &str) -> bool {
        self.allows(op, ResourceType::TransactionalId, name)
    }

    /// `op` on the cluster.
    pub fn cluster(&self, op: Operation) -> bool {
        self.allows(op, ResourceType::Cluster, CLUSTER_NAME)
    }
}
