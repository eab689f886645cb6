//! The rules of `StandardAuthorizerData` and `AclControlManager`, case by case (Kafka's own
//! `StandardAuthorizerTest` and `AclControlManagerTest` cover the same ground).

use super::*;
use Operation::*;
use Permission::*;
use ResourceType::*;

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern: PatternType,
    principal: &str,
    op: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        resource_type,
        name: name.to_string(),
        pattern,
        principal: principal.to_string(),
        host: WILDCARD.to_string(),
        operation: op,
        permission,
    }
}

fn lit(t: ResourceType, name: &str, who: &str, op: Operation, p: Permission) -> AclBinding {
    acl(t, name, PatternType::Literal, who, op, p)
}

fn pre(t: ResourceType, name: &str, who: &str, op: Operation, p: Permission) -> AclBinding {
    acl(t, name, PatternType::Prefixed, who, op, p)
}

fn set(bindings: &[AclBinding]) -> Acls {
    bindings.iter().cloned().collect()
}

const ALICE: Requester<'static> = Requester {
    principal: "User:alice",
    host: "127.0.0.1",
};
const BOB: Requester<'static> = Requester {
    principal: "User:bob",
    host: "10.0.0.2",
};

fn allowed(acls: &Acls, who: Requester<'_>, op: Operation, t: ResourceType, name: &str) -> bool {
    let config = AuthorizerConfig::default();
    Authorizer {
        config: &config,
        acls,
    }
    .authorize(who, op, t, name)
}

#[test]
fn nothing_is_allowed_without_a_binding_by_default() {
    let acls = Acls::new();
    for op in Operation::ALL_VALUES {
        assert!(!allowed(&acls, ALICE, *op, Topic, "t"));
        assert!(!allowed(&acls, ALICE, *op, Cluster, CLUSTER_NAME));
    }
}

#[test]
fn allow_everyone_if_no_acl_found_opens_only_resources_without_bindings() {
    let acls = set(&[lit(Topic, "guarded", "User:bob", Read, Allow)]);
    let config = AuthorizerConfig {
        allow_everyone_if_no_acl_found: true,
        ..Default::default()
    };
    let a = Authorizer {
        config: &config,
        acls: &acls,
    };
    assert!(a.authorize(ALICE, Write, Topic, "open"));
    assert!(a.authorize(ALICE, Read, Group, "g"));
    // A binding on the resource, even of another principal, closes it to the rest.
    assert!(!a.authorize(ALICE, Read, Topic, "guarded"));
    assert!(a.authorize(BOB, Read, Topic, "guarded"));
    // A prefixed or wildcard binding counts as a binding on the resource.
    let acls = set(&[pre(Topic, "gua", "User:bob", Read, Allow)]);
    let a = Authorizer {
        config: &config,
        acls: &acls,
    };
    assert!(!a.authorize(ALICE, Read, Topic, "guarded"));
    assert!(a.authorize(ALICE, Read, Topic, "other"));
}

#[test]
fn super_users_are_allowed_everything_even_against_a_deny() {
    let acls = set(&[lit(Topic, "*", "User:root", All, Deny)]);
    let config = AuthorizerConfig {
        super_users: AuthorizerConfig::parse_super_users(" User:root ;;User:admin"),
        ..Default::default()
    };
    assert_eq!(config.super_users.len(), 2);
    let a = Authorizer {
        config: &config,
        acls: &acls,
    };
    let root = Requester {
        principal: "User:root",
        host: "1.2.3.4",
    };
    assert!(a.authorize(root, Delete, Topic, "t"));
    assert!(a.authorize(root, ClusterAction, Cluster, CLUSTER_NAME));
    assert!(a.authorize_any(root, Write, Topic));
    assert!(!a.authorize(ALICE, Read, Topic, "t"));
}

