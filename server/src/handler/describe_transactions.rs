//! DescribeTransactions (65): each transactional id's state, producer, timeout, start and
//! partitions (its groups' offsets partitions included), from its coordinator.

use futures::future::join_all;
use rill_protocol::kafka_protocol::messages::describe_transactions_response::{
    TopicData, TransactionState,
};
use rill_protocol::kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId,
};

use super::{str_bytes, topic_name, Broker};
use crate::txn::ops::{TxnDescription, TxnOp, TxnReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    _cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::DescribeTransactionsRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, &request).await)
}

/// Answer DescribeTransactions.
pub async fn handle<B: Broker>(
    broker: &B,
    req: &DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = join_all(req.transactional_ids.iter().map(|id| async move {
        let state = TransactionState::default()
            .with_transactional_id(id.clone())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .with_transaction_start_time_ms(-1);
        match broker.txn(&id.0, TxnOp::Describe).await {
            TxnReply::Describe(Ok(d)) => described(state, d),
            TxnReply::Describe(Err(code)) | TxnReply::Unavailable(code) => {
                state.with_error_code(code.code())
            }
            other => unreachable!("Describe answered with {other:?}"),
        }
    }));
    DescribeTransactionsResponse::default().with_transaction_states(states.await)
}

fn described(state: TransactionState, d: TxnDescription) -> TransactionState {
    let mut topics: Vec<TopicData> = Vec::new();
    for tp in d.partitions {
        let index = tp.partition.0;
        match topics.last_mut() {
            Some(last) if last.topic.0.as_str() == tp.topic => last.partitions.push(index),
            _ => topics.push(
                TopicData::default()
                    .with_topic(topic_name(&tp.topic))
                    .with_partitions(vec![index]),
            ),
        }
    }
    state
        .with_transaction_state(str_bytes(&d.state))
        .with_transaction_timeout_ms(d.timeout_ms)
        .with_transaction_start_time_ms(d.start_ms.0)
        .with_producer_id(ProducerId(d.producer_id.0))
        .with_producer_epoch(d.producer_epoch.0)
        .with_topics(topics)
}
