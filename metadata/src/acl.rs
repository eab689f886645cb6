//! ACLs with the semantics of Kafka's `StandardAuthorizer` (KIP-801; `StandardAuthorizerData`,
//! `AclControlManager`): the bindings, the filters of DescribeAcls and DeleteAcls, what a new
//! binding must be, and [`Authorizer::authorize`], the decision every API's check ends in.
//! Runtime-free: the server's handlers call it; a cluster's controller decides CreateAcls and
//! DeleteAcls here too ([`decide_create`], [`decide_delete`]), and the metadata log carries the
//! bindings (`AccessControlEntry` records) so every broker decides alike.
//!
//! The rules, as `StandardAuthorizerData.authorize` applies them:
//! - a principal in `super.users` is allowed everything;
//! - the bindings that apply to a resource are its LITERAL ones of the same name, the LITERAL
//!   ones of name `*`, and the PREFIXED ones whose name starts the resource's;
//! - a binding matches a request when its principal is the request's or `User:*`, its host
//!   is the client's address or `*`, and its operation is the one asked or ALL. An ALLOW
//!   binding of READ, WRITE, DELETE or ALTER also allows DESCRIBE, one of ALTER_CONFIGS also
//!   DESCRIBE_CONFIGS; a DENY binding denies only its own operation (or everything, for ALL);
//! - a matching DENY wins over any ALLOW; with no match the request is denied, unless the
//!   resource has no binding at all and `allow.everyone.if.no.acl.found` is true.

use std::collections::BTreeSet;

use rill_types::ErrorCode;
use serde::{Deserialize, Serialize};

/// The name of the one CLUSTER resource (Kafka's `CLUSTER_NAME`).
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// The resource name or host that stands for every one (Kafka's `WILDCARD_RESOURCE`, and
/// `WILDCARD` for hosts).
pub const WILDCARD: &str = "*";

/// The principal that stands for every user (Kafka's `WILDCARD_PRINCIPAL`).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Kafka's `authorizer.class.name` of the authorizer these semantics are.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// Declares a wire enum: its Kafka codes (`org.apache.kafka.common.*` `fromCode`) and names.
macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal $kafka:literal,)* }) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name { $($(#[$vdoc])* $variant,)* }

        impl $name {
            /// Every value, in code order.
            pub const ALL_VALUES: &'static [$name] = &[$($name::$variant,)*];

            /// The value of Kafka's code (`None`: UNKNOWN, ANY or a code Kafka does not know).
            pub fn from_code(code: i8) -> Option<Self> {
                match code { $($code => Some($name::$variant),)* _ => None }
            }

            /// Kafka's code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code,)* }
            }

            /// Kafka's name (`TOPIC`, `READ`, `ALLOW`...).
            pub fn kafka_name(self) -> &'static str {
                match self { $($name::$variant => $kafka,)* }
            }
        }
    };
}

/// Kafka's UNKNOWN code of every ACL enum.
pub const CODE_UNKNOWN: i8 = 0;
/// Kafka's ANY code of every ACL enum (filters only).
pub const CODE_ANY: i8 = 1;
/// Kafka's MATCH pattern type code (filters only).
pub const CODE_MATCH: i8 = 2;

wire_enum! {
    /// What kind of resource a binding is on (`org.apache.kafka.common.resource.ResourceType`).
    ResourceType {
        /// A topic.
        Topic = 2 "TOPIC",
        /// A consumer (or share) group.
        Group = 3 "GROUP",
        /// The cluster (one resource, [`CLUSTER_NAME`]).
        Cluster = 4 "CLUSTER",
        /// A producer's transactional id.
        TransactionalId = 5 "TRANSACTIONAL_ID",
        /// A delegation token.
        DelegationToken = 6 "DELEGATION_TOKEN",
        /// A user (delegation tokens made for others, KIP-373).
        User = 7 "USER",
    }
}