#[test]
fn a_literal_binding_applies_to_its_name_only_and_star_to_every_name() {
    let acls = set(&[lit(Topic, "t", "User:alice", Read, Allow)]);
    assert!(allowed(&acls, ALICE, Read, Topic, "t"));
    assert!(!allowed(&acls, ALICE, Read, Topic, "t2"));
    assert!(!allowed(&acls, ALICE, Read, Topic, "T"));
    assert!(!allowed(&acls, ALICE, Read, Group, "t"), "another type");
    let acls = set(&[lit(Topic, "*", "User:alice", Read, Allow)]);
    assert!(allowed(&acls, ALICE, Read, Topic, "anything"));
    assert!(!allowed(&acls, ALICE, Read, Group, "anything"));
}

#[test]
fn a_prefixed_binding_applies_to_every_name_it_starts() {
    let acls = set(&[pre(Topic, "fin-", "User:alice", Write, Allow)]);
    assert!(allowed(&acls, ALICE, Write, Topic, "fin-"));
    assert!(allowed(&acls, ALICE, Write, Topic, "fin-ledger"));
    assert!(!allowed(&acls, ALICE, Write, Topic, "fin"));
    assert!(!allowed(&acls, ALICE, Write, Topic, "xfin-ledger"));
    // A prefixed "*" is the name "*", not a wildcard.
    let acls = set(&[pre(Topic, "*", "User:alice", Write, Allow)]);
    assert!(!allowed(&acls, ALICE, Write, Topic, "t"));
    assert!(allowed(&acls, ALICE, Write, Topic, "*t"));
}

#[test]
fn allows_imply_describe_and_describe_configs_but_denies_imply_nothing() {
    for op in [Read, Write, Delete, Alter, Describe, All] {
        let acls = set(&[lit(Topic, "t", "User:alice", op, Allow)]);
        assert!(allowed(&acls, ALICE, Describe, Topic, "t"), "{op:?}");
    }
    for op in [
        Create,
        ClusterAction,
        DescribeConfigs,
        AlterConfigs,
        IdempotentWrite,
    ] {
        let acls = set(&[lit(Topic, "t", "User:alice", op, Allow)]);
        assert!(!allowed(&acls, ALICE, Describe, Topic, "t"), "{op:?}");
    }
    for op in [AlterConfigs, DescribeConfigs, All] {
        let acls = set(&[lit(Topic, "t", "User:alice", op, Allow)]);
        assert!(allowed(&acls, ALICE, DescribeConfigs, Topic, "t"), "{op:?}");
    }
    let acls = set(&[lit(Topic, "t", "User:alice", Alter, Allow)]);
    assert!(!allowed(&acls, ALICE, DescribeConfigs, Topic, "t"));
    assert!(!allowed(&acls, ALICE, AlterConfigs, Topic, "t"));
    // READ does not imply WRITE, nor the reverse.
    let acls = set(&[lit(Topic, "t", "User:alice", Read, Allow)]);
    assert!(!allowed(&acls, ALICE, Write, Topic, "t"));
    // A DENY of READ leaves DESCRIBE to an ALLOW of DESCRIBE.
    let acls = set(&[
        lit(Topic, "t", "User:alice", Read, Deny),
        lit(Topic, "t", "User:alice", Describe, Allow),
    ]);
    assert!(allowed(&acls, ALICE, Describe, Topic, "t"));
    assert!(!allowed(&acls, ALICE, Read, Topic, "t"));
    // ALL allows every operation; IMPLIES is about ALLOW only.
    let acls = set(&[lit(Topic, "t", "User:alice", All, Allow)]);
    for op in Operation::ALL_VALUES {
        assert!(allowed(&acls, ALICE, *op, Topic, "t"), "{op:?}");
    }
}

