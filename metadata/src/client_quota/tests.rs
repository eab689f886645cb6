use super::*;

fn raw(parts: &[(&str, Option<&str>)]) -> RawEntity {
    parts
        .iter()
        .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
        .collect()
}

fn set(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> Alteration {
    Alteration {
        entity: raw(entity),
        ops: ops
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(QuotaValue)))
            .collect(),
    }
}

/// Decides and applies, returning each entity's outcome.
fn alter(quotas: &mut ClientQuotas, alterations: &[Alteration]) -> Vec<EntityResult> {
    let (results, changes) = decide_alter(quotas, alterations);
    apply(quotas, &changes);
    results
}

fn message(result: &EntityResult) -> &str {
    match &result.message {
        None => {
            assert_eq!(result.error_code, ErrorCode::None);
            "ok"
        }
        Some(message) => {
            assert_eq!(result.error_code, ErrorCode::InvalidRequest);
            message
        }
    }
}

impl EntityResult {
    fn is_ok(&self) -> bool {
        self.error_code == ErrorCode::None
    }

    fn is_err(&self) -> bool {
        !self.is_ok()
    }
}

#[test]
fn refusals_carry_kafkas_messages() {
    let mut q = ClientQuotas::default();
    let cases: &[(Alteration, &str)] = &[
        (set(&[], &[(PRODUCER_BYTE_RATE, Some(1.0))]), "Invalid empty client quota entity"),
        (
            set(&[("group", Some("g"))], &[(PRODUCER_BYTE_RATE, Some(1.0))]),
            "Unhandled client quota entity type: group",
        ),
        (set(&[("user", Some(""))], &[(PRODUCER_BYTE_RATE, Some(1.0))]), "Empty user not supported"),
        (
            set(&[("user", Some("a")), ("ip", Some("1.2.3.4"))], &[]),
            "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
        ),
        (
            set(&[("ip", Some("nowhere"))], &[]),
            "nowhere is not a valid IP or resolvable host.",
        ),
        (
            set(&[("user", Some("a"))], &[("bogus", Some(1.0))]),
            "Invalid configuration key bogus",
        ),
        (
            set(&[("user", Some("a"))], &[(CONNECTION_CREATION_RATE, Some(1.0))]),
            "Invalid configuration key connection_creation_rate",
        ),
        (
            set(&[("user", Some("a"))], &[(PRODUCER_BYTE_RATE, Some(f64::NAN))]),
            "Quota producer_byte_rate must be a finite number",
        ),
        (
            set(&[("user", Some("a"))], &[(PRODUCER_BYTE_RATE, Some(0.0))]),
            "Quota producer_byte_rate must be greater than 0",
        ),
        (
            set(&[("user", Some("a"))], &[(PRODUCER_BYTE_RATE, Some(1.5))]),
            "producer_byte_rate cannot be a fractional value.",
        ),
        (
            set(&[("user", Some("a"))], &[(PRODUCER_BYTE_RATE, Some(1e19))]),
            "Proposed value for producer_byte_rate is too large for a LONG.",
        ),
        (
            set(&[("ip", Some("10.0.0.1"))], &[(CONNECTION_CREATION_RATE, Some(3e9))]),
            "Proposed value for connection_creation_rate is too large for an INT.",
        ),
        (
            set(&[("user", Some("a"))], &[(REQUEST_PERCENTAGE, Some(12.5))]),
            "ok",
        ),
    ];
    for (alteration, expected) in cases {
        let results = alter(&mut q, std::slice::from_ref(alteration));
        assert_eq!(message(&results[0]), *expected, "{alteration:?}");
    }
    assert_eq!(q.iter().count(), 1, "only the valid one was stored");
}

/// A refused entity changes nothing, even the keys before the refused one.
#[test]
fn a_refused_entity_changes_nothing() {
    let mut q = ClientQuotas::default();
    let results = alter(
        &mut q,
        &[set(
            &[("user", Some("a"))],
            &[(PRODUCER_BYTE_RATE, Some(100.0)), ("bogus", Some(1.0))],
        )],
    );
    assert!(results[0].is_err());
    assert!(q.is_empty());
}

