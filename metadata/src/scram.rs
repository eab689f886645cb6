//! SCRAM credentials as KRaft keeps them (KIP-554): per user and mechanism the salt, the stored
//! key, the server key and the iteration count (`UserScramCredentialRecord`), never the password
//! nor the salted password. [`decide_alter`] is Kafka's `ScramControlManager.alterCredentials`:
//! the one place AlterUserScramCredentials is validated, on a single node as in a cluster's
//! controller; [`describe`] is `ScramImage.describe`.
//!
//! The broker derives the stored and server keys from the salted password a client sends before
//! the request goes on (`rill_server::security::scram`), so the salted password is neither
//! written to the metadata log nor sent over the controller listener.

use std::collections::{BTreeMap, BTreeSet};

use rill_types::ErrorCode;
use serde::{Deserialize, Serialize};

/// Kafka's most iterations a credential may have (`ScramControlManager.MAX_ITERATIONS`).
pub const ITERATIONS_MAX: i32 = 16_384;

/// A SCRAM mechanism, by Kafka's type byte (`org.apache.kafka.clients.admin.ScramMechanism`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ScramMechanism {
    /// SCRAM-SHA-256 (type 1).
    Sha256,
    /// SCRAM-SHA-512 (type 2).
    Sha512,
}

impl ScramMechanism {
    /// Both, in type order.
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The mechanism of Kafka's type byte; `None` for UNKNOWN (0) and anything else.
    pub fn from_type(t: i8) -> Option<Self> {
        match t {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// Kafka's type byte.
    pub fn type_byte(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's fewest iterations for it (the internal `ScramMechanism.minIterations`).
    pub fn iterations_min(self) -> i32 {
        4096
    }
}

/// One user's credential for one mechanism (KRaft's `UserScramCredentialRecord` fields).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    /// The salt the client salted its password with.
    pub salt: Vec<u8>,
    /// H(HMAC(salted password, "Client Key")).
    pub stored_key: Vec<u8>,
    /// HMAC(salted password, "Server Key").
    pub server_key: Vec<u8>,
    /// The iteration count of the salting.
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredential {
    // As Kafka's ScramCredentialValue.toString: the keys are secrets, never logged.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScramCredential([hidden])")
    }
}

/// Every user's credentials: user → mechanism → credential.
pub type ScramCredentials = BTreeMap<String, BTreeMap<ScramMechanism, ScramCredential>>;

/// An AlterUserScramCredentials deletion as the client sent it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramDeletion {
    /// The user.
    pub name: String,
    /// Kafka's mechanism type byte, unchecked.
    pub mechanism: i8,
}

/// An AlterUserScramCredentials upsertion, its keys derived by the broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramUpsertion {
    /// The user.
    pub name: String,
    /// Kafka's mechanism type byte, unchecked.
    pub mechanism: i8,
    /// The credential to store (`iterations` as the client sent it, unchecked); `None` when
    /// the mechanism is unknown, so nothing could be derived.
    pub credential: Option<ScramCredential>,
}

/// A change [`decide_alter`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScramChange {
    /// Store (or replace) a credential.
    Upsert(String, ScramMechanism, ScramCredential),
    /// Remove a credential that exists.
    Remove(String, ScramMechanism),
}

/// One user's outcome of an AlterUserScramCredentials.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramResult {
    /// The user.
    pub user: String,
    /// Kafka error code (`None`: done).
    #[serde(with = "crate::request::wire_code")]
    pub error_code: ErrorCode,
    /// Why, for the client.
    pub message: Option<String>,
}

fn failure(user: &str, code: ErrorCode, message: &str) -> ScramResult {
    ScramResult {
        user: user.to_string(),
        error_code: code,
        message: Some(message.to_string()),
    }
}

/// Kafka's `validateScramUsernameAndMechanism`.
fn check_name_and_mechanism(name: &str, mechanism: i8) -> Result<ScramMechanism, ScramResult> {
    if name.is_empty() {
        return Err(failure(
            name,
            ErrorCode::UnacceptableCredential,
            "Username must not be empty",
        ));
    }
    ScramMechanism::from_type(mechanism).ok_or_else(|| {
        failure(
            name,
            ErrorCode::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism",
        )
    })
}

/// Kafka's `validateDeletion`: the credential must exist.
fn check_deletion(
    current: &ScramCredentials,
    d: &ScramDeletion,
) -> Result<ScramMechanism, ScramResult> {
    let m = check_name_and_mechanism(&d.name, d.mechanism)?;
    match current.get(&d.name).is_some_and(|c| c.contains_key(&m)) {
        true => Ok(m),
        false => Err(failure(
            &d.name,
            ErrorCode::ResourceNotFound,
            "Attempt to delete a user credential that does not exist",
        )),
    }
}

