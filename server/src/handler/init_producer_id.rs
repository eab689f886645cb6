//! InitProducerId (22): producer ids for idempotent and transactional producers.
//!
//! Without a `transactional_id` (idempotent producers), from the durable counter:
//! - `producer_id = -1`: a new id, epoch 0.
//! - a known id and epoch (v3+, KIP-360 epoch bump after a sequence error): same id, epoch + 1;
//!   at the epoch's maximum a fresh id instead (Kafka does the same).
//!
//! With one, from the id's transaction coordinator (`crate::txn`): the epoch is bumped, which
//! fences older producers of the id and aborts what they left open. PRODUCER_FENCED from v4
//! (INVALID_PRODUCER_EPOCH before).

use rill_protocol::kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId,
};
use rill_protocol::ErrorCode;

use super::Broker;
use crate::txn::ops::{for_client, TxnOp, TxnReply};

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: rill_protocol::kafka_protocol::messages::InitProducerIdRequest,
) -> super::Answer {
    super::Answer::body(handle(broker, cx.version, &request).await)
}

/// Answer InitProducerId.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    request: &InitProducerIdRequest,
) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default();
    if let Some(id) = &request.transactional_id {
        return transactional(broker, version, &id.0, request).await;
    }
    let bump = request.producer_id.0 >= 0 && request.producer_epoch >= 0;
    if bump && request.producer_epoch < i16::MAX - 1 {
        return response
            .with_producer_id(request.producer_id)
            .with_producer_epoch(request.producer_epoch + 1);
    }
    match broker.topics().allocate_producer_id() {
        Ok(id) => response
            .with_producer_id(ProducerId(id.0))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "cannot allocate a producer id");
            response
                .with_error_code(ErrorCode::CoordinatorNotAvailable.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        }
    }
}

/// InitProducerId for a transactional id, through its coordinator.
async fn transactional<B: Broker>(
    broker: &B,
    version: i16,
    id: &str,
    request: &InitProducerIdRequest,
) -> InitProducerIdResponse {
    let expected = (version >= 3 && request.producer_id.0 >= 0 && request.producer_epoch >= 0)
        .then_some((
            crate::txn::ProducerId(request.producer_id.0),
            crate::txn::ProducerEpoch(request.producer_epoch),
        ));
    let op = TxnOp::InitProducerId {
        timeout_ms: request.transaction_timeout_ms,
        expected,
    };
    let result = match broker.txn(id, op).await {
        TxnReply::Init(result) => result,
        TxnReply::Unavailable(code) => Err(code),
        other => unreachable!("InitProducerId answered with {other:?}"),
    };
    let response = InitProducerIdResponse::default();
    match result {
        Ok((pid, epoch)) => response
            .with_producer_id(ProducerId(pid.0))
            .with_producer_epoch(epoch.0),
        Err(code) => response
            .with_error_code(for_client(code, version, 4, i16::MAX).code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use futures::executor::block_on;

    #[test]
    fn new_ids_are_distinct_and_bumps_keep_the_id() {
        let broker = FakeBroker::new();
        let fresh = || {
            InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        };
        let a = block_on(handle(&broker, 4, &fresh()));
        let b = block_on(handle(&broker, 4, &fresh()));
        assert_eq!((a.error_code, a.producer_epoch), (0, 0));
        assert_ne!(a.producer_id, b.producer_id);
        let bumped = block_on(handle(
            &broker,
            4,
            &fresh()
                .with_producer_id(a.producer_id)
                .with_producer_epoch(0),
        ));
        assert_eq!(
            (bumped.producer_id, bumped.producer_epoch),
            (a.producer_id, 1)
        );
    }

    #[test]
    fn transactional_ids_bump_their_epoch_and_bad_timeouts_are_refused() {
        let broker = FakeBroker::new();
        let request = |timeout_ms: i32| {
            InitProducerIdRequest::default()
                .with_transactional_id(Some(super::super::str_bytes("tx").into()))
                .with_transaction_timeout_ms(timeout_ms)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        };
        let first = block_on(handle(&broker, 4, &request(60_000)));
        let second = block_on(handle(&broker, 4, &request(60_000)));
        assert_eq!((first.error_code, first.producer_epoch), (0, 0));
        assert_eq!(
            (second.producer_id, second.producer_epoch),
            (first.producer_id, 1)
        );
        let refused = block_on(handle(&broker, 4, &request(i32::MAX)));
        assert_eq!(
            refused.error_code,
            ErrorCode::InvalidTransactionTimeout.code()
        );
    }
}
