//! Produce (0): check each partition's record batches once, append them on the owning shards
//! (all partitions in flight at once), answer per partition.
//!
//! Plan per partition, before any I/O (a partition with one bad batch appends none of them):
//! | check                                   | error                        |
//! |-----------------------------------------|------------------------------|
//! | acks not in {0, 1, -1}                  | INVALID_REQUIRED_ACKS (21)   |
//! | topic name illegal                      | INVALID_TOPIC_EXCEPTION (17) |
//! | topic unknown (auto-create off)         | UNKNOWN_TOPIC_OR_PARTITION   |
//! | partition index out of range            | UNKNOWN_TOPIC_OR_PARTITION   |
//! | no records                              | INVALID_RECORD (87)          |
//! | batch length/CRC wrong                  | CORRUPT_MESSAGE (2) etc.     |
//! | magic not 2                             | INVALID_RECORD (87)          |
//! | batch larger than max.message.bytes     | MESSAGE_TOO_LARGE (10)       |
//! | no records in a batch, count ≠ offsets  | INVALID_RECORD (87)          |
//! | a record malformed, or refused by a rule | [`produce_rules`]' table, with record errors |
//!
//! The batch checks are [`ValidatedBatch::new`]'s (its module lists them in order), then every
//! record is checked ([`produce_rules`]); each refusal carries a message (Produce v8+). The
//! engine appends what it is handed without checking again.
//!
//! acks=0 requests still append but get no response.
//! A transactional producer's first append to a partition in a transaction is verified with
//! its coordinator first (`produce_txn.rs`); control batches from clients are refused by the
//! log (INVALID_RECORD).

use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures::future::join_all;
use rill_engine::FlushPolicy;
use rill_protocol::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use rill_protocol::kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use rill_protocol::kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use rill_protocol::record::split;
use rill_protocol::ErrorCode;
use rill_types::batch::ValidatedBatch;

use super::{topic_or_auto_create, Broker};
use crate::admin::shard::hooks;
use crate::partition::ops::{Acks, PartitionOp, PartitionReply};
use crate::produce_rules::{self, Refusal};
use crate::topic_config::TopicSettings;

/// One partition's plan: the batches to append, or the refusal to answer.
type Planned = Result<Vec<ValidatedBatch>, Refusal>;

/// Answer Produce; `None` for acks=0 (no response at all).
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    request: ProduceRequest,
) -> Option<ProduceResponse> {
    let arrived = Instant::now();
    let acks = Acks::from_wire(request.acks);
    let transactional_id = request.transactional_id.as_ref().map(|id| id.to_string());
    let plans = plan_request(broker, request.topic_data, acks);
    let acks = acks.unwrap_or(Acks::All);
    let appends = plans
        .into_iter()
        .map(|(topic, index, plan, durable)| async move {
            let result = match plan {
                Ok(batches) => {
                    let op = PartitionOp::Append {
                        batches,
                        acks,
                        txn_guard: None,
                    };
                    let reply = broker.partition(&topic, index, op).await;
                    if durable && acks == Acks::All && reply.error_code().is_ok() {
                        hooks::produce_durable(arrived.elapsed());
                    }
                    Ok(reply)
                }
                Err(refusal) => Err(refusal),
            };
            (topic, index, result)
        });
    let (replies, refusals) = set_refusals_aside(join_all(appends).await);
    let replies = super::produce_txn::verify_first_appends(
        broker,
        version,
        transactional_id.as_deref(),
        acks,
        replies,
    )
    .await;
    if acks == Acks::None {
        return None;
    }
    let results = replies
        .into_iter()
        .zip(refusals)
        .map(|((topic, index, reply), refusal)| (topic, index, refusal.map_or(Ok(reply), Err)))
        .collect();
    Some(response(version, results))
}

