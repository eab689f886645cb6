//! Client quotas (KIP-546): AlterClientQuotas' successes and every refusal Kafka's
//! `ClientQuotaControlManager` makes (one entity per request where Kafka's answer order is a
//! hash map's), validate_only, removals, then DescribeClientQuotas with each filter kind and
//! each refused filter. The quotas set are far above what the suite sends, so no request of
//! the suite is throttled, and the case removes them at its end.

use rill_protocol::kafka_protocol::messages::alter_client_quotas_request::{
    EntityData, EntryData, OpData,
};
use rill_protocol::kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use rill_protocol::kafka_protocol::messages::{
    AlterClientQuotasRequest, ApiKey, DescribeClientQuotasRequest, RequestKind,
};

use super::{sb, Case};
use crate::pair::Pair;

pub const CASES: &[Case] = &[("client_quotas", client_quotas)];

/// An entity component: type, name (`None`: the default).
type Part = (&'static str, Option<&'static str>);
/// An operation: key, value (`None`: remove).
type Op = (&'static str, Option<f64>);

fn entry(entity: &[Part], ops: &[Op]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(sb(t))
                        .with_entity_name(n.map(sb))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(sb(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

fn alter(entries: Vec<EntryData>, validate_only: bool) -> RequestKind {
    RequestKind::AlterClientQuotas(
        AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only),
    )
}

/// A filter component: type, match type, match.
type Component = (&'static str, i8, Option<&'static str>);

fn describe(components: &[Component], strict: bool) -> RequestKind {
    RequestKind::DescribeClientQuotas(
        DescribeClientQuotasRequest::default()
            .with_components(
                components
                    .iter()
                    .map(|(t, m, n)| {
                        ComponentData::default()
                            .with_entity_type(sb(t))
                            .with_match_type(*m)
                            .with_match(n.map(sb))
                    })
                    .collect(),
            )
            .with_strict(strict),
    )
}

const ALICE: &[Part] = &[("user", Some("kd-alice"))];
const ALICE_C: &[Part] = &[("user", Some("kd-alice")), ("client-id", Some("kd-c"))];
const CLIENT: &[Part] = &[("client-id", Some("kd-c"))];
const DEFAULTS: &[Part] = &[("user", None), ("client-id", None)];
const IP: &[Part] = &[("ip", Some("10.1.2.3"))];

/// Accepted: each entity shape, each key.
const SET: &[(&[Part], &[Op])] = &[
    (
        ALICE,
        &[
            ("producer_byte_rate", Some(1e12)),
            ("request_percentage", Some(900.0)),
        ],
    ),
    (ALICE_C, &[("consumer_byte_rate", Some(2e12))]),
    (
        CLIENT,
        &[
            ("producer_byte_rate", Some(3e12)),
            ("controller_mutation_rate", Some(1e6)),
        ],
    ),
    (DEFAULTS, &[("consumer_byte_rate", Some(4e12))]),
    (&[("user", None)], &[("producer_byte_rate", Some(5e12))]),
    (IP, &[("connection_creation_rate", Some(1000.0))]),
];

/// Refused, one per request.
const REFUSED: &[(&[Part], &[Op])] = &[
    (&[], &[("producer_byte_rate", Some(1.0))]),
    (
        &[("group", Some("g"))],
        &[("producer_byte_rate", Some(1.0))],
    ),
    (&[("user", Some(""))], &[("producer_byte_rate", Some(1.0))]),
    (
        &[("user", Some("kd-x")), ("ip", Some("10.1.2.3"))],
        &[("producer_byte_rate", Some(1.0))],
    ),
    (&[("user", Some("kd-x"))], &[("bogus", Some(1.0))]),
    (
        &[("user", Some("kd-x"))],
        &[("connection_creation_rate", Some(1.0))],
    ),
    (IP, &[("producer_byte_rate", Some(1.0))]),
    (
        &[("user", Some("kd-x"))],
        &[("producer_byte_rate", Some(0.0))],
    ),
    (
        &[("user", Some("kd-x"))],
        &[("producer_byte_rate", Some(-5.0))],
    ),
    (
        &[("user", Some("kd-x"))],
        &[("producer_byte_rate", Some(1.5))],
    ),
    (
        &[("user", Some("kd-x"))],
        &[("producer_byte_rate", Some(1e19))],
    ),
    (
        &[("user", Some("kd-x"))],
        &[("producer_byte_rate", Some(f64::INFINITY))],
    ),
    (IP, &[("connection_creation_rate", Some(3e9))]),
    (
        &[("user", Some("kd-x"))],
        &[
            ("producer_byte_rate", Some(1.0)),
            ("producer_byte_rate", None),
        ],
    ),
    // The first key is valid, the second not: nothing of the entity is changed.
    (
        &[("user", Some("kd-x"))],
        &[("producer_byte_rate", Some(7.0)), ("bogus", Some(1.0))],
    ),
];

const FILTERS: &[(&[Component], bool)] = &[
    (&[], false),
    (&[], true),
    (&[("user", 0, Some("kd-alice"))], false),
    (&[("user", 0, Some("kd-alice"))], true),
    (&[("user", 1, None)], false),
    (&[("user", 1, None)], true),
    (&[("user", 2, None)], true),
    (&[("client-id", 0, Some("kd-c"))], true),
    (&[("user", 2, None), ("client-id", 2, None)], true),
    (&[("user", 0, Some("kd-x"))], false),
    (&[("ip", 2, None)], false),
    (&[("ip", 0, Some("10.1.2.3"))], true),
    (&[("", 0, Some("x"))], false),
    (&[("group", 2, None)], false),
    (&[("user", 2, None), ("user", 1, None)], false),
    (&[("user", 0, None)], false),
    (&[("user", 1, Some("x"))], false),
    (&[("user", 2, Some("x"))], false),
    (&[("user", 7, None)], false),
    (&[("ip", 2, None), ("user", 2, None)], false),
];

fn client_quotas(pair: &mut Pair) -> anyhow::Result<()> {
    let versions = pair.versions(ApiKey::AlterClientQuotas);
    for version in versions.clone() {
        for (entity, ops) in SET {
            pair.both(version, |_| alter(vec![entry(entity, ops)], false))?;
        }
        for (entity, ops) in REFUSED {
            pair.both(version, |_| alter(vec![entry(entity, ops)], false))?;
        }
        // Two entries for one entity: one answer, refused; the first entry's change is made.
        pair.both(version, |_| {
            alter(
                vec![
                    entry(
                        &[("user", Some("kd-dup"))],
                        &[("producer_byte_rate", Some(8.0))],
                    ),
                    entry(
                        &[("user", Some("kd-dup"))],
                        &[("consumer_byte_rate", Some(8.0))],
                    ),
                ],
                false,
            )
        })?;
        // Validated only: answered as if made, nothing changes.
        pair.both(version, |_| {
            alter(
                vec![entry(
                    &[("user", Some("kd-v"))],
                    &[("producer_byte_rate", Some(9.0))],
                )],
                true,
            )
        })?;
        pair.both(version, |_| {
            alter(
                vec![entry(&[("user", Some("kd-v"))], &[("bogus", Some(9.0))])],
                true,
            )
        })?;
        // Removing a key that is there, and one that is not.
        pair.both(version, |_| {
            alter(
                vec![entry(
                    ALICE,
                    &[("request_percentage", None), ("consumer_byte_rate", None)],
                )],
                false,
            )
        })?;
    }
    // Kafka applies the metadata log's records a moment after AlterClientQuotas answers.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for version in pair.versions(ApiKey::DescribeClientQuotas) {
        for (components, strict) in FILTERS {
            pair.both(version, |_| describe(components, *strict))?;
        }
    }
    if let Some(version) = versions.last() {
        pair.send(version, &|_: &_| cleanup())?;
    }
    Ok(())
}

/// Every quota the case set, removed.
fn cleanup() -> RequestKind {
    let mut entries: Vec<EntryData> = SET
        .iter()
        .map(|(entity, ops)| {
            let removals: Vec<Op> = ops.iter().map(|(k, _)| (*k, None)).collect();
            entry(entity, &removals)
        })
        .collect();
    entries.push(entry(
        &[("user", Some("kd-dup"))],
        &[("producer_byte_rate", None)],
    ));
    alter(entries, false)
}
