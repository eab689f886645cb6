//! EndTxn (26): commit or abort the producer's transaction. Answered once the decision is
//! durable and its markers are written (see `crate::txn`). PRODUCER_FENCED from v2
//! (INVALID_PRODUCER_EPOCH before). v5 (epoch bump per transaction, KIP-890 part 2) is not
//! advertised.

use rill_protocol::kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::add_offsets_to_txn::done_code;
use super::Broker;
use crate::txn::ops::{for_client, TxnOp, TxnProducer};
use crate::txn::{ProducerEpoch, ProducerId};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::EndTxnRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer EndTxn.
pub async fn handle<B: Broker>(broker: &B, version: i16, req: &EndTxnRequest) -> EndTxnResponse {
    let op = TxnOp::End {
        producer: TxnProducer {
            id: ProducerId(req.producer_id.0),
            epoch: ProducerEpoch(req.producer_epoch),
        },
        commit: req.committed,
    };
    let code = done_code(broker.txn(&req.transactional_id.0, op).await);
    EndTxnResponse::default().with_error_code(for_client(code, version, 2, 4).code())
}
