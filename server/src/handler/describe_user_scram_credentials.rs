//! DescribeUserScramCredentials (50, KIP-554): each user's SCRAM mechanisms and iteration
//! counts (never a salt or key), as Kafka's `ScramImage.describe` answers
//! (`rill_metadata::scram::describe`): every user when none is named, DUPLICATE_RESOURCE for a
//! user named twice, RESOURCE_NOT_FOUND for one without credentials.

use rill_protocol::kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use rill_protocol::kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::{message_bytes, str_bytes, Answer, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: DescribeUserScramCredentialsRequest,
) -> Answer {
    Answer::body(handle(broker, &request))
}

/// Answer DescribeUserScramCredentials from the applied metadata (a cluster's image, a single
/// node's registry).
pub fn handle<B: Broker>(
    broker: &B,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let users: Option<Vec<String>> = request
        .users
        .as_ref()
        .map(|users| users.iter().map(|u| u.name.to_string()).collect());
    let users = users.as_deref();
    let described = match broker.cluster() {
        Some(cluster) => rill_metadata::scram::describe(&cluster.image().scram, users),
        None => broker
            .topics()
            .with_scram(|all| rill_metadata::scram::describe(all, users)),
    };
    let results = described
        .into_iter()
        .map(|d| {
            DescribeUserScramCredentialsResult::default()
                .with_user(str_bytes(&d.user))
                .with_error_code(d.error_code.code())
                // Kafka's generated default for the nullable message is "", not null.
                .with_error_message(Some(message_bytes(d.message.as_deref().unwrap_or(""))))
                .with_credential_infos(
                    d.credentials
                        .into_iter()
                        .map(|(mechanism, iterations)| {
                            CredentialInfo::default()
                                .with_mechanism(mechanism)
                                .with_iterations(iterations)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