#[test]
fn deny_wins_over_allow_from_any_pattern() {
    let cases = [
        // (allow, deny)
        (
            lit(Topic, "t", "User:alice", Read, Allow),
            lit(Topic, "t", "User:alice", Read, Deny),
        ),
        (
            lit(Topic, "*", "User:alice", All, Allow),
            pre(Topic, "t", "User:alice", Read, Deny),
        ),
        (
            pre(Topic, "t", "User:alice", Read, Allow),
            lit(Topic, "*", "User:*", Read, Deny),
        ),
        (
            lit(Topic, "t", "User:alice", Read, Allow),
            lit(Topic, "t", "User:alice", All, Deny),
        ),
    ];
    for (allow, deny) in cases {
        let acls = set(std::slice::from_ref(&allow));
        assert!(allowed(&acls, ALICE, Read, Topic, "t"), "{allow:?}");
        let acls = set(&[allow.clone(), deny.clone()]);
        assert!(
            !allowed(&acls, ALICE, Read, Topic, "t"),
            "{allow:?} {deny:?}"
        );
    }
    // A deny of another operation, principal or host leaves the allow.
    let mut deny_elsewhere = lit(Topic, "t", "User:alice", Read, Deny);
    deny_elsewhere.host = "10.9.9.9".to_string();
    let acls = set(&[
        lit(Topic, "t", "User:alice", Read, Allow),
        lit(Topic, "t", "User:alice", Write, Deny),
        lit(Topic, "t", "User:bob", Read, Deny),
        deny_elsewhere,
    ]);
    assert!(allowed(&acls, ALICE, Read, Topic, "t"));
}

#[test]
fn principals_and_hosts_match_exactly_or_by_wildcard() {
    let acls = set(&[lit(Topic, "t", "User:*", Read, Allow)]);
    assert!(allowed(&acls, ALICE, Read, Topic, "t"));
    assert!(allowed(&acls, BOB, Read, Topic, "t"));
    let acls = set(&[lit(Topic, "t", "User:Alice", Read, Allow)]);
    assert!(
        !allowed(&acls, ALICE, Read, Topic, "t"),
        "principals are case-sensitive"
    );
    let mut from_bob_host = lit(Topic, "t", "User:*", Read, Allow);
    from_bob_host.host = "10.0.0.2".to_string();
    let acls = set(&[from_bob_host]);
    assert!(allowed(&acls, BOB, Read, Topic, "t"));
    assert!(!allowed(&acls, ALICE, Read, Topic, "t"));
}

#[test]
fn authorize_any_finds_an_allow_not_taken_away_by_a_deny() {
    let acls = set(&[lit(Topic, "t", "User:alice", Write, Allow)]);
    let config = AuthorizerConfig::default();
    let a = |acls| Authorizer {
        config: &config,
        acls,
    };
    assert!(a(&acls).authorize_any(ALICE, Write, Topic));
    assert!(!a(&acls).authorize_any(BOB, Write, Topic));
    assert!(!a(&acls).authorize_any(ALICE, Write, Group));
    assert!(!a(&acls).authorize_any(ALICE, Read, Topic));
    let acls = set(&[
        lit(Topic, "t", "User:alice", Write, Allow),
        pre(Topic, "", "User:alice", Write, Deny),
    ]);
    assert!(!a(&acls).authorize_any(ALICE, Write, Topic));
    let acls = set(&[
        pre(Topic, "fin-", "User:alice", All, Allow),
        lit(Topic, "other", "User:alice", Write, Deny),
    ]);
    assert!(a(&acls).authorize_any(ALICE, Write, Topic));
}

fn wire(t: i8, name: &str, pattern: i8, principal: &str, op: i8, permission: i8) -> WireAcl {
    WireAcl {
        resource_type: t,
        name: name.to_string(),
        pattern,
        principal: principal.to_string(),
        host: "*".to_string(),
        operation: op,
        permission,
    }
}

