//! Client quotas (KIP-13, KIP-124, KIP-546) as KRaft keeps and checks them: the quota of each
//! entity (a user, a client id, both, or an IP; each by name or as the default), AlterClientQuotas'
//! decision ([`decide_alter`], Kafka's `ClientQuotaControlManager`), DescribeClientQuotas'
//! filter ([`describe`], `ClientQuotasImage.describe`) and which quota applies to a connection
//! ([`ClientQuotas::resolve`], the default `ClientQuotaCallback` of `ClientQuotaManager`).
//! Runtime-free: a cluster's controller decides here and the metadata log carries the changes
//! (`ClientQuota` records); a single node's registry stores the same map.
//!
//! Which entity's quota applies to a connection of user U and client id C, most specific first
//! (Kafka's order; only entities that set the quota key count):
//!
//! | # | entity                         |
//! |---|--------------------------------|
//! | 1 | user U, client-id C            |
//! | 2 | user U, client-id default      |
//! | 3 | user U                         |
//! | 4 | user default, client-id C      |
//! | 5 | user default, client-id default|
//! | 6 | user default                   |
//! | 7 | client-id C                    |
//! | 8 | client-id default              |

use std::collections::BTreeMap;

use rill_types::ErrorCode;
use serde::{Deserialize, Serialize};

/// `producer_byte_rate`: bytes per second of Produce requests.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// `consumer_byte_rate`: bytes per second of Fetch responses.
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// `request_percentage`: percent of one request thread's time per quota window.
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// `controller_mutation_rate`: topic partitions created or deleted per second (KIP-599).
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
/// `connection_creation_rate`: connections per second from an IP (KIP-612).
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// A quota key's value type in Kafka's `QuotaConfig`, which bounds what may be stored.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum KeyType {
    Long,
    Int,
    Double,
}

/// The keys a user or client-id entity may set, with their types.
const USER_CLIENT_KEYS: &[(&str, KeyType)] = &[
    (PRODUCER_BYTE_RATE, KeyType::Long),
    (CONSUMER_BYTE_RATE, KeyType::Long),
    (REQUEST_PERCENTAGE, KeyType::Double),
    (CONTROLLER_MUTATION_RATE, KeyType::Double),
];

/// The keys an IP entity may set.
const IP_KEYS: &[(&str, KeyType)] = &[(CONNECTION_CREATION_RATE, KeyType::Int)];

/// What an entity component names (`ClientQuotaEntity.USER` and the others).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EntityType {
    /// `client-id`. First: the order Kafka's hash map lists an entity's components in.
    #[serde(rename = "client-id")]
    ClientId,
    /// `user`: the principal's name (`alice` of `User:alice`).
    #[serde(rename = "user")]
    User,
    /// `ip`: the client's address.
    #[serde(rename = "ip")]
    Ip,
}

impl EntityType {
    /// The type of Kafka's name (`None`: a type Kafka does not know).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "user" => Some(EntityType::User),
            "client-id" => Some(EntityType::ClientId),
            "ip" => Some(EntityType::Ip),
            _ => None,
        }
    }

    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            EntityType::User => "user",
            EntityType::ClientId => "client-id",
            EntityType::Ip => "ip",
        }
    }
}

/// A quota entity: each component's name, `None` for the default entity of that type.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaEntity(pub BTreeMap<EntityType, Option<String>>);

impl QuotaEntity {
    /// The name of its `kind` component: `None` if it has none, `Some(None)` for the default.
    pub fn component(&self, kind: EntityType) -> Option<Option<&str>> {
        self.0.get(&kind).map(Option::as_deref)
    }
}

/// A quota's value. Stored values are finite and positive (see [`decide_alter`]), so comparing
/// their bits is comparing them, as Kafka's `Objects.equals` on `Double` does.
#[derive(Copy, Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// One entity's quotas by key.
pub type EntityQuotas = BTreeMap<String, QuotaValue>;

/// Every entity's quotas (KRaft's `ClientQuotasImage`). An entity with no quota left is gone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<StoredEntity>", into = "Vec<StoredEntity>")]
pub struct ClientQuotas {
    entities: BTreeMap<QuotaEntity, EntityQuotas>,
}

/// [`ClientQuotas`] as stored: a list, since JSON maps are keyed by strings.
#[derive(Clone, Serialize, Deserialize)]
struct StoredEntity {
    entity: QuotaEntity,
    quotas: EntityQuotas,
}

