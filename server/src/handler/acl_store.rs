//! Where ACL bindings live and how CreateAcls and DeleteAcls change them: in a cluster through
//! the controller into the metadata log (AccessControlEntry records, so every broker applies
//! the same bindings, across restarts), on a single node in its registry's fsynced document
//! (`.rill-meta/topics.json`). The decisions are `rill_metadata::acl`'s either way.

use std::sync::Arc;

use rill_metadata::acl::{AclBinding, AclChange, AclFilter, Acls};
use rill_metadata::request::{ControllerRequest, ControllerResponse};
use rill_protocol::ErrorCode;

use super::Broker;

/// Why a change was not made: Kafka's error code and message.
pub type Failure = (ErrorCode, String);

/// The bindings requests are authorized against now: the applied metadata image's in a
/// cluster, the registry's on a single node.
pub fn current<B: Broker>(broker: &B) -> Arc<Acls> {
    match broker.cluster() {
        Some(cluster) => cluster.image().acls.clone(),
        None => broker.topics().acls(),
    }
}

/// Adds `bindings` (validated; those that exist are left as they are). Once this returns
/// `Ok`, this broker authorizes with them.
pub async fn create<B: Broker>(broker: &B, bindings: Vec<AclBinding>) -> Result<(), Failure> {
    if bindings.is_empty() {
        return Ok(());
    }
    match broker.cluster() {
        Some(_) => through_controller(broker, ControllerRequest::CreateAcls { bindings })
            .await
            .map(drop),
        None => {
            let registry = broker.topics().clone();
            broker
                .blocking(move || {
                    registry.alter_acls(|acls| {
                        let new = rill_metadata::acl::decide_create(acls, &bindings);
                        ((), new.into_iter().map(AclChange::Add).collect())
                    })
                })
                .await
                .map_err(|e| (e.kafka_error_code(), e.to_string()))
        }
    }
}

/// Removes every binding a filter matches; per filter, the bindings it matched. Once this
/// returns `Ok`, this broker no longer authorizes with them.
pub async fn delete<B: Broker>(
    broker: &B,
    filters: Vec<AclFilter>,
) -> Result<Vec<Vec<AclBinding>>, Failure> {
    if filters.is_empty() {
        return Ok(Vec::new());
    }
    match broker.cluster() {
        Some(_) => through_controller(broker, ControllerRequest::DeleteAcls { filters }).await,
        None => {
            let registry = broker.topics().clone();
            broker
                .blocking(move || {
                    registry.alter_acls(|acls| {
                        let (matched, gone) = rill_metadata::acl::decide_delete(acls, &filters);
                        (matched, gone.into_iter().map(AclChange::Remove).collect())
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
) -> Result<Vec<Vec<AclBinding>>, Failure> {
    super::controller_change::through_controller(broker, request, "ACL", |answer| match answer {
        ControllerResponse::Acls { matched, index } => Ok((matched, index)),
        other => Err(other),
    })
    .await
}
