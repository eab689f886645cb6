//! Field-aware values: what to put in a field given its spec name, entity type and the mode.
//!
//! `Mode::Valid` values are what a correct client could send (pool names, learned ids, sane
//! timeouts), so requests get past the first checks and reach deep states. `Mode::Hostile` mixes
//! in the classes that break brokers: empty, null, 249/250/32767/32768/65535/65536/70000-byte
//! strings (topic limits, the i16/u16 record writers), paths (`..`, `a/b`), non-UTF-8, internal
//! topic names, boundary integers.

use crate::entropy::Entropy;
use crate::state::State;

/// How far a generated request strays from what a correct client sends.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Well-formed and plausible.
    Valid,
    /// Any value, lying lengths, unknown tags.
    Hostile,
}

/// What a string field holds, from its spec name, entity type and parent.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StrKind {
    /// A topic name.
    Topic,
    /// A group id.
    Group,
    /// A transactional id.
    TransactionalId,
    /// A member id (assigned by the broker).
    MemberId,
    /// A static member's instance id.
    InstanceId,
    /// JoinGroup's protocol type.
    ProtocolType,
    /// A group protocol (assignor) name.
    ProtocolName,
    /// A config name.
    ConfigName,
    /// A config value.
    ConfigValue,
    /// FindCoordinator's key: a group or transactional id.
    CoordinatorKey,
    /// A group or transaction state name in a filter.
    StateFilter,
    /// A group type name in a filter.
    TypeFilter,
    /// Anything else (client software name, reason, rack, metadata...).
    Other,
}

/// Classifies a string field.
pub fn str_kind(name: &str, entity: Option<&str>, parent: &str) -> StrKind {
    match entity {
        Some("topicName") => return StrKind::Topic,
        Some("groupId") => return StrKind::Group,
        Some("transactionalId") => return StrKind::TransactionalId,
        _ => {}
    }
    match name {
        "MemberId" => StrKind::MemberId,
        "GroupInstanceId" => StrKind::InstanceId,
        "ProtocolType" => StrKind::ProtocolType,
        "ProtocolName" => StrKind::ProtocolName,
        "Name" if parent.contains("Protocol") => StrKind::ProtocolName,
        "Name" | "ConfigurationKeys" => StrKind::ConfigName,
        "Value" => StrKind::ConfigValue,
        "Key" | "CoordinatorKeys" => StrKind::CoordinatorKey,
        "StatesFilter" | "StateFilters" => StrKind::StateFilter,
        "TypesFilter" => StrKind::TypeFilter,
        _ => StrKind::Other,
    }
}

/// Whether a hostile value of this kind should favour the long classes: ids that end up in
/// Rill's own records (offsets, group metadata, transaction state) or in a member id.
fn is_recorded_id(kind: StrKind) -> bool {
    matches!(
        kind,
        StrKind::Group
            | StrKind::TransactionalId
            | StrKind::MemberId
            | StrKind::InstanceId
            | StrKind::ProtocolType
            | StrKind::ProtocolName
            | StrKind::CoordinatorKey
    )
}

/// Lengths of the long classes: topic limit, u8/i16/u16 boundaries, the 70 KB.
pub const LONG_LENGTHS: [usize; 12] = [
    249, 250, 255, 256, 1024, 16_384, 32_767, 32_768, 65_535, 65_536, 65_537, 70_000,
];

const KNOWN_CONFIGS: [&str; 14] = [
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "max.message.bytes",
    "min.insync.replicas",
    "message.timestamp.type",
    "compression.type",
    "unclean.leader.election.enable",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "num.partitions",
    "no.such.config",
];

const CONFIG_VALUES: [&str; 14] = [
    "1",
    "0",
    "-1",
    "1000",
    "1048576",
    "compact",
    "delete",
    "compact,delete",
    "producer",
    "LogAppendTime",
    "true",
    "9223372036854775807",
    "",
    "x",
];

const WEIRD: [&[u8]; 14] = [
    b".",
    b"..",
    b"../x",
    b"../../etc",
    b"a/b",
    b"/",
    b"x\0y",
    b"__consumer_offsets",
    b"__transaction_state",
    b"__cluster_metadata",
    b"__rill_groups",
    b"-",
    "\u{442}\u{435}\u{43c}\u{430}".as_bytes(),
    b"\xff\xfe\x80",
];

/// A string for a field of `kind` (None is null). `compact` fields hold any length; INT16
/// ones at most 32,767 bytes. `budget` is the bytes this request may still grow by.
pub fn string_value<E: Entropy>(
    e: &mut E,
    mode: Mode,
    kind: StrKind,
    state: &State,
    ctx: &StrCtx,
) -> Option<Vec<u8>> {
    if mode == Mode::Hostile && e.chance(45) {
        return hostile_string(e, kind, state, ctx);
    }
    Some(valid_string(e, kind, state, ctx).into_bytes())
}