impl From<Vec<StoredEntity>> for ClientQuotas {
    fn from(stored: Vec<StoredEntity>) -> Self {
        let entities = stored
            .into_iter()
            .filter(|s| !s.quotas.is_empty())
            .map(|s| (s.entity, s.quotas))
            .collect();
        ClientQuotas { entities }
    }
}

impl From<ClientQuotas> for Vec<StoredEntity> {
    fn from(quotas: ClientQuotas) -> Self {
        quotas
            .entities
            .into_iter()
            .map(|(entity, quotas)| StoredEntity { entity, quotas })
            .collect()
    }
}

/// One quota set or removed (KRaft's ClientQuotaRecord: `value` `None` is `remove`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaChange {
    /// The entity.
    pub entity: QuotaEntity,
    /// The quota key.
    pub key: String,
    /// The new value, `None` to remove it.
    pub value: Option<QuotaValue>,
}

/// A connection's side of a component while [`ClientQuotas::resolve`] looks entities up.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Slot<'a> {
    /// The entity has no such component.
    Absent,
    /// The default entity of the type.
    Default,
    /// This name.
    Named(&'a str),
}

impl Slot<'_> {
    fn matches(self, component: Option<Option<&str>>) -> bool {
        match (self, component) {
            (Slot::Absent, None) => true,
            (Slot::Default, Some(None)) => true,
            (Slot::Named(name), Some(Some(other))) => name == other,
            _ => false,
        }
    }
}

/// Which quota applies to a connection and which connections share its measured rate (Kafka's
/// quota metric tags: a user tag and a client-id tag, "" when that component does not count).
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// The user the rate is measured for ("": any).
    pub user_tag: String,
    /// The client id the rate is measured for ("": any).
    pub client_id_tag: String,
    /// The quota's bound, `None` when no entity sets one for the connection.
    pub bound: Option<f64>,
}

impl ClientQuotas {
    /// No quota at all.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// Whether some entity sets `key` (a quota manager with nothing to enforce records nothing).
    pub fn sets(&self, key: &str) -> bool {
        self.entities.values().any(|q| q.contains_key(key))
    }

    /// Every entity with its quotas, in entity order.
    pub fn iter(&self) -> impl Iterator<Item = (&QuotaEntity, &EntityQuotas)> {
        self.entities.iter()
    }

    /// An entity's quotas (empty when it has none).
    pub fn get(&self, entity: &QuotaEntity) -> Option<&EntityQuotas> {
        self.entities.get(entity)
    }

    /// `key`'s value on the user/client-id entity of exactly these components.
    fn find(&self, key: &str, user: Slot<'_>, client_id: Slot<'_>) -> Option<f64> {
        self.entities.iter().find_map(|(entity, quotas)| {
            let exact = entity.component(EntityType::Ip).is_none()
                && user.matches(entity.component(EntityType::User))
                && client_id.matches(entity.component(EntityType::ClientId));
            exact.then(|| quotas.get(key).map(|v| v.0)).flatten()
        })
    }

    /// Whether some entity of this shape (user and/or client-id present) sets `key`.
    fn shape_sets(&self, key: &str, user: bool, client_id: bool) -> bool {
        self.entities.iter().any(|(entity, quotas)| {
            entity.component(EntityType::Ip).is_none()
                && entity.component(EntityType::User).is_some() == user
                && entity.component(EntityType::ClientId).is_some() == client_id
                && quotas.contains_key(key)
        })
    }

    /// The `key` quota of a connection of `user` (the principal's name) and `client_id`, and the
    /// tags its rate is measured under: Kafka's `DefaultQuotaCallback.quotaMetricTags` and
    /// `quotaLimit` (the table in the module doc).
    pub fn resolve(&self, key: &str, user: &str, client_id: &str) -> Resolved {
        let (user_tag, client_id_tag) = self.metric_tags(key, user, client_id);
        let bound = self.limit(key, user_tag, client_id_tag);
        Resolved {
            user_tag: user_tag.to_string(),
            client_id_tag: client_id_tag.to_string(),
            bound,
        }
    }