/// Kafka's `validateUpsertion`: iterations within 4096..=[`ITERATIONS_MAX`].
fn check_upsertion(u: &ScramUpsertion) -> Result<(ScramMechanism, ScramCredential), ScramResult> {
    let m = check_name_and_mechanism(&u.name, u.mechanism)?;
    let credential = u.credential.clone().ok_or_else(|| {
        failure(
            &u.name,
            ErrorCode::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism",
        )
    })?;
    if credential.iterations < m.iterations_min() {
        return Err(failure(
            &u.name,
            ErrorCode::UnacceptableCredential,
            "Too few iterations",
        ));
    }
    if credential.iterations > ITERATIONS_MAX {
        return Err(failure(
            &u.name,
            ErrorCode::UnacceptableCredential,
            "Too many iterations",
        ));
    }
    Ok((m, credential))
}

/// Decides an AlterUserScramCredentials against `current`, as Kafka's controller does: a user
/// named twice (in deletions or upsertions or both) gets DUPLICATE_RESOURCE and nothing of
/// theirs changes; an empty name UNACCEPTABLE_CREDENTIAL; an unknown mechanism
/// UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..=16384 UNACCEPTABLE_CREDENTIAL;
/// deleting a credential that does not exist RESOURCE_NOT_FOUND. Results: deletions, then
/// upsertions, then failures (Kafka's order, sorted by user within each).
pub fn decide_alter(
    current: &ScramCredentials,
    deletions: &[ScramDeletion],
    upsertions: &[ScramUpsertion],
) -> (Vec<ScramResult>, Vec<ScramChange>) {
    let mut to_delete: BTreeMap<String, ScramMechanism> = BTreeMap::new();
    let mut to_upsert: BTreeMap<String, (ScramMechanism, ScramCredential)> = BTreeMap::new();
    let mut errors: BTreeMap<String, ScramResult> = BTreeMap::new();
    let duplicate = |name: &str| {
        failure(
            name,
            ErrorCode::DuplicateResource,
            "A user credential cannot be altered twice in the same request",
        )
    };
    for d in deletions {
        if errors.contains_key(&d.name) {
            continue;
        }
        if to_delete.remove(&d.name).is_some() {
            errors.insert(d.name.clone(), duplicate(&d.name));
            continue;
        }
        match check_deletion(current, d) {
            Ok(m) => {
                to_delete.insert(d.name.clone(), m);
            }
            Err(e) => {
                errors.insert(d.name.clone(), e);
            }
        }
    }
    for u in upsertions {
        if errors.contains_key(&u.name) {
            continue;
        }
        if to_delete.remove(&u.name).is_some() || to_upsert.remove(&u.name).is_some() {
            errors.insert(u.name.clone(), duplicate(&u.name));
            continue;
        }
        match check_upsertion(u) {
            Ok(c) => {
                to_upsert.insert(u.name.clone(), c);
            }
            Err(e) => {
                errors.insert(u.name.clone(), e);
            }
        }
    }
    let ok = |user: &str| ScramResult {
        user: user.to_string(),
        error_code: ErrorCode::None,
        message: None,
    };
    let mut results = Vec::new();
    let mut changes = Vec::new();
    for (name, m) in to_delete {
        results.push(ok(&name));
        changes.push(ScramChange::Remove(name, m));
    }
    for (name, (m, credential)) in to_upsert {
        results.push(ok(&name));
        changes.push(ScramChange::Upsert(name, m, credential));
    }
    results.extend(errors.into_values());
    (results, changes)
}

/// Applies decided changes to `credentials` (a removal of what is gone is a no-op).
pub fn apply(credentials: &mut ScramCredentials, changes: &[ScramChange]) {
    for change in changes {
        match change {
            ScramChange::Upsert(name, m, credential) => {
                credentials
                    .entry(name.clone())
                    .or_default()
                    .insert(*m, credential.clone());
            }
            ScramChange::Remove(name, m) => {
                if let Some(user) = credentials.get_mut(name) {
                    user.remove(m);
                    if user.is_empty() {
                        credentials.remove(name);
                    }
                }
            }
        }
    }
}

/// One user's DescribeUserScramCredentials answer: its (mechanism type, iterations), or why
/// not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    /// The user.
    pub user: String,
    /// Kafka error code.
    pub error_code: ErrorCode,
    /// Why, for the client.
    pub message: Option<String>,
    /// (mechanism type byte, iterations), in type order.
    pub credentials: Vec<(i8, i32)>,
}

