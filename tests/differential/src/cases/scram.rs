//! SCRAM credentials (KIP-554) and SASL on a PLAINTEXT listener: AlterUserScramCredentials'
//! refusals and successes, DescribeUserScramCredentials of known, unknown and twice-named users,
//! and SaslHandshake / SaslAuthenticate where no SASL is served (ILLEGAL_SASL_STATE). One user per
//! request where Kafka's answer order is a hash map's.

use rill_protocol::kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use rill_protocol::kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use rill_protocol::kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, ApiKey, DescribeUserScramCredentialsRequest, RequestKind,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};

use super::{sb, Case};
use crate::pair::Pair;

pub const CASES: &[Case] = &[
    ("scram_credentials", scram_credentials),
    ("sasl_on_plaintext", sasl_on_plaintext),
];

fn upsert(name: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
    ScramCredentialUpsertion::default()
        .with_name(sb(name))
        .with_mechanism(mechanism)
        .with_iterations(iterations)
        .with_salt(vec![1u8; 24].into())
        .with_salted_password(vec![2u8; 32].into())
}

fn delete(name: &str, mechanism: i8) -> ScramCredentialDeletion {
    ScramCredentialDeletion::default()
        .with_name(sb(name))
        .with_mechanism(mechanism)
}

fn alter(
    deletions: Vec<ScramCredentialDeletion>,
    upsertions: Vec<ScramCredentialUpsertion>,
) -> RequestKind {
    RequestKind::AlterUserScramCredentials(
        AlterUserScramCredentialsRequest::default()
            .with_deletions(deletions)
            .with_upsertions(upsertions),
    )
}

fn describe(users: Option<&[&str]>) -> RequestKind {
    RequestKind::DescribeUserScramCredentials(
        DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
            u.iter()
                .map(|n| UserName::default().with_name(sb(n)))
                .collect()
        })),
    )
}

fn scram_credentials(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::AlterUserScramCredentials) {
        let steps: Vec<RequestKind> = vec![
            alter(vec![], vec![upsert("kd-alice", 1, 4096)]),
            alter(vec![], vec![upsert("kd-alice", 2, 8192)]),
            alter(vec![], vec![upsert("kd-few", 1, 4095)]),
            alter(vec![], vec![upsert("kd-many", 2, 16385)]),
            alter(vec![], vec![upsert("kd-mech", 0, 4096)]),
            alter(vec![], vec![upsert("kd-mech", 9, 4096)]),
            alter(vec![], vec![upsert("", 1, 4096)]),
            alter(
                vec![],
                vec![upsert("kd-twice", 1, 4096), upsert("kd-twice", 2, 4096)],
            ),
            alter(
                vec![delete("kd-twice", 1)],
                vec![upsert("kd-twice", 1, 4096)],
            ),
            alter(vec![delete("kd-nobody", 1)], vec![]),
            alter(vec![delete("kd-alice", 3)], vec![]),
            alter(vec![], vec![]),
        ];
        for step in steps {
            pair.both(version, |_| step.clone())?;
        }
    }
    for version in pair.versions(ApiKey::DescribeUserScramCredentials) {
        pair.both(version, |_| describe(Some(&["kd-alice"])))?;
        pair.both(version, |_| describe(Some(&["kd-nobody"])))?;
        pair.both(version, |_| describe(Some(&["kd-alice", "kd-alice"])))?;
    }
    for version in pair.versions(ApiKey::AlterUserScramCredentials) {
        pair.both(version, |_| alter(vec![delete("kd-alice", 1)], vec![]))?;
        pair.both(version, |_| alter(vec![delete("kd-alice", 2)], vec![]))?;
        pair.both(version, |_| alter(vec![delete("kd-alice", 2)], vec![]))?;
    }
    for version in pair.versions(ApiKey::DescribeUserScramCredentials) {
        pair.both(version, |_| describe(Some(&["kd-alice"])))?;
    }
    Ok(())
}

fn sasl_on_plaintext(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::SaslHandshake) {
        let request = SaslHandshakeRequest::default().with_mechanism(sb("PLAIN"));
        pair.both(version, |_| RequestKind::SaslHandshake(request.clone()))?;
    }
    for version in pair.versions(ApiKey::SaslAuthenticate) {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(b"\0u\0p"[..].into());
        pair.both(version, |_| RequestKind::SaslAuthenticate(request.clone()))?;
    }
    Ok(())
}