/// Kafka answers a duplicate key, and a second entry for an entity, "Ignoring duplicate
/// entity"; the first entry's changes are still made.
#[test]
fn duplicates_are_refused_as_kafka_refuses_them() {
    let mut q = ClientQuotas::default();
    let (results, changes) = decide_alter(
        &q,
        &[
            set(&[("user", Some("a"))], &[(PRODUCER_BYTE_RATE, Some(100.0))]),
            set(&[("user", Some("a"))], &[(CONSUMER_BYTE_RATE, Some(100.0))]),
            set(
                &[("client-id", Some("c")), ("user", None)],
                &[(PRODUCER_BYTE_RATE, Some(1.0)), (PRODUCER_BYTE_RATE, None)],
            ),
        ],
    );
    assert_eq!(results.len(), 2);
    assert_eq!(
        message(&results[0]),
        "Ignoring duplicate entity ClientQuotaEntity(entries={user=a})"
    );
    assert_eq!(
        message(&results[1]),
        "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c, user=null})"
    );
    apply(&mut q, &changes);
    let a = QuotaEntity([(EntityType::User, Some("a".to_string()))].into());
    assert_eq!(q.get(&a).unwrap()[PRODUCER_BYTE_RATE], QuotaValue(100.0));
    assert!(!q.get(&a).unwrap().contains_key(CONSUMER_BYTE_RATE));
}

#[test]
fn setting_the_same_value_or_removing_an_absent_key_changes_nothing() {
    let mut q = ClientQuotas::default();
    let a = &[("user", Some("a"))];
    alter(&mut q, &[set(a, &[(PRODUCER_BYTE_RATE, Some(100.0))])]);
    let (results, changes) = decide_alter(
        &q,
        &[set(
            a,
            &[
                (PRODUCER_BYTE_RATE, Some(100.0)),
                (CONSUMER_BYTE_RATE, None),
                ("bogus", None),
            ],
        )],
    );
    assert!(results[0].is_ok());
    assert!(changes.is_empty());
    // Removing the last key removes the entity.
    alter(&mut q, &[set(a, &[(PRODUCER_BYTE_RATE, None)])]);
    assert!(q.is_empty());
}

fn entity<'a>(
    user: Option<Option<&'a str>>,
    client: Option<Option<&'a str>>,
) -> Vec<(&'static str, Option<&'a str>)> {
    let mut parts = Vec::new();
    if let Some(u) = user {
        parts.push(("user", u));
    }
    if let Some(c) = client {
        parts.push(("client-id", c));
    }
    parts
}

/// Kafka's resolution order, one level at a time: each added entity is more specific than the
/// last, so it takes over.
#[test]
fn the_most_specific_entity_wins() {
    let mut q = ClientQuotas::default();
    /// (user component, client-id component, the tags expected).
    type Level = (
        Option<Option<&'static str>>,
        Option<Option<&'static str>>,
        (&'static str, &'static str),
    );
    let levels: &[Level] = &[
        (None, Some(None), ("", "c")),
        (None, Some(Some("c")), ("", "c")),
        (Some(None), None, ("u", "")),
        (Some(None), Some(None), ("u", "c")),
        (Some(None), Some(Some("c")), ("u", "c")),
        (Some(Some("u")), None, ("u", "")),
        (Some(Some("u")), Some(None), ("u", "c")),
        (Some(Some("u")), Some(Some("c")), ("u", "c")),
    ];
    for (i, (user, client, tags)) in levels.iter().enumerate() {
        let value = (i + 1) as f64 * 100.0;
        let e = entity(*user, *client);
        assert!(alter(&mut q, &[set(&e, &[(PRODUCER_BYTE_RATE, Some(value))])])[0].is_ok());
        let resolved = q.resolve(PRODUCER_BYTE_RATE, "u", "c");
        assert_eq!(resolved.bound, Some(value), "level {i}: {e:?}");
        assert_eq!(
            (resolved.user_tag.as_str(), resolved.client_id_tag.as_str()),
            *tags
        );
        // Another user and client id fall to the defaults.
        let other = q.resolve(PRODUCER_BYTE_RATE, "v", "d");
        assert!(other.bound.is_some());
    }
    // Only producer_byte_rate was set: consumers are not limited.
    assert_eq!(q.resolve(CONSUMER_BYTE_RATE, "u", "c").bound, None);
}