/// Kafka's `ScramImage.describe`: `users` `None` or empty lists every user; a user named twice
/// gets DUPLICATE_RESOURCE, one without credentials RESOURCE_NOT_FOUND.
pub fn describe(credentials: &ScramCredentials, users: Option<&[String]>) -> Vec<Described> {
    let asked: Vec<(String, bool)> = match users {
        None | Some([]) => credentials.keys().map(|u| (u.clone(), false)).collect(),
        Some(users) => {
            let mut seen = BTreeSet::new();
            let mut twice = BTreeSet::new();
            for u in users {
                if !seen.insert(u.clone()) {
                    twice.insert(u.clone());
                }
            }
            seen.into_iter()
                .map(|u| {
                    let dup = twice.contains(&u);
                    (u, dup)
                })
                .collect()
        }
    };
    asked
        .into_iter()
        .map(|(user, duplicate)| {
            let mut d = Described {
                user: user.clone(),
                error_code: ErrorCode::None,
                message: None,
                credentials: Vec::new(),
            };
            if duplicate {
                d.error_code = ErrorCode::DuplicateResource;
                d.message = Some(format!(
                    "Cannot describe SCRAM credentials for the same user twice in a single \
                     request: {user}"
                ));
                return d;
            }
            match credentials.get(&user) {
                Some(c) if !c.is_empty() => {
                    d.credentials = c
                        .iter()
                        .map(|(m, c)| (m.type_byte(), c.iterations))
                        .collect();
                }
                _ => {
                    d.error_code = ErrorCode::ResourceNotFound;
                    d.message = Some(format!(
                        "Attempt to describe a user credential that does not exist: {user}"
                    ));
                }
            }
            d
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(iterations: i32) -> Option<ScramCredential> {
        Some(ScramCredential {
            salt: vec![1],
            stored_key: vec![2],
            server_key: vec![3],
            iterations,
        })
    }

    fn up(name: &str, mechanism: i8, iterations: i32) -> ScramUpsertion {
        ScramUpsertion {
            name: name.into(),
            mechanism,
            credential: cred(iterations),
        }
    }

    fn del(name: &str, mechanism: i8) -> ScramDeletion {
        ScramDeletion {
            name: name.into(),
            mechanism,
        }
    }

    fn codes(results: &[ScramResult]) -> Vec<(&str, ErrorCode)> {
        results
            .iter()
            .map(|r| (r.user.as_str(), r.error_code))
            .collect()
    }

    #[test]
    fn kafkas_refusals() {
        let mut current = ScramCredentials::new();
        let (results, changes) = decide_alter(
            &current,
            &[del("gone", 1), del("twice", 1), del("twice", 1)],
            &[
                up("alice", 1, 4096),
                up("", 1, 4096),
                up("few", 2, 4095),
                up("many", 2, 16385),
                up("mech", 3, 8192),
                up("both", 1, 8192),
                up("both", 2, 8192),
            ],
        );
        assert_eq!(
            codes(&results),
            [
                ("alice", ErrorCode::None),
                ("", ErrorCode::UnacceptableCredential),
                ("both", ErrorCode::DuplicateResource),
                ("few", ErrorCode::UnacceptableCredential),
                ("gone", ErrorCode::ResourceNotFound),
                ("many", ErrorCode::UnacceptableCredential),
                ("mech", ErrorCode::UnsupportedSaslMechanism),
                // As Kafka: the first refusal of a user sticks (its second deletion is skipped).
                ("twice", ErrorCode::ResourceNotFound),
            ]
        );
        apply(&mut current, &changes);
        assert_eq!(current.len(), 1);
        let (results, changes) = decide_alter(&current, &[del("alice", 1), del("alice", 1)], &[]);
        assert_eq!(codes(&results), [("alice", ErrorCode::DuplicateResource)]);
        assert!(changes.is_empty());
        let (results, changes) = decide_alter(&current, &[del("alice", 1)], &[]);
        assert_eq!(codes(&results), [("alice", ErrorCode::None)]);
        apply(&mut current, &changes);
        assert!(current.is_empty());
    }

    #[test]
    fn describe_lists_every_user_or_those_asked() {
        let mut current = ScramCredentials::new();
        let (_, changes) = decide_alter(&current, &[], &[up("a", 1, 4096), up("b", 2, 5000)]);
        apply(&mut current, &changes);
        let all = describe(&current, None);
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].credentials, [(2, 5000)]);
        let asked = ["a".to_string(), "a".to_string(), "z".to_string()];
        let some = describe(&current, Some(&asked));
        assert_eq!(some[0].error_code, ErrorCode::DuplicateResource);
        assert_eq!(some[1].error_code, ErrorCode::ResourceNotFound);
    }
}