wire_enum! {
    /// How a binding's name applies (`org.apache.kafka.common.resource.PatternType`).
    PatternType {
        /// The resource of that very name (or every one, for `*`).
        Literal = 3 "LITERAL",
        /// Every resource whose name starts with it.
        Prefixed = 4 "PREFIXED",
    }
}

wire_enum! {
    /// What a request does to a resource (`org.apache.kafka.common.acl.AclOperation`).
    Operation {
        /// Every operation.
        All = 2 "ALL",
        /// Read (consume, commit offsets, join a group).
        Read = 3 "READ",
        /// Write (produce).
        Write = 4 "WRITE",
        /// Create.
        Create = 5 "CREATE",
        /// Delete.
        Delete = 6 "DELETE",
        /// Alter.
        Alter = 7 "ALTER",
        /// Describe (implied by an ALLOW of READ, WRITE, DELETE or ALTER).
        Describe = 8 "DESCRIBE",
        /// A broker's own requests (replica fetch, transaction markers).
        ClusterAction = 9 "CLUSTER_ACTION",
        /// Describe configs (implied by an ALLOW of ALTER_CONFIGS).
        DescribeConfigs = 10 "DESCRIBE_CONFIGS",
        /// Alter configs.
        AlterConfigs = 11 "ALTER_CONFIGS",
        /// Idempotent produce (InitProducerId without a transactional id).
        IdempotentWrite = 12 "IDEMPOTENT_WRITE",
        /// Create delegation tokens.
        CreateTokens = 13 "CREATE_TOKENS",
        /// Describe delegation tokens.
        DescribeTokens = 14 "DESCRIBE_TOKENS",
        /// Two-phase commit (KIP-939).
        TwoPhaseCommit = 15 "TWO_PHASE_COMMIT",
    }
}

wire_enum! {
    /// Whether a binding allows or denies (`org.apache.kafka.common.acl.AclPermissionType`).
    Permission {
        /// Denies; wins over any allow.
        Deny = 2 "DENY",
        /// Allows.
        Allow = 3 "ALLOW",
    }
}

impl Operation {
    /// Whether an ALLOW binding of `self` allows `asked` (Kafka's `IMPLIES_DESCRIBE` and
    /// `IMPLIES_DESCRIBE_CONFIGS`).
    pub fn allows(self, asked: Operation) -> bool {
        use Operation::*;
        self == All
            || self == asked
            || (asked == Describe && matches!(self, Read | Write | Delete | Alter))
            || (asked == DescribeConfigs && self == AlterConfigs)
    }

    /// Whether a DENY binding of `self` denies `asked`: its own operation only, or all.
    pub fn denies(self, asked: Operation) -> bool {
        self == Operation::All || self == asked
    }
}

/// One ACL: a resource pattern and an entry (Kafka's `AclBinding`). The principal is Kafka's
/// `Type:name` (`User:alice`), the host an address or `*`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    /// The resource's type.
    pub resource_type: ResourceType,
    /// The resource's name or name prefix.
    pub name: String,
    /// How the name applies.
    pub pattern: PatternType,
    /// Who (`User:alice`, `User:*`).
    pub principal: String,
    /// From where (an address, or `*`).
    pub host: String,
    /// What.
    pub operation: Operation,
    /// Allowed or denied.
    pub permission: Permission,
}

/// Every binding (the image's and a single node's registry's).
pub type Acls = BTreeSet<AclBinding>;

/// A binding as the wire carries it (CreateAcls' creation): codes unchecked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireAcl {
    /// ResourceType code.
    pub resource_type: i8,
    /// Resource name.
    pub name: String,
    /// PatternType code.
    pub pattern: i8,
    /// Principal.
    pub principal: String,
    /// Host.
    pub host: String,
    /// AclOperation code.
    pub operation: i8,
    /// AclPermissionType code.
    pub permission: i8,
}

