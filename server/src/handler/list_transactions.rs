//! ListTransactions (66): the transactional ids of every coordinator shard, filtered by state,
//! producer id and (v1+) how long the transaction has been running. Unknown state names are
//! echoed back as Kafka does. v2's id pattern is not advertised.

use rill_protocol::kafka_protocol::messages::list_transactions_response::TransactionState;
use rill_protocol::kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};

use super::{str_bytes, Broker};
use crate::txn::ops::TxnListFilter;
use crate::txn::state::TxnState;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::ListTransactionsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer ListTransactions.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &ListTransactionsRequest,
) -> ListTransactionsResponse {
    let known = |s: &str| TxnState::ALL.iter().any(|t| t.name() == s);
    let unknown: Vec<_> = req
        .state_filters
        .iter()
        .filter(|s| !known(s))
        .cloned()
        .collect();
    let filter = TxnListFilter {
        states: req.state_filters.iter().map(|s| s.to_string()).collect(),
        producer_ids: req
            .producer_id_filters
            .iter()
            .map(|p| crate::txn::ProducerId(p.0))
            .collect(),
        min_duration_ms: if version >= 1 {
            rill_types::DurationMs(req.duration_filter)
        } else {
            rill_types::DurationMs(-1)
        },
    };
    let states = broker
        .list_txns(filter)
        .await
        .into_iter()
        .map(|t| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(&t.transactional_id)))
                .with_producer_id(ProducerId(t.producer_id.0))
                .with_transaction_state(str_bytes(&t.state))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown)
        .with_transaction_states(states)
}
