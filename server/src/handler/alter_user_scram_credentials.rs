//! AlterUserScramCredentials (51, KIP-554): create, replace or delete users' SCRAM credentials.
//!
//! The client sends a salt and the salted password; this broker derives the stored key and the
//! server key from them (`crate::security::scram::credential`) at once, so only those (KRaft's
//! UserScramCredentialRecord: salt, stored key, server key, iterations) are decided on and
//! stored: in a cluster through the controller into the metadata log (every broker then
//! authenticates the user), on a single node in its registry's fsynced document. Kafka's
//! validation and error codes (`rill_metadata::scram::decide_alter`); a salt or salted
//! password over [`rill_types::limits::SCRAM_SECRET_BYTES_MAX`] bytes is UNACCEPTABLE_CREDENTIAL.

use rill_metadata::request::{ControllerRequest, ControllerResponse};
use rill_metadata::scram::{ScramDeletion, ScramMechanism, ScramResult, ScramUpsertion};
use rill_protocol::kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use rill_protocol::kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use rill_protocol::ErrorCode;
use rill_types::limits::SCRAM_SECRET_BYTES_MAX;

use super::{message_bytes, str_bytes, Answer, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: AlterUserScramCredentialsRequest,
) -> Answer {
    Answer::body(handle(broker, &request).await)
}

/// Answer AlterUserScramCredentials.
pub async fn handle<B: Broker>(
    broker: &B,
    request: &AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut refused = Vec::new();
    let deletions: Vec<ScramDeletion> = request
        .deletions
        .iter()
        .map(|d| ScramDeletion {
            name: d.name.to_string(),
            mechanism: d.mechanism,
        })
        .collect();
    let mut upsertions = Vec::new();
    for u in &request.upsertions {
        let name = u.name.to_string();
        if u.salt.len() > SCRAM_SECRET_BYTES_MAX || u.salted_password.len() > SCRAM_SECRET_BYTES_MAX
        {
            refused.push(ScramResult {
                user: name,
                error_code: ErrorCode::UnacceptableCredential,
                message: Some(format!(
                    "The salt and the salted password must be at most {SCRAM_SECRET_BYTES_MAX} \
                     bytes"
                )),
            });
            continue;
        }
        let credential = ScramMechanism::from_type(u.mechanism).map(|m| {
            crate::security::scram::credential(m, &u.salt, &u.salted_password, u.iterations)
        });
        upsertions.push(ScramUpsertion {
            name,
            mechanism: u.mechanism,
            credential,
        });
    }
    let mut results = decide(broker, deletions, upsertions).await;
    results.extend(refused);
    let results = results
        .into_iter()
        .map(|r| {
            if r.error_code == ErrorCode::None {
                tracing::info!(user = %r.user, "SCRAM credentials altered");
            }
            AlterUserScramCredentialsResult::default()
                .with_user(str_bytes(&r.user))
                .with_error_code(r.error_code.code())
                .with_error_message(r.message.as_deref().map(message_bytes))
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

/// The decision, applied: by the controller in a cluster, by the registry on a single node.
async fn decide<B: Broker>(
    broker: &B,
    deletions: Vec<ScramDeletion>,
    upsertions: Vec<ScramUpsertion>,
) -> Vec<ScramResult> {
    let users: Vec<String> = deletions
        .iter()
        .map(|d| d.name.clone())
        .chain(upsertions.iter().map(|u| u.name.clone()))
        .collect();
    let every = |code: ErrorCode, message: String| -> Vec<ScramResult> {
        let mut seen = std::collections::BTreeSet::new();
        users
            .iter()
            .filter(|u| seen.insert(u.to_string()))
            .map(|u| ScramResult {
                user: u.clone(),
                error_code: code,
                message: Some(message.clone()),
            })
            .collect()
    };
    if users.is_empty() {
        return Vec::new();
    }
    match broker.cluster() {
        Some(cluster) => {
            let request = ControllerRequest::AlterUserScramCredentials {
                deletions,
                upsertions,
            };
            match cluster.request(request, |d| broker.sleep(d)).await {
                ControllerResponse::Scram { results, index } => {
                    if index.0 > 0 && !cluster.wait_applied(index, |d| broker.sleep(d)).await {
                        tracing::warn!(index = index.0, "SCRAM changes not applied here yet");
                    }
                    results
                }
                ControllerResponse::Error {
                    error_code,
                    message,
                } => every(error_code, message),
                other => every(
                    ErrorCode::UnknownServerError,
                    format!("unexpected controller answer {other:?}"),
                ),
            }
        }
        None => {
            let registry = broker.topics().clone();
            let decided = broker
                .blocking(move || {
                    registry.alter_scram(|current| {
                        rill_metadata::scram::decide_alter(current, &deletions, &upsertions)
                    })
                })
                .await;
            match decided {
                Ok(results) => results,
                Err(e) => every(e.kafka_error_code(), e.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use rill_protocol::kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use rill_protocol::kafka_protocol::messages::DescribeUserScramCredentialsRequest;

    fn upsert(
        name: &str,
        mechanism: i8,
        iterations: i32,
        salt_len: usize,
    ) -> ScramCredentialUpsertion {
        ScramCredentialUpsertion::default()
            .with_name(str_bytes(name))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(vec![7u8; salt_len].into())
            .with_salted_password(vec![9u8; 32].into())
    }

    #[test]
    fn a_single_node_stores_describes_and_deletes_credentials() {
        let broker = FakeBroker::new();
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            upsert("alice", 1, 8192, 16),
            upsert("bob", 2, 100, 16),
            upsert("carol", 1, 4096, SCRAM_SECRET_BYTES_MAX + 1),
        ]);
        let r = block_on(handle(&broker, &request));
        let codes: Vec<(String, i16)> = r
            .results
            .iter()
            .map(|r| (r.user.to_string(), r.error_code))
            .collect();
        assert_eq!(
            codes,
            [
                ("alice".to_string(), 0),
                ("bob".to_string(), ErrorCode::UnacceptableCredential.code()),
                (
                    "carol".to_string(),
                    ErrorCode::UnacceptableCredential.code()
                ),
            ]
        );
        let cred = crate::handler::sasl_authenticate::scram_credential(
            &broker,
            "alice",
            ScramMechanism::Sha256,
        )
        .unwrap();
        assert_eq!(cred.iterations, 8192);
        assert_eq!(cred.stored_key.len(), 32);
        let described = super::super::describe_user_scram_credentials::handle(
            &broker,
            &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                UserName::default().with_name(str_bytes("alice")),
                UserName::default().with_name(str_bytes("bob")),
            ])),
        );
        assert_eq!(described.results[0].credential_infos.len(), 1);
        assert_eq!(described.results[0].credential_infos[0].iterations, 8192);
        assert_eq!(
            described.results[1].error_code,
            ErrorCode::ResourceNotFound.code()
        );
        let delete = AlterUserScramCredentialsRequest::default().with_deletions(vec![
            ScramCredentialDeletion::default()
                .with_name(str_bytes("alice"))
                .with_mechanism(1),
        ]);
        assert_eq!(block_on(handle(&broker, &delete)).results[0].error_code, 0);
        assert_eq!(
            block_on(handle(&broker, &delete)).results[0].error_code,
            ErrorCode::ResourceNotFound.code()
        );
    }
}