    /// Kafka's `quotaMetricTags`: with one shape of entity in use the tags are that shape's;
    /// with several, the most specific entity that exists decides.
    fn metric_tags<'a>(&self, key: &str, user: &'a str, client_id: &'a str) -> (&'a str, &'a str) {
        let client = self.shape_sets(key, false, true);
        let user_only = self.shape_sets(key, true, false);
        let both = self.shape_sets(key, true, true);
        match (client, user_only, both) {
            (_, false, false) => ("", client_id),
            (false, true, false) => (user, ""),
            (false, false, true) => (user, client_id),
            _ => {
                let (u, c) = (Slot::Named(user), Slot::Named(client_id));
                let has = |u, c| self.find(key, u, c).is_some();
                if has(u, c) || has(u, Slot::Default) {
                    (user, client_id)
                } else if has(u, Slot::Absent) {
                    (user, "")
                } else if has(Slot::Default, c) || has(Slot::Default, Slot::Default) {
                    (user, client_id)
                } else if has(Slot::Default, Slot::Absent) {
                    (user, "")
                } else {
                    ("", client_id)
                }
            }
        }
    }

    /// Kafka's `quotaLimit` of the tags: the first entity of the module doc's table that sets
    /// `key`, among those the tags allow.
    fn limit(&self, key: &str, user_tag: &str, client_id_tag: &str) -> Option<f64> {
        let (u, c) = (Slot::Named(user_tag), Slot::Named(client_id_tag));
        let order: &[(Slot<'_>, Slot<'_>)] = match (user_tag.is_empty(), client_id_tag.is_empty()) {
            (false, false) => &[
                (u, c),
                (u, Slot::Default),
                (Slot::Default, c),
                (Slot::Default, Slot::Default),
            ],
            (false, true) => &[(u, Slot::Absent), (Slot::Default, Slot::Absent)],
            (true, false) => &[(Slot::Absent, c), (Slot::Absent, Slot::Default)],
            (true, true) => &[],
        };
        order.iter().find_map(|&(u, c)| self.find(key, u, c))
    }
}

/// Applies changes in order (KRaft's replay of ClientQuotaRecords).
pub fn apply(quotas: &mut ClientQuotas, changes: &[QuotaChange]) {
    for change in changes {
        match change.value {
            Some(value) => {
                quotas
                    .entities
                    .entry(change.entity.clone())
                    .or_default()
                    .insert(change.key.clone(), value);
            }
            None => {
                if let Some(entity) = quotas.entities.get_mut(&change.entity) {
                    entity.remove(&change.key);
                    if entity.is_empty() {
                        quotas.entities.remove(&change.entity);
                    }
                }
            }
        }
    }
}

/// An entity as a request names it: each component's type and name as sent (a type named
/// twice keeps its last name, as Kafka's map does).
pub type RawEntity = BTreeMap<String, Option<String>>;

/// One entry of an AlterClientQuotas request: the entity and its operations (key, value;
/// `None` removes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alteration {
    /// The entity, as sent.
    pub entity: RawEntity,
    /// The operations in request order (key, value to set or `None` to remove).
    pub ops: Vec<(String, Option<QuotaValue>)>,
}

/// Most changes one AlterClientQuotas may make (Kafka's `MAX_RECORDS_PER_USER_OP`).
pub const CHANGES_PER_REQUEST_MAX: usize = 10_000;

/// Why an entity's alteration was refused: Kafka's error code and message.
pub type AlterationRefusal = (ErrorCode, String);

/// One entity's outcome in AlterClientQuotas' answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityResult {
    /// The entity as sent.
    pub entity: RawEntity,
    /// Kafka's error code (`None`: done).
    #[serde(with = "crate::request::wire_code")]
    pub error_code: ErrorCode,
    /// Why, for the client (`None` when done).
    pub message: Option<String>,
}

impl EntityResult {
    fn new(entity: &RawEntity, outcome: Result<(), AlterationRefusal>) -> Self {
        let (error_code, message) = match outcome {
            Ok(()) => (ErrorCode::None, None),
            Err((code, message)) => (code, Some(message)),
        };
        EntityResult {
            entity: entity.clone(),
            error_code,
            message,
        }
    }
}

/// AlterClientQuotas' answer: per distinct entity (first-seen order) its outcome.
pub type AlterResults = Vec<EntityResult>;