/// Why a binding or filter off the wire is not taken, as Kafka 4.4 answers it (compared with
/// it by the differential suite's `acls` case).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AclError {
    /// A field UNKNOWN, or of a code Kafka does not know: Kafka's request parsing refuses the
    /// request (`isUnknown()`), and the connection is closed.
    Malformed,
    /// A creation with ANY or MATCH in it: Kafka cannot build the binding and answers every
    /// creation of the request UNKNOWN_SERVER_ERROR, without a message.
    Unbuildable,
    /// This binding refused (`AclControlManager.validateNewAcl`, `AclApis`).
    Refused(ErrorCode, String),
}

fn invalid(message: impl Into<String>) -> AclError {
    AclError::Refused(ErrorCode::InvalidRequest, message.into())
}

/// The value of `code`: `Err(Unbuildable)` for ANY (and MATCH where `matches` is given),
/// `Err(Malformed)` for UNKNOWN or a code Kafka does not know.
fn concrete<T>(code: i8, from: impl Fn(i8) -> Option<T>, matches: bool) -> Result<T, AclError> {
    match (code, from(code)) {
        (_, Some(v)) => Ok(v),
        (CODE_ANY, None) => Err(AclError::Unbuildable),
        (CODE_MATCH, None) if matches => Err(AclError::Unbuildable),
        _ => Err(AclError::Malformed),
    }
}

impl WireAcl {
    /// The binding, if Kafka would store it: every code concrete ([`AclError`]), the broker's
    /// checks (`AclApis`: the CLUSTER resource is only `kafka-cluster`; a name), and a
    /// principal of Kafka's `Type:name` form (`SecurityUtils.parseKafkaPrincipal`); Kafka's
    /// messages.
    pub fn validate(&self) -> Result<AclBinding, AclError> {
        let resource_type = concrete(self.resource_type, ResourceType::from_code, false);
        let pattern = concrete(self.pattern, PatternType::from_code, true);
        let operation = concrete(self.operation, Operation::from_code, false);
        let permission = concrete(self.permission, Permission::from_code, false);
        let all = [
            resource_type.as_ref().err(),
            pattern.as_ref().err(),
            operation.as_ref().err(),
            permission.as_ref().err(),
        ];
        if all.contains(&Some(&AclError::Malformed)) {
            return Err(AclError::Malformed);
        }
        let (resource_type, pattern, operation, permission) =
            (resource_type?, pattern?, operation?, permission?);
        if resource_type == ResourceType::Cluster && self.name != CLUSTER_NAME {
            return Err(invalid(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            )));
        }
        if self.name.is_empty() {
            return Err(invalid("Invalid empty resource name"));
        }
        if self.principal.split_once(':').is_none() {
            return Err(invalid(format!(
                "Could not parse principal from `{}` (no colon is present separating the \
                 principal type from the principal name)",
                self.principal
            )));
        }
        Ok(AclBinding {
            resource_type,
            name: self.name.clone(),
            pattern,
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation,
            permission,
        })
    }
}

/// Which bindings' pattern a filter takes (Kafka's PatternType in a filter).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PatternFilter {
    /// Both patterns; a name must be the binding's own.
    Any,
    /// Every binding that applies to the named resource: LITERAL of that name or `*`,
    /// PREFIXED of a prefix of it.
    Match,
    /// This pattern only, of that very name.
    Only(PatternType),
}

/// A DescribeAcls or DeleteAcls filter (Kafka's `AclBindingFilter`): `None` takes any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    /// The resource type.
    pub resource_type: Option<ResourceType>,
    /// The resource name.
    pub name: Option<String>,
    /// The pattern.
    pub pattern: PatternFilter,
    /// The principal, exactly.
    pub principal: Option<String>,
    /// The host, exactly.
    pub host: Option<String>,
    /// The operation, exactly (no implication).
    pub operation: Option<Operation>,
    /// The permission.
    pub permission: Option<Permission>,
}