/// As Kafka 4.4 answered the differential suite's `acls` case.
#[test]
fn new_bindings_are_validated_as_kafka_does() {
    let ok = wire(2, "t", 3, "User:alice", 3, 3).validate().unwrap();
    assert_eq!(ok, lit(Topic, "t", "User:alice", Read, Allow));
    let refused = |w: WireAcl, message: &str| {
        let Err(AclError::Refused(code, m)) = w.validate() else {
            panic!("{w:?} not refused");
        };
        assert_eq!(code, ErrorCode::InvalidRequest);
        assert_eq!(m, message);
    };
    refused(
        wire(4, "other", 3, "User:a", 7, 3),
        "The only valid name for the CLUSTER resource is kafka-cluster",
    );
    refused(
        wire(2, "", 3, "User:a", 3, 3),
        "Invalid empty resource name",
    );
    refused(
        wire(2, "t", 3, "alice", 3, 3),
        "Could not parse principal from `alice` (no colon is present separating the \
         principal type from the principal name)",
    );
    let unbuildable = [
        wire(2, "t", 1, "User:a", 3, 3),
        wire(2, "t", 2, "User:a", 3, 3),
        wire(1, "t", 3, "User:a", 3, 3),
        wire(2, "t", 3, "User:a", 1, 3),
        wire(2, "t", 3, "User:a", 3, 1),
    ];
    for w in unbuildable {
        assert_eq!(w.validate(), Err(AclError::Unbuildable), "{w:?}");
    }
    let malformed = [
        wire(0, "t", 3, "User:a", 3, 3),
        wire(9, "t", 3, "User:a", 3, 3),
        wire(2, "t", 0, "User:a", 3, 3),
        wire(2, "t", 3, "User:a", 0, 3),
        wire(2, "t", 3, "User:a", 3, 0),
        wire(2, "t", 1, "User:a", 0, 3),
    ];
    for w in malformed {
        assert_eq!(w.validate(), Err(AclError::Malformed), "{w:?}");
    }
    assert!(wire(4, CLUSTER_NAME, 3, "User:a", 7, 3).validate().is_ok());
    assert!(wire(7, "bob", 4, "User:a", 13, 2).validate().is_ok());
}

fn filter(t: i8, name: Option<&str>, pattern: i8) -> AclFilter {
    WireFilter {
        resource_type: t,
        name: name.map(str::to_string),
        pattern,
        principal: None,
        host: None,
        operation: 1,
        permission: 1,
    }
    .validate()
    .unwrap()
}

#[test]
fn filters_match_as_kafkas_resource_pattern_filter() {
    let acls = set(&[
        lit(Topic, "fin-ledger", "User:alice", Read, Allow),
        lit(Topic, "*", "User:bob", Read, Allow),
        pre(Topic, "fin-", "User:carol", Write, Allow),
        pre(Topic, "fin-ledger", "User:dan", Write, Deny),
        lit(Group, "fin-ledger", "User:alice", Read, Allow),
    ]);
    let count = |f: AclFilter| acls.iter().filter(|b| f.matches(b)).count();
    assert_eq!(count(AclFilter::any()), 5);
    assert_eq!(count(filter(1, None, 1)), 5);
    assert_eq!(count(filter(2, None, 1)), 4);
    // ANY with a name: either pattern, that very name.
    assert_eq!(count(filter(2, Some("fin-ledger"), 1)), 2);
    // LITERAL / PREFIXED: that pattern, that name.
    assert_eq!(count(filter(2, Some("fin-ledger"), 3)), 1);
    assert_eq!(count(filter(2, Some("fin-"), 4)), 1);
    assert_eq!(count(filter(2, None, 4)), 2);
    // MATCH: whatever applies to the resource.
    assert_eq!(count(filter(2, Some("fin-ledger"), 2)), 4);
    assert_eq!(count(filter(2, Some("fin-x"), 2)), 2);
    assert_eq!(count(filter(2, Some("other"), 2)), 1);
    // Entry fields: exactly, no implication.
    let mut f = AclFilter::any();
    f.operation = Some(Describe);
    assert_eq!(count(f), 0);
    let mut f = AclFilter::any();
    f.principal = Some("User:alice".to_string());
    f.permission = Some(Allow);
    assert_eq!(count(f), 2);
    let mut f = AclFilter::any();
    f.permission = Some(Deny);
    f.host = Some("*".to_string());
    assert_eq!(count(f), 1);
}