/// Each partition of the request: topic, index, the checked batches or the refusal, and
/// whether the topic syncs before acks=all answers.
fn plan_request<B: Broker>(
    broker: &B,
    topic_data: Vec<TopicProduceData>,
    acks: Option<Acks>,
) -> Vec<(String, i32, Planned, bool)> {
    let now = broker.wall_clock();
    let mut plans = Vec::new();
    for topic in topic_data {
        let name = topic.name.0.as_str().to_string();
        let meta = topic_or_auto_create(broker, &name, true);
        let settings = meta.as_ref().ok().map(|m| {
            TopicSettings::of_topic(broker.config(), broker.topics(), &m.configs).map_err(|e| {
                tracing::error!(topic = name, error = %e, "stored topic config is invalid");
                Refusal::from(ErrorCode::InvalidConfig)
            })
        });
        // acks=all answers mean durable only when the topic syncs before answering.
        let durable = settings.as_ref().is_some_and(|s| {
            s.as_ref()
                .is_ok_and(|s| s.log.flush == FlushPolicy::EveryAppend)
        });
        for partition in topic.partition_data {
            let index = partition.index;
            let plan = match (&meta, acks, &settings) {
                (_, None, _) => Err(ErrorCode::InvalidRequiredAcks.into()),
                (Err(code), _, _) => Err((*code).into()),
                (Ok(m), _, _) if index < 0 || index >= m.partitions => {
                    Err(ErrorCode::UnknownTopicOrPartition.into())
                }
                // In a cluster the partition's leader checks the ISR (`crate::replication`).
                (Ok(_), Some(acks), Some(Ok(s))) => match broker.cluster() {
                    Some(_) => Ok(()),
                    None => produce_rules::check_acks(s, acks),
                }
                .and_then(|()| plan_partition(partition, s, now)),
                (Ok(_), _, Some(Err(refusal))) => Err(refusal.clone()),
                (Ok(_), _, None) => unreachable!("known topics have settings"),
            };
            plans.push((name.clone(), index, plan, durable));
        }
    }
    plans
}

/// Split one partition's records into whole batches and check each once, copying it into an
/// owned buffer for the owner shard (which rewrites its baseOffset).
fn plan_partition(
    partition: PartitionProduceData,
    settings: &TopicSettings,
    now: rill_types::TimestampMs,
) -> Planned {
    let message_bytes_max = settings.log.message_bytes_max as usize;
    let records: Bytes = match partition.records {
        Some(records) if !records.is_empty() => records,
        _ => {
            return Err(Refusal {
                code: ErrorCode::InvalidRecord,
                message: Some("Produce requests must have at least one record batch".into()),
                record_errors: Vec::new(),
            })
        }
    };
    let mut out = Vec::new();
    for slice in split(records) {
        let checked = slice
            .and_then(|bytes| ValidatedBatch::new(BytesMut::from(&bytes[..]), message_bytes_max));
        let batch = checked.map_err(|e| {
            tracing::debug!(error = %e, "refusing record batch");
            produce_rules::batch_refusal(&e)
        })?;
        out.push(produce_rules::apply(
            batch,
            settings,
            message_bytes_max,
            now,
        )?);
    }
    assert!(!out.is_empty());
    Ok(out)
}

/// A partition's outcome: the owner's answer, or the refusal made before any append.
type Outcome = Result<PartitionReply, Refusal>;

/// The partition answers the transactional verification works on, with each refusal (its
/// message and record errors) set aside by position to be put back into the response.
fn set_refusals_aside(
    outcomes: Vec<(String, i32, Outcome)>,
) -> (super::produce_txn::Results, Vec<Option<Refusal>>) {
    outcomes
        .into_iter()
        .map(|(topic, index, outcome)| match outcome {
            Ok(reply) => ((topic, index, reply), None),
            Err(refusal) => (
                (topic, index, PartitionReply::Error(refusal.code)),
                Some(refusal),
            ),
        })
        .unzip()
}

fn response(version: i16, results: Vec<(String, i32, Outcome)>) -> ProduceResponse {
    let mut topics: Vec<TopicProduceResponse> = Vec::new();
    for (topic, index, outcome) in results {
        let mut partition = match outcome {
            Ok(reply) => partition_response(index, reply),
            Err(refusal) => refused_response(version, index, refusal),
        };
        if version < 5 {
            partition.log_start_offset = -1; // not in the schema before v5
        }
        match topics.last_mut() {
            Some(last) if last.name.0.as_str() == topic => last.partition_responses.push(partition),
            _ => topics.push(
                TopicProduceResponse::default()
                    .with_name(super::topic_name(&topic))
                    .with_partition_responses(vec![partition]),
            ),
        }
    }
    ProduceResponse::default().with_responses(topics)
}