/// What a string field's siblings already said.
#[derive(Clone, Debug, Default)]
pub struct StrCtx {
    /// The last group id written in this request.
    pub group: Option<String>,
    /// The last config resource type written (2 topic, 4 broker, 8 logger, 32 group).
    pub resource_type: Option<i64>,
    /// Whether configs may change (AlterConfigs, IncrementalAlterConfigs).
    pub alters_configs: bool,
    /// The field may hold null.
    pub nullable: bool,
    /// The field is compact (may exceed 32,767 bytes).
    pub compact: bool,
    /// Bytes the request may still grow by.
    pub budget: usize,
}

fn valid_string<E: Entropy>(e: &mut E, kind: StrKind, state: &State, ctx: &StrCtx) -> String {
    let pick = |e: &mut E, pool: &[String], focus: &str| {
        if e.chance(50) {
            focus.to_owned()
        } else {
            pool[e.below(pool.len())].clone()
        }
    };
    match kind {
        StrKind::Topic if e.chance(1) => format!("fz-x-{}", e.below(200)),
        StrKind::Topic => pick(e, &state.topics, &state.focus.topic),
        StrKind::Group => pick(e, &state.groups, &state.focus.group),
        StrKind::TransactionalId => {
            pick(e, &state.transactional_ids, &state.focus.transactional_id)
        }
        StrKind::CoordinatorKey if e.chance(50) => pick(e, &state.groups, &state.focus.group),
        StrKind::CoordinatorKey => pick(e, &state.transactional_ids, &state.focus.transactional_id),
        StrKind::MemberId => {
            let group = ctx.group.as_deref().unwrap_or(&state.focus.group);
            match state.member_of(group) {
                Some(m) if e.chance(85) => m.member_id.clone(),
                _ => String::new(),
            }
        }
        StrKind::InstanceId => format!("fz-instance-{}", e.below(3)),
        StrKind::ProtocolType => "consumer".to_owned(),
        StrKind::ProtocolName => {
            let group = ctx.group.as_deref().unwrap_or(&state.focus.group);
            match state.member_of(group) {
                Some(m) if !m.protocol.is_empty() && e.chance(60) => m.protocol.clone(),
                _ => e
                    .pick(&["range", "roundrobin", "cooperative-sticky"])
                    .to_owned(),
            }
        }
        StrKind::ConfigName => e.pick(&KNOWN_CONFIGS).to_owned(),
        StrKind::ConfigValue => e.pick(&CONFIG_VALUES).to_owned(),
        StrKind::StateFilter => e
            .pick(&["Stable", "Empty", "PreparingRebalance", "Ongoing", "Dead"])
            .to_owned(),
        StrKind::TypeFilter => e.pick(&["classic", "consumer", "share"]).to_owned(),
        StrKind::Other => e.pick(&["livefuzz", "", "1.0", "fuzz reason"]).to_owned(),
    }
}

fn hostile_string<E: Entropy>(
    e: &mut E,
    kind: StrKind,
    state: &State,
    ctx: &StrCtx,
) -> Option<Vec<u8>> {
    let long_weight = if is_recorded_id(kind) { 40 } else { 15 };
    match e.weighted(&[10, 8, long_weight, 12, 8, 10, 6]) {
        0 => Some(Vec::new()),
        1 if ctx.nullable || e.chance(30) => None,
        1 => Some(Vec::new()),
        2 => Some(long_string(e, ctx)),
        3 => Some(e.pick(&WEIRD).to_vec()),
        4 => {
            let n = 1 + e.below(40);
            Some(e.bytes(n))
        }
        5 => {
            // An id that exists, in the wrong place (another lane's group, a topic as a group).
            let other = State::new(e.u64() % 4);
            let k = e.pick(&[StrKind::Topic, StrKind::Group, StrKind::MemberId]);
            let v = valid_string(e, k, &other, ctx);
            Some(
                if v.is_empty() {
                    state.topics[0].clone()
                } else {
                    v
                }
                .into_bytes(),
            )
        }
        _ => {
            let n = 1 + e.below(24);
            Some((0..n).map(|_| b'a' + e.below(26) as u8).collect())
        }
    }
}

/// A long string: one of [`LONG_LENGTHS`] that fits the field and the budget.
fn long_string<E: Entropy>(e: &mut E, ctx: &StrCtx) -> Vec<u8> {
    let max = if ctx.compact { usize::MAX } else { 32_767 };
    let mut len = e.pick(&LONG_LENGTHS).min(max);
    if len > ctx.budget {
        len = 249.min(ctx.budget);
    }
    let fill = e.pick(b"ax.-");
    let mut s = vec![fill; len];
    if let Some(first) = s.first_mut() {
        *first = b'L'; // never all dots: "..." is a different class
    }
    s
}

/// An integer for a field named `name` of `bytes` bytes (1, 2, 4, 8).
pub fn int_value<E: Entropy>(
    e: &mut E,
    mode: Mode,
    name: &str,
    bytes: usize,
    state: &State,
    ctx: &StrCtx,
) -> i64 {
    if mode == Mode::Hostile && e.chance(35) {
        return boundary_int(e, bytes);
    }
    valid_int(e, name, state, ctx)
}

