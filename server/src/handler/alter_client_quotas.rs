//! AlterClientQuotas (49, KIP-546): sets and removes quotas of user, client-id and IP entities,
//! as Kafka's `ClientQuotaControlManager` decides (`rill_metadata::client_quota::decide_alter`;
//! its refusals are INVALID_REQUEST with Kafka's messages), one result per distinct entity.
//! `validate_only` decides and answers without changing anything. ALTER_CONFIGS on the cluster
//! is checked before (`authz_guard`).
//!
//! Stored in the metadata log in a cluster, in `.rill-meta/topics.json` on a single node
//! (`quota_store`); the broker that took the change answers once it enforces it.

use rill_metadata::client_quota::{Alteration, QuotaValue, RawEntity};
use rill_protocol::kafka_protocol::messages::alter_client_quotas_response::{
    EntityData, EntryData,
};
use rill_protocol::kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse,
};
use rill_protocol::ErrorCode;

use super::{message_bytes, str_bytes, Answer, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: AlterClientQuotasRequest,
) -> Answer {
    Answer::body(handle(broker, request).await)
}

/// The request's entries as the decision reads them.
pub fn alterations(request: &AlterClientQuotasRequest) -> Vec<Alteration> {
    request
        .entries
        .iter()
        .map(|entry| Alteration {
            entity: raw_entity(
                entry
                    .entity
                    .iter()
                    .map(|e| (&e.entity_type, &e.entity_name)),
            ),
            ops: entry
                .ops
                .iter()
                .map(|op| {
                    (
                        op.key.to_string(),
                        (!op.remove).then_some(QuotaValue(op.value)),
                    )
                })
                .collect(),
        })
        .collect()
}

fn raw_entity<'a>(
    parts: impl Iterator<
        Item = (
            &'a rill_protocol::kafka_protocol::protocol::StrBytes,
            &'a Option<rill_protocol::kafka_protocol::protocol::StrBytes>,
        ),
    >,
) -> RawEntity {
    parts
        .map(|(kind, name)| (kind.to_string(), name.as_ref().map(|n| n.to_string())))
        .collect()
}

/// Decide, store (unless validating only) and answer.
pub async fn handle<B: Broker>(
    broker: &B,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let alterations = alterations(&request);
    let results = match super::quota_store::alter(broker, alterations, request.validate_only).await
    {
        Ok(results) => results,
        Err((code, message)) => return refuse_all(&request, code, &message),
    };
    let entries = results
        .into_iter()
        .map(|result| {
            EntryData::default()
                .with_entity(entity_data(&result.entity))
                .with_error_code(result.error_code.code())
                .with_error_message(result.message.as_deref().map(message_bytes))
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// Every entry of the request answered `code` (Kafka's `getErrorResponse`: the entities as
/// sent, the code's message).
pub fn refuse_all(
    request: &AlterClientQuotasRequest,
    code: ErrorCode,
    message: &str,
) -> AlterClientQuotasResponse {
    let entries = request
        .entries
        .iter()
        .map(|entry| {
            let entity = entry
                .entity
                .iter()
                .map(|e| {
                    EntityData::default()
                        .with_entity_type(e.entity_type.clone())
                        .with_entity_name(e.entity_name.clone())
                })
                .collect();
            EntryData::default()
                .with_entity(entity)
                .with_error_code(code.code())
                .with_error_message(Some(message_bytes(message)))
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// An entity's components in Kafka's hash-map order: client-id, user, ip, then others.
fn entity_data(entity: &RawEntity) -> Vec<EntityData> {
    rill_metadata::client_quota::in_kafka_order(entity)
        .into_iter()
        .map(|(kind, name)| {
            EntityData::default()
                .with_entity_type(str_bytes(kind))
                .with_entity_name(name.as_deref().map(str_bytes))
        })
        .collect()
}