fn partition_response(index: i32, reply: PartitionReply) -> PartitionProduceResponse {
    let base = PartitionProduceResponse::default().with_index(index);
    match reply {
        PartitionReply::Appended {
            base_offset,
            log_append_time,
            log_start_offset,
        } => base
            .with_base_offset(base_offset.0)
            .with_log_append_time_ms(log_append_time.0)
            .with_log_start_offset(log_start_offset.0),
        other => base
            .with_error_code(other.error_code().code())
            .with_base_offset(-1)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(-1),
    }
}

/// A refusal with its message and the records at fault (KIP-467, in the schema from v8).
fn refused_response(version: i16, index: i32, refusal: Refusal) -> PartitionProduceResponse {
    let base = partition_response(index, PartitionReply::Error(refusal.code));
    if version < 8 {
        return base;
    }
    let errors = refusal
        .record_errors
        .into_iter()
        .map(|e| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(e.batch_index)
                .with_batch_index_error_message(Some(super::str_bytes(&e.message)))
        })
        .collect();
    base.with_record_errors(errors)
        .with_error_message(refusal.message.as_deref().map(super::str_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::{batch, FakeBroker};
    use futures::executor::block_on;

    fn request(topic: &str, partition: i32, records: Option<Bytes>, acks: i16) -> ProduceRequest {
        let data = PartitionProduceData::default()
            .with_index(partition)
            .with_records(records);
        ProduceRequest::default()
            .with_acks(acks)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(super::super::topic_name(topic))
                .with_partition_data(vec![data])])
    }

    fn error_of(r: &ProduceResponse) -> i16 {
        r.responses[0].partition_responses[0].error_code
    }

    #[test]
    fn appends_and_assigns_offsets() {
        let broker = FakeBroker::new();
        let r = block_on(handle(&broker, 9, request("t", 0, Some(batch(3)), -1))).unwrap();
        assert_eq!(error_of(&r), 0);
        assert_eq!(r.responses[0].partition_responses[0].base_offset, 0);
        let r = block_on(handle(&broker, 9, request("t", 0, Some(batch(2)), 1))).unwrap();
        assert_eq!(r.responses[0].partition_responses[0].base_offset, 3);
    }

    #[test]
    fn acks_zero_gets_no_response_but_appends() {
        let broker = FakeBroker::new();
        assert!(block_on(handle(&broker, 9, request("t", 0, Some(batch(1)), 0))).is_none());
        assert_eq!(broker.log_end("t", 0), 1);
    }

    #[test]
    fn corrupt_crc_is_corrupt_message() {
        let broker = FakeBroker::new();
        let mut bad = BytesMut::from(&batch(1)[..]);
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        let r = block_on(handle(&broker, 9, request("t", 0, Some(bad.freeze()), 1))).unwrap();
        assert_eq!(error_of(&r), 2);
        assert_eq!(broker.log_end("t", 0), 0);
    }

    #[test]
    fn refusals_map_to_kafka_codes() {
        let broker = FakeBroker::new();
        let cases = [
            (request("t", 0, Some(batch(1)), 5), 21),
            (request("bad name", 0, Some(batch(1)), 1), 17),
            (request("t", 7, Some(batch(1)), 1), 3),
            (request("t", 0, None, 1), 87),
            (request("t", 0, Some(Bytes::from_static(b"short")), 1), 2),
        ];
        for (req, code) in cases {
            let r = block_on(handle(&broker, 9, req)).unwrap();
            assert_eq!(error_of(&r), code);
        }
    }

    #[test]
    fn oversized_batch_is_message_too_large() {
        let broker = FakeBroker::with_config(|c| {
            c.log
                .static_props
                .insert("message.max.bytes".into(), "100".into());
        });
        let r = block_on(handle(&broker, 9, request("t", 0, Some(batch(20)), 1))).unwrap();
        assert_eq!(error_of(&r), 10);
    }
}
