//! DescribeClientQuotas (48, KIP-546): the quota entities a filter matches, with their quotas,
//! as Kafka's `ClientQuotasImage.describe` answers (`rill_metadata::client_quota::describe`):
//! a filter Kafka refuses is the whole request's INVALID_REQUEST (UNSUPPORTED_VERSION for an
//! unknown entity type) with its message and no entries. DESCRIBE_CONFIGS on the cluster is
//! checked before (`authz_guard`).

use rill_metadata::client_quota::FilterComponent;
use rill_protocol::kafka_protocol::messages::describe_client_quotas_response::{
    EntityData, EntryData, ValueData,
};
use rill_protocol::kafka_protocol::messages::{
    DescribeClientQuotasRequest, DescribeClientQuotasResponse,
};

use super::{message_bytes, str_bytes, Answer, Broker};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: DescribeClientQuotasRequest,
) -> Answer {
    Answer::body(handle(broker, &request))
}

/// Answer DescribeClientQuotas from the quotas in force.
pub fn handle<B: Broker>(
    broker: &B,
    request: &DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let components: Vec<FilterComponent> = request
        .components
        .iter()
        .map(|c| FilterComponent {
            entity_type: c.entity_type.to_string(),
            match_type: c.match_type,
            name: c._match.as_ref().map(|m| m.to_string()),
        })
        .collect();
    let quotas = super::quota_store::current(broker);
    match rill_metadata::client_quota::describe(&quotas, &components, request.strict) {
        Ok(found) => {
            let entries = found
                .into_iter()
                .map(|(entity, values)| {
                    let entity = entity
                        .0
                        .iter()
                        .map(|(kind, name)| {
                            EntityData::default()
                                .with_entity_type(str_bytes(kind.name()))
                                .with_entity_name(name.as_deref().map(str_bytes))
                        })
                        .collect();
                    let values = values
                        .iter()
                        .map(|(key, value)| {
                            ValueData::default()
                                .with_key(str_bytes(key))
                                .with_value(value.0)
                        })
                        .collect();
                    EntryData::default().with_entity(entity).with_values(values)
                })
                .collect();
            DescribeClientQuotasResponse::default().with_entries(Some(entries))
        }
        Err((code, message)) => DescribeClientQuotasResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(message_bytes(&message)))
            .with_entries(None),
    }
}
