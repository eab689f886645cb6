//! AddPartitionsToTxn (24): a transactional producer names the partitions it is about to write.
//!
//! - v0-3 (clients): one transaction; every partition gets the same answer, except that
//!   unknown partitions fail the request and the others are OPERATION_NOT_ATTEMPTED.
//! - v4-5 (brokers, KIP-890): a batch of transactions, each either added to or, with
//!   `verify_only`, only checked (per partition: NONE or TRANSACTION_ABORTABLE, at v4 too,
//!   as Kafka 4 answers; the clients' v0-3 get INVALID_TXN_STATE instead). A cluster's
//!   partition leaders send these (v5).
//!
//! PRODUCER_FENCED is answered from v2 on (INVALID_PRODUCER_EPOCH before).

use futures::future::join_all;
use rill_protocol::kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use rill_protocol::kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use rill_protocol::kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
};

use rill_types::{PartitionIndex, TopicPartition};

use super::{topic_name, Broker};
use crate::txn::ops::{for_client, TxnOp, TxnProducer, TxnReply};
use crate::txn::{ProducerEpoch, ProducerId};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::AddPartitionsToTxnRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer AddPartitionsToTxn.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if version >= 4 {
        let results = join_all(
            req.transactions
                .iter()
                .map(|t| one_of_batch(broker, version, t)),
        );
        return AddPartitionsToTxnResponse::default().with_results_by_transaction(results.await);
    }
    let producer = TxnProducer {
        id: ProducerId(req.v3_and_below_producer_id.0),
        epoch: ProducerEpoch(req.v3_and_below_producer_epoch),
    };
    let id = req.v3_and_below_transactional_id.0.as_str();
    let topics = &req.v3_and_below_topics;
    let results = add(broker, version, id, producer, topics, false).await;
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results)
}

async fn one_of_batch<B: Broker>(
    broker: &B,
    version: i16,
    t: &AddPartitionsToTxnTransaction,
) -> AddPartitionsToTxnResult {
    let producer = TxnProducer {
        id: ProducerId(t.producer_id.0),
        epoch: ProducerEpoch(t.producer_epoch),
    };
    let id = t.transactional_id.0.as_str();
    let results = add(broker, version, id, producer, &t.topics, t.verify_only).await;
    AddPartitionsToTxnResult::default()
        .with_transactional_id(t.transactional_id.clone())
        .with_topic_results(results)
}

/// One transaction's partitions through its coordinator, answered per topic and partition.
async fn add<B: Broker>(
    broker: &B,
    version: i16,
    id: &str,
    producer: TxnProducer,
    topics: &[AddPartitionsToTxnTopic],
    verify_only: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let partitions: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.0.to_string(), PartitionIndex(*p)))
        })
        .collect();
    let n = partitions.len();
    let op = TxnOp::AddPartitions {
        producer,
        partitions: partitions.clone(),
        verify_only,
    };
    let codes = match broker.txn(id, op).await {
        TxnReply::Partitions(codes) if codes.len() == n => codes,
        TxnReply::Unavailable(code) => vec![code; n],
        other => unreachable!("AddPartitions answered with {other:?}"),
    };
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (tp, code) in partitions.into_iter().zip(codes) {
        let code = for_client(code, version, 2, 4);
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(tp.partition.0)
            .with_partition_error_code(code.code());
        match out.last_mut() {
            Some(last) if last.name.0.as_str() == tp.topic => {
                last.results_by_partition.push(result)
            }
            _ => out.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic_name(&tp.topic))
                    .with_results_by_partition(vec![result]),
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::TransactionalId;
    use rill_protocol::ErrorCode;

    #[test]
    fn unknown_transactional_ids_and_partitions_are_refused() {
        let broker = FakeBroker::new();
        broker.topics().create("t", 1, Default::default()).unwrap();
        let topic = AddPartitionsToTxnTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(vec![0, 3]);
        let req = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(TransactionalId(super::super::str_bytes("tx")))
            .with_v3_and_below_topics(vec![topic]);
        let r = block_on(handle(&broker, 3, &req));
        let codes: Vec<i16> = r.results_by_topic_v3_and_below[0]
            .results_by_partition
            .iter()
            .map(|p| p.partition_error_code)
            .collect();
        assert_eq!(
            codes,
            vec![
                ErrorCode::OperationNotAttempted.code(),
                ErrorCode::UnknownTopicOrPartition.code()
            ]
        );
    }
}
