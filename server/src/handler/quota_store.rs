//! Where client quotas live and how AlterClientQuotas changes them: in a cluster through the
//! controller into the metadata log (ClientQuota records, so every broker enforces the same
//! quotas, across restarts), on a single node in its registry's fsynced document
//! (`.rill-meta/topics.json`). The decisions are `rill_metadata::client_quota`'s either way.

use std::sync::Arc;

use rill_metadata::client_quota::{AlterResults, Alteration, ClientQuotas};
use rill_metadata::request::{ControllerRequest, ControllerResponse};

use super::Broker;

/// Why the request as a whole was not served: Kafka's error code and message.
pub use super::controller_change::Failure;

/// The quotas in force now: the applied metadata image's in a cluster, the registry's on a
/// single node.
pub fn current<B: Broker>(broker: &B) -> Arc<ClientQuotas> {
    match broker.cluster() {
        Some(cluster) => cluster.image().client_quotas.clone(),
        None => broker.topics().client_quotas(),
    }
}

/// Decides `alterations` and, unless `validate_only`, makes the changes. Once this returns
/// `Ok`, this broker enforces them.
pub async fn alter<B: Broker>(
    broker: &B,
    alterations: Vec<Alteration>,
    validate_only: bool,
) -> Result<AlterResults, Failure> {
    match broker.cluster() {
        Some(_) => {
            let request = ControllerRequest::AlterClientQuotas {
                alterations,
                validate_only,
            };
            through_controller(broker, request).await
        }
        None if validate_only => {
            let current = broker.topics().client_quotas();
            Ok(rill_metadata::client_quota::decide_alter(&current, &alterations).0)
        }
        None => {
            let registry = broker.topics().clone();
            broker
                .blocking(move || {
                    registry.alter_client_quotas(|quotas| {
                        rill_metadata::client_quota::decide_alter(quotas, &alterations)
                    })
                })
                .await
                .map_err(|e| (e.kafka_error_code(), e.to_string()))
        }
    }
}

/// Asks the controller and waits until this broker applied the change.
async fn through_controller<B: Broker>(
    broker: &B,
    request: ControllerRequest,
) -> Result<AlterResults, Failure> {
    super::controller_change::through_controller(broker, request, "quota", |answer| match answer {
        ControllerResponse::ClientQuotas { results, index } => Ok((results, index)),
        other => Err(other),
    })
    .await
}
