//! Produce from transactional producers (KIP-890 part 1): a producer's first append to a
//! partition in a transaction comes back from the partition as
//! [`PartitionReply::NeedsTxnVerification`]; the producer's coordinator is asked (the
//! verify-only AddPartitionsToTxn) whether the partition is in the transaction, and the append
//! is sent again with the partition's guard, or refused with Kafka's error:
//!
//! | coordinator says                          | producer gets (as Kafka's partition leader) |
//! |-------------------------------------------|---------------------------------------------|
//! | in the transaction                        | the append's own answer                     |
//! | not in it (TRANSACTION_ABORTABLE)         | INVALID_TXN_STATE, or TRANSACTION_ABORTABLE from Produce v11 |
//! | PRODUCER_FENCED                           | INVALID_PRODUCER_EPOCH                      |
//! | busy, unreachable (CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, ...) | NOT_ENOUGH_REPLICAS (retried) |
//! | no transactional id on the request        | INVALID_TXN_STATE                           |
//!
//! Order: a connection's pipelined Produce requests run at once, and their verifications end
//! in any order; Kafka serves them one at a time, so a producer's appends land in request
//! order. The verified appends are therefore sent again only once every earlier
//! transactional Produce request of the connection is answered (its [`Turn`]); the partition
//! meanwhile verifies any later append of the producer too (`partition/txn_guard.rs`), so
//! none overtakes them. Was: a later request's append landed first and was refused as out of
//! order, then the earlier one's as INVALID_TXN_STATE (franz-go's TestTxnEtl). An append not
//! sent again gives its guard back.

use std::rc::Rc;
use std::time::Duration;

use futures::future::join_all;
use rill_protocol::ErrorCode;
use rill_types::{PartitionIndex, TopicPartition, TopicPartitionRef};

use super::Broker;
use crate::partition::ops::{Acks, PartitionOp, PartitionReply};
use crate::request_order::Turn;
use crate::txn::ops::{TxnOp, TxnProducer, TxnReply};

/// Per partition of a Produce request: topic (shared by the topic's partitions), index, answer.
pub type Results = Vec<(Rc<str>, i32, PartitionReply)>;

/// Verifies the partitions that asked for it, appends again those in the transaction (once
/// `turn`'s earlier requests are answered), and turns the others into Kafka's errors.
pub async fn verify_first_appends<B: Broker>(
    broker: &B,
    version: i16,
    transactional_id: Option<&str>,
    (acks, ack_timeout): (Acks, Duration),
    turn: Option<&Turn>,
    mut results: Results,
) -> Results {
    let asking: Vec<usize> = (0..results.len())
        .filter(|&i| matches!(results[i].2, PartitionReply::NeedsTxnVerification { .. }))
        .collect();
    let Some(&first) = asking.first() else {
        return results;
    };
    let PartitionReply::NeedsTxnVerification { producer, .. } = results[first].2 else {
        unreachable!("filtered above")
    };
    let codes = match transactional_id {
        Some(id) if !id.is_empty() => {
            let partitions = asking
                .iter()
                .map(|&i| TopicPartition::new(results[i].0.as_ref(), PartitionIndex(results[i].1)))
                .collect::<Vec<_>>();
            let producer = TxnProducer {
                id: producer.0,
                epoch: producer.1,
            };
            verify(broker, id, producer, partitions).await
        }
        _ => vec![ErrorCode::InvalidTxnState; asking.len()],
    };
    if let Some(turn) = turn {
        turn.earlier_done().await;
    }
    let retries = asking.iter().zip(codes).map(|(&i, code)| {
        let (topic, index) = (results[i].0.clone(), results[i].1);
        let reply = std::mem::replace(&mut results[i].2, PartitionReply::Waited);
        let same_producer = matches!(&reply, PartitionReply::NeedsTxnVerification { producer: p, .. } if *p == producer);
        async move {
            let PartitionReply::NeedsTxnVerification {
                guard,
                batch,
                producer: (holder, _),
            } = reply
            else {
                unreachable!("filtered above")
            };
            let reply = match (code, same_producer) {
                (ErrorCode::None, true) => {
                    let op = PartitionOp::Append {
                        batch,
                        acks,
                        ack_timeout,
                        txn_guard: Some(guard),
                    };
                    broker.partition(TopicPartitionRef::new(&topic, PartitionIndex(index)), op).await
                }
                (code, same) => {
                    let op = PartitionOp::ReturnTxnGuard {
                        producer: holder,
                        guard,
                    };
                    // Nothing to do if it fails: the partition moved, its guards with it.
                    let _ = broker.partition(TopicPartitionRef::new(&topic, PartitionIndex(index)), op).await;
                    match same {
                        true => PartitionReply::Error(produce_error(version, code)),
                        false => PartitionReply::Error(ErrorCode::InvalidProducerIdMapping),
                    }
                }
            };
            (i, reply)
        }
    });
    for (i, reply) in join_all(retries).await {
        results[i].2 = reply;
    }
    results
}

/// The coordinator's word on each partition (one request for all of them).
async fn verify<B: Broker>(
    broker: &B,
    transactional_id: &str,
    producer: TxnProducer,
    partitions: Vec<TopicPartition>,
) -> Vec<ErrorCode> {
    let n = partitions.len();
    let op = TxnOp::AddPartitions {
        producer,
        partitions,
        verify_only: true,
    };
    match broker.txn(transactional_id, op).await {
        TxnReply::Partitions(codes) if codes.len() == n => codes,
        TxnReply::Unavailable(code) => vec![code; n],
        other => {
            tracing::error!(?other, "verification answered unexpectedly");
            vec![ErrorCode::CoordinatorNotAvailable; n]
        }
    }
}

/// What a producer is told when verification fails (Kafka's ReplicaManager mapping).
fn produce_error(version: i16, code: ErrorCode) -> ErrorCode {
    match code {
        ErrorCode::TransactionAbortable if version < 11 => ErrorCode::InvalidTxnState,
        ErrorCode::ProducerFenced => ErrorCode::InvalidProducerEpoch,
        ErrorCode::ConcurrentTransactions
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::NotCoordinator
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::NetworkException => ErrorCode::NotEnoughReplicas,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_errors_map_as_kafka_maps_them() {
        assert_eq!(
            produce_error(9, ErrorCode::TransactionAbortable),
            ErrorCode::InvalidTxnState
        );
        assert_eq!(
            produce_error(11, ErrorCode::TransactionAbortable),
            ErrorCode::TransactionAbortable
        );
        assert_eq!(
            produce_error(9, ErrorCode::ProducerFenced),
            ErrorCode::InvalidProducerEpoch
        );
        assert_eq!(
            produce_error(9, ErrorCode::ConcurrentTransactions),
            ErrorCode::NotEnoughReplicas
        );
        assert_eq!(
            produce_error(9, ErrorCode::InvalidProducerIdMapping),
            ErrorCode::InvalidProducerIdMapping
        );
    }
}
