//! AddOffsetsToTxn (25): a transactional producer is about to commit a group's offsets in its
//! transaction (`send_offsets_to_transaction`); the group's offsets end with the transaction.
//! PRODUCER_FENCED from v2 (INVALID_PRODUCER_EPOCH before).

use rill_protocol::kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};
use rill_protocol::ErrorCode;

use super::Broker;
use crate::txn::ops::{for_client, TxnOp, TxnProducer, TxnReply};
use crate::txn::{ProducerEpoch, ProducerId};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::AddOffsetsToTxnRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer AddOffsetsToTxn.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    req: &AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let op = TxnOp::AddOffsets {
        producer: TxnProducer {
            id: ProducerId(req.producer_id.0),
            epoch: ProducerEpoch(req.producer_epoch),
        },
        group: req.group_id.0.to_string(),
    };
    let code = match broker.txn(&req.transactional_id.0, op).await {
        TxnReply::Done(code) | TxnReply::Unavailable(code) => code,
        other => unreachable!("AddOffsets answered with {other:?}"),
    };
    AddOffsetsToTxnResponse::default().with_error_code(for_client(code, version, 2, 4).code())
}

/// The error of an EndTxn or AddOffsetsToTxn reply.
pub fn done_code(reply: TxnReply) -> ErrorCode {
    match reply {
        TxnReply::Done(code) | TxnReply::Unavailable(code) => code,
        other => unreachable!("answered with {other:?}"),
    }
}
