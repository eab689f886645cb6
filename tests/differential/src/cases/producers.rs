//! Idempotent producers: InitProducerId at every version, then sequences that are in order,
//! duplicated, out of order, and from an epoch or producer id the broker never issued.

use rill_protocol::kafka_protocol::messages::{
    ApiKey, InitProducerIdRequest, RequestKind, ResponseKind,
};

use super::{create_topic, produce_request, response, Case};
use crate::pair::{Pair, Side};
use crate::records::{batch, BatchSpec};
use crate::wire::Answer;

pub const CASES: &[Case] = &[
    ("init_producer_id", init_producer_id),
    ("idempotent_sequences", idempotent_sequences),
];

/// Saves each side's producer id and epoch from its InitProducerId answer.
pub fn save_producer(pair: &mut Pair, answers: &[Answer; 2]) {
    for (side, answer) in [&mut pair.kafka, &mut pair.rill].into_iter().zip(answers) {
        if let Some(ResponseKind::InitProducerId(r)) = response(answer) {
            side.state.insert("pid".into(), r.producer_id.0.to_string());
            side.state
                .insert("epoch".into(), r.producer_epoch.to_string());
        }
    }
}

fn init_producer_id(pair: &mut Pair) -> anyhow::Result<()> {
    for version in pair.versions(ApiKey::InitProducerId) {
        let request = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
        let answers = pair.both(version, |_| RequestKind::InitProducerId(request.clone()))?;
        save_producer(pair, &answers);
        if version >= 3 {
            // Bumping the epoch of an idempotent producer (KIP-360) by giving the id back.
            let answers = pair.both(version, |side| {
                RequestKind::InitProducerId(
                    request
                        .clone()
                        .with_producer_id(side.int("pid", -1).into())
                        .with_producer_epoch(side.int("epoch", -1) as i16),
                )
            })?;
            save_producer(pair, &answers);
            // An epoch that is not the current one.
            pair.both(version, |side| {
                RequestKind::InitProducerId(
                    request
                        .clone()
                        .with_producer_id(side.int("pid", -1).into())
                        .with_producer_epoch(7),
                )
            })?;
        }
    }
    Ok(())
}

/// One idempotent batch of `n` records from this side's producer.
fn idempotent(side: &Side, topic: &str, seq: i32, n: usize, epoch_delta: i16) -> RequestKind {
    let spec = BatchSpec {
        producer_id: side.int("pid", -1),
        producer_epoch: side.int("epoch", -1) as i16 + epoch_delta,
        base_sequence: seq,
        ..BatchSpec::default()
    };
    let values: Vec<&[u8]> = (0..n).map(|_| b"idem".as_slice()).collect();
    RequestKind::Produce(produce_request(topic, 0, batch(&values, spec), -1))
}

fn idempotent_sequences(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-idempotent", 1, &[])?;
    let init = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
    let answers = pair.both(4, |_| RequestKind::InitProducerId(init.clone()))?;
    save_producer(pair, &answers);
    let t = "kd-idempotent";
    let steps: [(i32, usize, i16); 8] = [
        (0, 3, 0),  // in order
        (3, 2, 0),  // in order
        (3, 2, 0),  // duplicate of the last batch
        (0, 3, 0),  // duplicate of an older batch
        (9, 1, 0),  // a gap
        (1, 1, 0),  // behind, not a duplicate
        (5, 1, -1), // an older epoch
        (3, 1, 1),  // a newer epoch, not from sequence 0
    ];
    for (seq, n, epoch_delta) in steps {
        pair.both(9, |side| idempotent(side, t, seq, n, epoch_delta))?;
    }
    pair.both(9, |side| idempotent(side, t, 0, 1, 1))?; // a newer epoch from 0
                                                        // A producer id no broker issued.
    pair.both(9, |_| {
        let spec = BatchSpec {
            producer_id: 987_654,
            producer_epoch: 0,
            base_sequence: 4,
            ..BatchSpec::default()
        };
        RequestKind::Produce(produce_request(t, 0, batch(&[b"x"], spec), -1))
    })?;
    Ok(())
}