/// AlterClientQuotas, as `ClientQuotaControlManager.alterClientQuotas` decides it against the
/// quotas before the request: each entity's outcome and the changes to make (none for a
/// refused entity; a value equal to the stored one, or the removal of an absent key, changes
/// nothing). A second entry for an entity is refused, but the first one's changes stand.
pub fn decide_alter(
    current: &ClientQuotas,
    alterations: &[Alteration],
) -> (AlterResults, Vec<QuotaChange>) {
    let mut results: AlterResults = Vec::new();
    let mut changes = Vec::new();
    for alteration in alterations {
        let mut ops: Vec<(&str, Option<QuotaValue>)> = Vec::new();
        let mut duplicate_key = false;
        for (key, value) in &alteration.ops {
            if ops.iter().any(|(k, _)| k == key) {
                duplicate_key = true;
            } else {
                ops.push((key, *value));
            }
        }
        let seen = results.iter().position(|r| r.entity == alteration.entity);
        // Kafka records the duplicate key's refusal under the entity, then finds the entity
        // already answered and refuses it as a duplicate: that message is the one sent.
        if seen.is_some() || duplicate_key {
            let refusal = EntityResult::new(
                &alteration.entity,
                Err(invalid(format!(
                    "Ignoring duplicate entity {}",
                    java_entity(&alteration.entity)
                ))),
            );
            match seen {
                Some(i) => results[i] = refusal,
                None => results.push(refusal),
            }
            continue;
        }
        let outcome = alter_entity(current, &alteration.entity, &ops, &mut changes);
        results.push(EntityResult::new(&alteration.entity, outcome));
    }
    if changes.len() > CHANGES_PER_REQUEST_MAX {
        // Kafka's bounded record list fails the whole request: UNKNOWN_SERVER_ERROR with the
        // code's own message on every entity.
        let message = "The server experienced an unexpected error when processing the request.";
        for result in &mut results {
            result.error_code = ErrorCode::UnknownServerError;
            result.message = Some(message.to_string());
        }
        changes.clear();
    }
    (results, changes)
}

/// One entity's alteration: validated, then its changes appended to `changes`.
fn alter_entity(
    current: &ClientQuotas,
    raw: &RawEntity,
    ops: &[(&str, Option<QuotaValue>)],
    changes: &mut Vec<QuotaChange>,
) -> Result<(), AlterationRefusal> {
    let entity = validate_entity(raw)?;
    let keys = keys_for(&entity)?;
    let stored = current.entities.get(&entity);
    let mut mine = Vec::new();
    for &(key, value) in ops {
        let stored_value = stored.and_then(|q| q.get(key));
        match value {
            None if stored_value.is_some() => mine.push(QuotaChange {
                entity: entity.clone(),
                key: key.to_string(),
                value: None,
            }),
            None => {}
            Some(value) => {
                validate_value(keys, key, value.0)?;
                if stored_value != Some(&value) {
                    mine.push(QuotaChange {
                        entity: entity.clone(),
                        key: key.to_string(),
                        value: Some(value),
                    });
                }
            }
        }
    }
    changes.extend(mine);
    Ok(())
}

fn invalid(message: String) -> AlterationRefusal {
    (ErrorCode::InvalidRequest, message)
}

/// Kafka's `validateEntity`: known types, no empty name.
fn validate_entity(raw: &RawEntity) -> Result<QuotaEntity, AlterationRefusal> {
    if raw.is_empty() {
        return Err(invalid("Invalid empty client quota entity".to_string()));
    }
    let mut entity = BTreeMap::new();
    for (kind, name) in raw {
        let Some(parsed) = EntityType::parse(kind) else {
            return Err(invalid(format!(
                "Unhandled client quota entity type: {kind}"
            )));
        };
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {kind} not supported")));
        }
        entity.insert(parsed, name.clone());
    }
    Ok(QuotaEntity(entity))
}

/// Kafka's `configKeysForEntityType`: an IP stands alone, and its name must be an address.
fn keys_for(entity: &QuotaEntity) -> Result<&'static [(&'static str, KeyType)], AlterationRefusal> {
    let has = |kind| entity.component(kind).is_some();
    if has(EntityType::Ip) {
        if has(EntityType::User) || has(EntityType::ClientId) {
            // Kafka's message, its missing space included.
            return Err(invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
                    .to_string(),
            ));
        }
        return match entity.component(EntityType::Ip).flatten() {
            Some(ip) if ip.parse::<std::net::IpAddr>().is_err() => Err(invalid(format!(
                "{ip} is not a valid IP or resolvable host."
            ))),
            _ => Ok(IP_KEYS),
        };
    }
    Ok(USER_CLIENT_KEYS)
}