/// 0, ±1, the type's extremes, or any value of the type.
pub fn boundary_int<E: Entropy>(e: &mut E, bytes: usize) -> i64 {
    let bits = 8 * bytes as u32;
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    match e.below(8) {
        0 => 0,
        1 => 1,
        2 => -1,
        3 => max,
        4 => min,
        5 => max - 1,
        6 => min + 1,
        _ => {
            let v = e.take(bytes) as i64;
            if bits == 64 {
                v
            } else {
                (v << (64 - bits)) >> (64 - bits) // sign-extend
            }
        }
    }
}

fn valid_int<E: Entropy>(e: &mut E, name: &str, state: &State, ctx: &StrCtx) -> i64 {
    let group = ctx.group.as_deref().unwrap_or(&state.focus.group);
    match name {
        "Acks" => [-1, 1, 0][e.weighted(&[6, 3, 1])],
        "TimeoutMs" | "timeoutMs" => e.pick(&[0, 10, 1000, 5000]),
        "MaxWaitMs" => e.pick(&[0, 1, 10, 100]),
        "MinBytes" => e.pick(&[0, 1, 1000]),
        "MaxBytes" | "PartitionMaxBytes" => e.pick(&[1, 1024, 1 << 20, 50 << 20, i32::MAX.into()]),
        "SessionTimeoutMs" => [1000, 2000, 6000][e.weighted(&[4, 4, 2])],
        "RebalanceTimeoutMs" => e.pick(&[-1, 100, 300, 1000]),
        "TransactionTimeoutMs" => e.pick(&[1000, 60_000, 900_000]),
        "GenerationId" | "GenerationIdOrMemberEpoch" => match state.member_of(group) {
            Some(m) if e.chance(80) => m.generation.into(),
            _ => e.pick(&[-1, 0, 1]),
        },
        "MemberEpoch"
        | "LeaderEpoch"
        | "CurrentLeaderEpoch"
        | "LastFetchedEpoch"
        | "CommittedLeaderEpoch" => e.pick(&[-1, 0, 1]),
        "PartitionIndex" | "Partition" | "PartitionIndexes" | "Partitions" | "Index" => {
            [0, 1, 2, 3][e.weighted(&[6, 2, 1, 1])]
        }
        "ProducerId" | "V3AndBelowProducerId" | "ProducerIdFilters" => {
            let txn = Some(state.focus.transactional_id.as_str());
            match state.producer_for(txn).or(state.producers.last()) {
                Some(p) if e.chance(80) => p.producer_id,
                _ => -1,
            }
        }
        "ProducerEpoch" | "V3AndBelowProducerEpoch" => {
            let txn = Some(state.focus.transactional_id.as_str());
            match state.producer_for(txn).or(state.producers.last()) {
                Some(p) if e.chance(80) => p.epoch.into(),
                _ => e.pick(&[-1, 0]),
            }
        }
        "ReplicationFactor" => e.pick(&[-1, 1]),
        "NumPartitions" => e.pick(&[-1, 1, 2, 3]),
        "Count" => 1 + e.below(6) as i64,
        "ReplicaId" => -1,
        "BrokerIds" | "Replicas" => e.pick(&[0, 1, 2, 3]),
        "CoordinatorEpoch" => e.pick(&[0, -1]),
        "FetchOffset" | "Offset" | "CommittedOffset" | "LogStartOffset" => {
            e.pick(&[0, 0, 1, 10, 100, -1])
        }
        "Timestamp" => e.pick(&[-1, -2, -3, 0, 1000]),
        "CommitTimestamp" | "RetentionTimeMs" | "ReplicaEpoch" => -1,
        "DurationFilter" => e.pick(&[-1, 0, 1000]),
        "MaxNumOffsets" => 1,
        "SessionId" => 0,
        "SessionEpoch" => e.pick(&[-1, 0]),
        "IsolationLevel" | "ElectionType" | "KeyType" => e.pick(&[0, 1]),
        "ResourceType" => e.pick(&[2, 2, 4, 8, 32]),
        "ConfigOperation" => e.pick(&[0, 1, 2, 3]),
        "EndpointType" => e.pick(&[1, 2]),
        _ => e.pick(&[0, 1, -1, 2]),
    }
}

/// The resource name of a config resource of `resource_type`. A live fuzz never alters the
/// broker's own configs: a client without ACLs may (as in Kafka), but a broker-wide
/// `retention.bytes=1` would starve the friendly clients for a reason that is not a bug.
pub fn resource_name<E: Entropy>(
    e: &mut E,
    state: &State,
    resource_type: i64,
    alters: bool,
) -> String {
    match resource_type {
        4 | 8 if alters => "999".to_owned(),
        4 | 8 => e.pick(&["0", "1", "", "999"]).to_owned(),
        32 => state.groups[e.below(state.groups.len())].clone(),
        _ => state.topics[e.below(state.topics.len())].clone(),
    }
}