/// A filter as the wire carries it: codes unchecked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireFilter {
    /// ResourceType code (ANY = 1).
    pub resource_type: i8,
    /// Resource name, `None` for any.
    pub name: Option<String>,
    /// PatternType code (ANY = 1, MATCH = 2).
    pub pattern: i8,
    /// Principal, `None` for any.
    pub principal: Option<String>,
    /// Host, `None` for any.
    pub host: Option<String>,
    /// AclOperation code (ANY = 1).
    pub operation: i8,
    /// AclPermissionType code (ANY = 1).
    pub permission: i8,
}

/// `Some(None)` for ANY, `Some(Some(v))` for a value, `None` for UNKNOWN or a stray code.
fn any_or<T>(code: i8, from: impl Fn(i8) -> Option<T>) -> Option<Option<T>> {
    match code {
        CODE_ANY => Some(None),
        c => from(c).map(Some),
    }
}

impl WireFilter {
    /// The filter; a field UNKNOWN (or of a code Kafka does not know) is
    /// [`AclError::Malformed`]: Kafka's parsing refuses the request and closes the connection.
    pub fn validate(&self) -> Result<AclFilter, AclError> {
        let pattern = match self.pattern {
            CODE_ANY => Some(PatternFilter::Any),
            CODE_MATCH => Some(PatternFilter::Match),
            c => PatternType::from_code(c).map(PatternFilter::Only),
        };
        let resource_type = any_or(self.resource_type, ResourceType::from_code);
        let operation = any_or(self.operation, Operation::from_code);
        let permission = any_or(self.permission, Permission::from_code);
        let (Some(pattern), Some(resource_type), Some(operation), Some(permission)) =
            (pattern, resource_type, operation, permission)
        else {
            return Err(AclError::Malformed);
        };
        Ok(AclFilter {
            resource_type,
            name: self.name.clone(),
            pattern,
            principal: self.principal.clone(),
            host: self.host.clone(),
            operation,
            permission,
        })
    }
}

impl AclFilter {
    /// Every binding (DescribeAcls with every field ANY).
    pub fn any() -> Self {
        AclFilter {
            resource_type: None,
            name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// Whether `b` passes (Kafka's `ResourcePatternFilter.matches` and
    /// `AccessControlEntryFilter.matches`).
    pub fn matches(&self, b: &AclBinding) -> bool {
        let exact = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        self.resource_type.is_none_or(|t| t == b.resource_type)
            && self.pattern_matches(b)
            && exact(&self.principal, &b.principal)
            && exact(&self.host, &b.host)
            && self.operation.is_none_or(|o| o == b.operation)
            && self.permission.is_none_or(|p| p == b.permission)
    }

    fn pattern_matches(&self, b: &AclBinding) -> bool {
        if let PatternFilter::Only(p) = self.pattern {
            if p != b.pattern {
                return false;
            }
        }
        let Some(name) = &self.name else {
            return true;
        };
        match (self.pattern, b.pattern) {
            (PatternFilter::Match, PatternType::Literal) => *name == b.name || b.name == WILDCARD,
            (PatternFilter::Match, PatternType::Prefixed) => name.starts_with(&b.name),
            _ => *name == b.name,
        }
    }
}

/// The bindings of `bindings` not in `acls` yet: what a CreateAcls adds (Kafka ignores a
/// binding that exists, and answers it created).
pub fn decide_create(acls: &Acls, bindings: &[AclBinding]) -> Vec<AclBinding> {
    let mut new = BTreeSet::new();
    for b in bindings {
        if !acls.contains(b) {
            new.insert(b.clone());
        }
    }
    new.into_iter().collect()
}

/// DeleteAcls: per filter the bindings it matches (a binding two filters match is listed
/// under each, as Kafka's), and every binding to remove.
pub fn decide_delete(
    acls: &Acls,
    filters: &[AclFilter],
) -> (Vec<Vec<AclBinding>>, Vec<AclBinding>) {
    let mut removed = BTreeSet::new();
    let matched = filters
        .iter()
        .map(|f| {
            let hits: Vec<AclBinding> = acls.iter().filter(|b| f.matches(b)).cloned().collect();
            removed.extend(hits.iter().cloned());
            hits
        })
        .collect();
    (matched, removed.into_iter().collect())
}

/// A change to the bindings (a record's effect).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AclChange {
    /// Add a binding.
    Add(AclBinding),
    /// Remove a binding.
    Remove(AclBinding),
}

/// Applies `changes` in order.
pub fn apply(acls: &mut Acls, changes: &[AclChange]) {
    for change in changes {
        match change {
            AclChange::Add(b) => {
                acls.insert(b.clone());
            }
            AclChange::Remove(b) => {
                acls.remove(b);
            }
        }
    }
}

/// Who asks: the principal (`User:alice`) and the client's address as text (`127.0.0.1`).
#[derive(Clone, Copy, Debug)]
pub struct Requester<'a> {
    /// Kafka's principal, `Type:name`.
    pub principal: &'a str,
    /// The client's address (`InetAddress.getHostAddress`).
    pub host: &'a str,
}