/// With client-id quotas only, every user of a client id shares its rate (tags "", client).
#[test]
fn one_shape_of_entity_shares_the_rate_across_the_other_component() {
    let mut q = ClientQuotas::default();
    alter(
        &mut q,
        &[set(
            &[("client-id", Some("c"))],
            &[(PRODUCER_BYTE_RATE, Some(5.0))],
        )],
    );
    let a = q.resolve(PRODUCER_BYTE_RATE, "alice", "c");
    let b = q.resolve(PRODUCER_BYTE_RATE, "bob", "c");
    assert_eq!(a, b);
    assert_eq!(a.bound, Some(5.0));
    let free = q.resolve(PRODUCER_BYTE_RATE, "alice", "other");
    assert_eq!(free.bound, None);
}

fn filter(parts: &[(&str, i8, Option<&str>)]) -> Vec<FilterComponent> {
    parts
        .iter()
        .map(|(t, m, n)| FilterComponent {
            entity_type: t.to_string(),
            match_type: *m,
            name: n.map(str::to_string),
        })
        .collect()
}

#[test]
fn describe_filters_as_kafka() {
    let mut q = ClientQuotas::default();
    for e in [
        entity(Some(Some("a")), None),
        entity(Some(Some("a")), Some(Some("c"))),
        entity(Some(None), None),
        entity(None, Some(Some("c"))),
    ] {
        alter(&mut q, &[set(&e, &[(PRODUCER_BYTE_RATE, Some(10.0))])]);
    }
    let count = |parts: &[(&str, i8, Option<&str>)], strict| {
        describe(&q, &filter(parts), strict).map(|v| v.len())
    };
    assert_eq!(count(&[], false), Ok(4));
    assert_eq!(count(&[], true), Ok(0));
    assert_eq!(count(&[("user", 0, Some("a"))], false), Ok(2));
    assert_eq!(count(&[("user", 0, Some("a"))], true), Ok(1));
    assert_eq!(count(&[("user", 1, None)], false), Ok(1));
    assert_eq!(count(&[("user", 2, None)], false), Ok(3));
    assert_eq!(count(&[("client-id", 2, None)], true), Ok(1));
    let err = |parts: &[(&str, i8, Option<&str>)]| describe(&q, &filter(parts), false).unwrap_err();
    assert_eq!(err(&[("", 0, Some("a"))]).1, "Invalid empty entity type.");
    assert_eq!(
        err(&[("user", 2, None), ("user", 1, None)]).1,
        "Entity type user cannot appear more than once in the filter."
    );
    assert_eq!(
        err(&[("group", 2, None)]),
        (
            ErrorCode::UnsupportedVersion,
            "Unsupported entity type group".to_string()
        )
    );
    assert_eq!(
        err(&[("user", 0, None)]).1,
        "Request specified MATCH_TYPE_EXACT, but set match string to null."
    );
    assert_eq!(err(&[("user", 7, None)]).1, "Unknown match type 7");
    assert!(err(&[("ip", 2, None), ("user", 2, None)])
        .1
        .starts_with("Invalid entity filter"));
}

#[test]
fn quotas_survive_a_json_round_trip() {
    let mut q = ClientQuotas::default();
    alter(
        &mut q,
        &[
            set(
                &[("user", None), ("client-id", Some("c"))],
                &[(PRODUCER_BYTE_RATE, Some(1024.0))],
            ),
            set(
                &[("ip", Some("::1"))],
                &[(CONNECTION_CREATION_RATE, Some(3.0))],
            ),
        ],
    );
    let text = serde_json::to_string(&q).unwrap();
    let back: ClientQuotas = serde_json::from_str(&text).unwrap();
    assert_eq!(back, q);
}
