//! InitProducerId (22): producer ids for the idempotent producer, from the durable counter.
//!
//! - `producer_id = -1`: a new id, epoch 0.
//! - a known id and epoch (v3+, KIP-360 epoch bump after a sequence error): same id, epoch + 1;
//!   at the epoch's maximum a fresh id instead (Kafka does the same).
//! - a `transactional_id`: transactions are a later issue; answered with a clear error.

use rill_protocol::kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId,
};
use rill_protocol::ErrorCode;

use super::Broker;

/// Answer InitProducerId.
pub fn handle<B: Broker>(broker: &B, request: &InitProducerIdRequest) -> InitProducerIdResponse {
    let response = InitProducerIdResponse::default();
    if request.transactional_id.is_some() {
        tracing::warn!("InitProducerId with a transactional id: transactions are not supported");
        return response
            .with_error_code(ErrorCode::TransactionalIdAuthorizationFailed.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;

    #[test]
    fn new_ids_are_distinct_and_bumps_keep_the_id() {
        let broker = FakeBroker::new();
        let fresh = || {
            InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        };
        let a = handle(&broker, &fresh());
        let b = handle(&broker, &fresh());
        assert_eq!((a.error_code, a.producer_epoch), (0, 0));
        assert_ne!(a.producer_id, b.producer_id);
        let bumped = handle(
            &broker,
            &fresh()
                .with_producer_id(a.producer_id)
                .with_producer_epoch(0),
        );
        assert_eq!(
            (bumped.producer_id, bumped.producer_epoch),
            (a.producer_id, 1)
        );
    }

    #[test]
    fn transactional_ids_are_refused_clearly() {
        let broker = FakeBroker::new();
        let r = handle(
            &broker,
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(super::super::str_bytes("tx").into())),
        );
        assert_ne!(r.error_code, 0);
    }
}