/// The authorizer's settings: `super.users` and `allow.everyone.if.no.acl.found`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// Principals allowed everything (`super.users`, `User:a;User:b`).
    pub super_users: BTreeSet<String>,
    /// Whether a resource with no binding at all is open to everyone (Kafka's default false).
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// Parses `super.users` as Kafka does: principals separated by `;`, blanks dropped.
    pub fn parse_super_users(text: &str) -> BTreeSet<String> {
        text.split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// The decision procedure over a set of bindings (borrowed: the image's or the registry's).
#[derive(Clone, Copy, Debug)]
pub struct Authorizer<'a> {
    /// Its settings.
    pub config: &'a AuthorizerConfig,
    /// The bindings.
    pub acls: &'a Acls,
}

/// Whether a binding's pattern applies to the resource `name`.
fn applies(b: &AclBinding, name: &str) -> bool {
    match b.pattern {
        PatternType::Literal => b.name == name || b.name == WILDCARD,
        PatternType::Prefixed => name.starts_with(&b.name),
    }
}

impl Authorizer<'_> {
    /// Whether `who` may do `op` on the resource `(resource_type, name)`
    /// (`StandardAuthorizerData.authorize`; the rules are in the module doc).
    pub fn authorize(
        &self,
        who: Requester<'_>,
        op: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.config.super_users.contains(who.principal) {
            return true;
        }
        let mut has_resource_acls = false;
        let mut allowed = false;
        for b in self.acls.iter() {
            if b.resource_type != resource_type || !applies(b, name) {
                continue;
            }
            has_resource_acls = true;
            let principal = b.principal == who.principal || b.principal == WILDCARD_PRINCIPAL;
            let host = b.host == WILDCARD || b.host == who.host;
            if !principal || !host {
                continue;
            }
            match b.permission {
                Permission::Deny if b.operation.denies(op) => return false,
                Permission::Allow if b.operation.allows(op) => allowed = true,
                _ => {}
            }
        }
        allowed || (!has_resource_acls && self.config.allow_everyone_if_no_acl_found)
    }

    /// Whether `who` may do `op` on some resource of `resource_type` (Kafka's
    /// `Authorizer.authorizeByResourceType`, what InitProducerId asks of topics): an ALLOW
    /// binding of `op` (or ALL) for them whose own resource a DENY does not take away.
    pub fn authorize_any(
        &self,
        who: Requester<'_>,
        op: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.config.super_users.contains(who.principal) {
            return true;
        }
        self.acls.iter().any(|b| {
            b.resource_type == resource_type
                && b.permission == Permission::Allow
                && (b.operation == op || b.operation == Operation::All)
                && (b.principal == who.principal || b.principal == WILDCARD_PRINCIPAL)
                && (b.host == WILDCARD || b.host == who.host)
                && self.authorize(who, op, resource_type, &b.name)
        })
    }
}

#[cfg(test)]
mod tests;