#[test]
fn unknown_filters_are_malformed() {
    let w = |t, pattern, op, permission| WireFilter {
        resource_type: t,
        name: None,
        pattern,
        principal: None,
        host: None,
        operation: op,
        permission,
    };
    for f in [
        w(0, 1, 1, 1),
        w(1, 0, 1, 1),
        w(1, 1, 0, 1),
        w(1, 1, 1, 0),
        w(1, 1, 1, 9),
    ] {
        assert_eq!(f.validate(), Err(AclError::Malformed), "{f:?}");
    }
    assert!(w(7, 2, 13, 2).validate().is_ok());
}

#[test]
fn create_ignores_duplicates_and_delete_lists_each_filters_matches() {
    let a = lit(Topic, "t", "User:alice", Read, Allow);
    let b = pre(Topic, "t", "User:bob", Write, Deny);
    let mut acls = set(std::slice::from_ref(&a));
    let new = decide_create(&acls, &[a.clone(), b.clone(), b.clone()]);
    assert_eq!(new, vec![b.clone()]);
    apply(&mut acls, &[AclChange::Add(b.clone())]);
    assert_eq!(acls.len(), 2);
    let (matched, removed) = decide_delete(
        &acls,
        &[
            filter(2, Some("t"), 1),
            filter(2, Some("t"), 4),
            filter(3, None, 1),
        ],
    );
    assert_eq!(matched[0].len(), 2);
    assert_eq!(matched[1], vec![b.clone()]);
    assert!(matched[2].is_empty());
    assert_eq!(removed.len(), 2);
    apply(
        &mut acls,
        &removed
            .into_iter()
            .map(AclChange::Remove)
            .collect::<Vec<_>>(),
    );
    assert!(acls.is_empty());
}

#[test]
fn codes_round_trip_and_are_kafkas() {
    assert_eq!(ResourceType::Topic.code(), 2);
    assert_eq!(ResourceType::DelegationToken.code(), 6);
    assert_eq!(PatternType::Prefixed.code(), 4);
    assert_eq!(Operation::IdempotentWrite.code(), 12);
    assert_eq!(Permission::Allow.code(), 3);
    for t in ResourceType::ALL_VALUES {
        assert_eq!(ResourceType::from_code(t.code()), Some(*t));
    }
    for o in Operation::ALL_VALUES {
        assert_eq!(Operation::from_code(o.code()), Some(*o));
    }
    assert_eq!(Operation::from_code(CODE_ANY), None);
    assert_eq!(Operation::DescribeConfigs.kafka_name(), "DESCRIBE_CONFIGS");
}

#[test]
fn the_metadata_image_applies_acl_records_and_keeps_them_in_snapshots() {
    use crate::image::MetadataImage;
    use crate::record::MetadataRecord;
    use crate::types::LogIndex;
    let a = lit(Topic, "t", "User:alice", Read, Allow);
    let mut image = MetadataImage::default();
    let add = MetadataRecord::AccessControlEntry { binding: a.clone() };
    let outcomes = image.apply_entry(LogIndex(1), 1, &[add.clone(), add]);
    assert!(outcomes.iter().all(Result::is_ok));
    assert_eq!(image.acls.len(), 1);
    let stored = serde_json::to_string(&image).unwrap();
    let back: MetadataImage = serde_json::from_str(&stored).unwrap();
    assert_eq!(*back.acls, *image.acls);
    let remove = MetadataRecord::RemoveAccessControlEntry { binding: a };
    let outcomes = image.apply_entry(LogIndex(2), 1, &[remove.clone(), remove]);
    assert!(outcomes[0].is_ok() && outcomes[1].is_err(), "{outcomes:?}");
    assert!(image.acls.is_empty());
}