/// Kafka's `validateQuotaKeyValue`.
fn validate_value(
    keys: &[(&str, KeyType)],
    key: &str,
    value: f64,
) -> Result<(), AlterationRefusal> {
    let Some(&(_, kind)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    if !value.is_finite() {
        return Err(invalid(format!("Quota {key} must be a finite number")));
    }
    if value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    let too_large = match kind {
        KeyType::Double => return Ok(()),
        KeyType::Int => (value > i32::MAX as f64).then_some("an INT"),
        KeyType::Long => (value > i64::MAX as f64).then_some("a LONG"),
    };
    if let Some(what) = too_large {
        return Err(invalid(format!(
            "Proposed value for {key} is too large for {what}."
        )));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(invalid(format!("{key} cannot be a fractional value.")));
    }
    Ok(())
}

/// A request's entity components in the order Kafka's hash map holds them (client-id, user,
/// ip, then other types): the order its answers and messages list them in.
pub fn in_kafka_order(raw: &RawEntity) -> Vec<(&String, &Option<String>)> {
    let rank = |kind: &str| EntityType::parse(kind).map_or(3, |t| t as u8);
    let mut parts: Vec<(&String, &Option<String>)> = raw.iter().collect();
    parts.sort_by_key(|(kind, _)| rank(kind));
    parts
}

/// `ClientQuotaEntity.toString` of a request's entity: `ClientQuotaEntity(entries={client-id=c,
/// user=u})`.
fn java_entity(raw: &RawEntity) -> String {
    let entries: Vec<String> = in_kafka_order(raw)
        .iter()
        .map(|(kind, name)| format!("{kind}={}", name.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", entries.join(", "))
}

/// Kafka's DescribeClientQuotas match types.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// One component of a DescribeClientQuotas filter, as sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterComponent {
    /// The entity type it applies to.
    pub entity_type: String,
    /// 0 exact name, 1 the default, 2 any name.
    pub match_type: i8,
    /// The name for an exact match.
    pub name: Option<String>,
}

/// DescribeClientQuotas, as `ClientQuotasImage.describe` answers it: the entities the filter
/// matches with their quotas, or the whole request's error.
pub fn describe<'a>(
    quotas: &'a ClientQuotas,
    components: &[FilterComponent],
    strict: bool,
) -> Result<Vec<(&'a QuotaEntity, &'a EntityQuotas)>, AlterationRefusal> {
    let mut exact: BTreeMap<EntityType, Option<&str>> = BTreeMap::new();
    let mut any: Vec<EntityType> = Vec::new();
    for component in components {
        let name = &component.entity_type;
        if name.is_empty() {
            return Err(invalid("Invalid empty entity type.".to_string()));
        }
        let kind = EntityType::parse(name);
        if kind.is_some_and(|k| exact.contains_key(&k) || any.contains(&k)) {
            return Err(invalid(format!(
                "Entity type {name} cannot appear more than once in the filter."
            )));
        }
        let Some(kind) = kind else {
            return Err((
                ErrorCode::UnsupportedVersion,
                format!("Unsupported entity type {name}"),
            ));
        };
        let matched = component.name.as_deref();
        match (component.match_type, matched) {
            (MATCH_EXACT, None) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".to_string(),
                ))
            }
            (MATCH_EXACT, Some(n)) => drop(exact.insert(kind, Some(n))),
            (MATCH_DEFAULT, None) => drop(exact.insert(kind, None)),
            (MATCH_DEFAULT, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                        .to_string(),
                ))
            }
            (MATCH_SPECIFIED, None) => any.push(kind),
            (MATCH_SPECIFIED, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                        .to_string(),
                ))
            }
            (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
        }
    }
    let named = |k| exact.contains_key(&k) || any.contains(&k);
    if named(EntityType::Ip) && (named(EntityType::User) || named(EntityType::ClientId)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."
                .to_string(),
        ));
    }
    let matches = |entity: &QuotaEntity| {
        (!strict || entity.0.len() == exact.len() + any.len())
            && exact
                .iter()
                .all(|(k, name)| entity.component(*k) == Some(*name))
            && any.iter().all(|k| entity.component(*k).is_some())
    };
    Ok(quotas.iter().filter(|(e, _)| matches(e)).collect())
}

#[cfg(test)]
mod tests;
