//! Produce (0): check each partition's record batch once, append it on the owning shard (all
//! partitions in flight at once), answer per partition.
//!
//! Plan per partition, before any I/O (a refused partition appends nothing):
//! | check                                   | error                        |
//! |-----------------------------------------|------------------------------|
//! | acks not in {0, 1, -1}                  | INVALID_REQUIRED_ACKS (21)   |
//! | topic name illegal                      | INVALID_TOPIC_EXCEPTION (17) |
//! | topic unknown (auto-create off)         | UNKNOWN_TOPIC_OR_PARTITION   |
//! | partition index out of range            | UNKNOWN_TOPIC_OR_PARTITION   |
//! | no records, or no whole batch (cut short) | INVALID_RECORD (87)        |
//! | batchLength < 14, magic not 0..=2       | CORRUPT_MESSAGE (2)          |
//! | a second batch (or a cut one) after the first | INVALID_RECORD (87)    |
//! | magic 0 or 1                            | INVALID_RECORD (87)          |
//! | batchLength too small for a v2 header, CRC wrong | CORRUPT_MESSAGE (2) etc. |
//! | batch larger than max.message.bytes     | MESSAGE_TOO_LARGE (10)       |
//! | no records in a batch, count ≠ offsets  | INVALID_RECORD (87)          |
//! | a record malformed, or refused by a rule | [`produce_rules`]' table, with record errors |
//!
//! The batch count is [`single_batch`]'s (Kafka's `ProduceRequest.validateRecords`, which
//! counts the batches before it looks into one); the batch checks are
//! [`ValidatedBatch::new`]'s (its module lists them in order), then every record is checked
//! ([`produce_rules`]); each refusal carries a message (Produce v8+; Kafka sends none for the
//! batch-count refusals, Rill the text of Kafka's exception). Kafka ignores a cut batch after
//! a whole one (and appends the whole one); Rill refuses the partition (INVALID_RECORD). The
//! engine appends what it is handed without checking again.
//!
//! acks=0 requests still append but get no response.
//! A transactional producer's first append to a partition in a transaction is verified with
//! its coordinator first (`produce_txn.rs`); control batches from clients are refused by the
//! log (INVALID_RECORD).

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use futures::future::join_all;
use rill_engine::FlushPolicy;
use rill_protocol::kafka_protocol::messages::produce_request::TopicProduceData;
use rill_protocol::kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use rill_protocol::kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use rill_protocol::record::single_batch;
use rill_protocol::ErrorCode;
use rill_types::batch::ValidatedBatch;
use rill_types::{PartitionIndex, TopicPartitionRef};

use super::{topic_or_auto_create, Broker};
use crate::admin::shard::hooks;
use crate::config::topic::TopicSettings;
use crate::partition::ops::{Acks, PartitionOp, PartitionReply};
use crate::produce_rules::{self, Refusal};
use crate::request_order::Turn;

/// One partition's plan: its one batch to append, or the refusal to answer.
type Planned = Result<ValidatedBatch, Refusal>;

/// What a Produce request gets back.
#[derive(Debug)]
pub enum Produced {
    /// The response (acks=1 or acks=all).
    Response(ProduceResponse),
    /// Nothing at all: acks=0, and every partition appended.
    Silent,
    /// acks=0 with a partition refused or failed: the connection is closed, as Kafka does,
    /// the only way such a producer learns (it refreshes its metadata and reconnects).
    Close,
}

impl Produced {
    /// The response, if there is one.
    pub fn into_response(self) -> Option<ProduceResponse> {
        match self {
            Produced::Response(response) => Some(response),
            Produced::Silent | Produced::Close => None,
        }
    }
}

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: ProduceRequest,
) -> super::Answer {
    // Taken as the request arrives, before anything awaits: the connection's order.
    let turn = request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !id.is_empty())
        .then(|| cx.session.produce_order.take());
    match handle(broker, cx.version, request, cx.frame, turn).await {
        Produced::Response(response) => super::Answer::body(response),
        Produced::Silent => super::Answer::Silent,
        Produced::Close => super::Answer::Close,
    }
}

/// Answer Produce (see [`Produced`]). `frame` is the request frame `request` was decoded
/// from: its record bytes are slices of it (see [`owned_records`]). `turn`, a transactional
/// request's place in its connection's order, is held until it is answered.
pub async fn handle<B: Broker>(
    broker: &B,
    version: i16,
    mut request: ProduceRequest,
    frame: Bytes,
    turn: Option<Turn>,
) -> Produced {
    let arrived = Instant::now();
    let acks = Acks::from_wire(request.acks);
    // acks=all waits at most this for the ISR (Kafka's purgatory: REQUEST_TIMED_OUT after it).
    let ack_timeout = Duration::from_millis(request.timeout_ms.max(0) as u64);
    let transactional_id = request.transactional_id.as_ref().map(|id| id.to_string());
    let topic_data = std::mem::take(&mut request.topic_data);
    drop(request); // its strings are slices of the frame too
    let plans = plan_request(broker, version, owned_records(topic_data, frame), acks).await;
    let acks = acks.unwrap_or(Acks::All);
    let appends = plans
        .into_iter()
        .map(|(topic, index, plan, durable)| async move {
            let result = match plan {
                Ok(batch) => {
                    if acks == Acks::All {
                        hooks::shard_stage(hooks::Stage::Planned, arrived.elapsed());
                    }
                    let op = PartitionOp::Append {
                        batch,
                        acks,
                        ack_timeout,
                        txn_guard: None,
                    };
                    let tp = TopicPartitionRef::new(&topic, PartitionIndex(index));
                    let reply = broker.partition(tp, op).await;
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
        (acks, ack_timeout),
        turn.as_ref(),
        replies,
    )
    .await;
    if acks == Acks::None {
        let failed = replies.iter().any(|(_, _, r)| !r.error_code().is_ok());
        if failed {
            tracing::debug!("closing an acks=0 producer's connection: a partition failed");
            return Produced::Close;
        }
        return Produced::Silent;
    }
    let results = replies
        .into_iter()
        .zip(refusals)
        .map(|((topic, index, reply), refusal)| (topic, index, refusal.map_or(Ok(reply), Err)))
        .collect();
    Produced::Response(response(version, results))
}

/// One topic of a Produce request, its partitions' record bytes owned ([`owned_records`]).
struct TopicRecords {
    /// Shared by its partitions' plans and answers (one copy of the name per topic).
    name: Rc<str>,
    /// Partition index and records (`None` when absent or empty).
    partitions: Vec<(i32, Option<Received>)>,
}

/// One partition's record bytes, and the memory they keep alive while anything keeps them
/// (the whole frame, for records split off it; their length, for copied ones).
struct Received {
    bytes: BytesMut,
    held_bytes: usize,
}

impl Received {
    /// `bytes` copied into an allocation of their own.
    fn copied(bytes: &[u8]) -> Received {
        let bytes = BytesMut::from(bytes);
        let held_bytes = bytes.len();
        Received { bytes, held_bytes }
    }
}

/// Takes each partition's record bytes out of a decoded request as a buffer of its own that
/// the owner shard may write (the engine stamps baseOffset and leader epoch into each batch
/// in place), without copying them where it can.
///
/// The records are slices of the request `frame`, which the connection hands over in an
/// allocation of its own. Once the decoded request is dropped, nothing else shares the frame,
/// so it becomes one writable buffer again and the records are split off it. Only records
/// making up at least half of the frame are split off, though: every batch the batch cache
/// (or the read cache, by write-through) keeps pins the allocation it lives in, which they
/// count ([`Received::held_bytes`]), and this keeps that within 2x of the batch. Smaller
/// records (a request spreading many partitions' batches), and all records of a frame
/// something else still shares, are copied once instead.
fn owned_records(topic_data: Vec<TopicProduceData>, frame: Bytes) -> Vec<TopicRecords> {
    /// Where a partition's records are: a range of the frame, or another buffer.
    enum At {
        Frame(std::ops::Range<usize>),
        Elsewhere(Bytes),
        Nothing,
    }
    /// A topic's name and where each of its partitions' records are.
    type Located = (Rc<str>, Vec<(i32, At)>);
    let start = frame.as_ptr() as usize;
    let at = |records: Option<Bytes>| match records {
        Some(r) if r.is_empty() => At::Nothing,
        Some(r) => {
            let offset = (r.as_ptr() as usize).wrapping_sub(start);
            if offset <= frame.len() && r.len() <= frame.len() - offset {
                At::Frame(offset..offset + r.len())
            } else {
                At::Elsewhere(r)
            }
        }
        None => At::Nothing,
    };
    let topics: Vec<Located> = topic_data
        .into_iter()
        .map(|topic| {
            let name = Rc::from(topic.name.0.as_str());
            let partitions = topic
                .partition_data
                .into_iter()
                .map(|p| (p.index, at(p.records)))
                .collect();
            (name, partitions)
        })
        .collect();
    // Decoding reads the frame front to back, so the ranges come in order; if not, copy.
    let mut end = 0;
    let in_order = topics.iter().flat_map(|(_, p)| p).all(|(_, at)| match at {
        At::Frame(range) => std::mem::replace(&mut end, range.end) <= range.start,
        _ => true,
    });
    let frame_len = frame.len();
    let mut whole = match in_order {
        true => frame.try_into_mut(),
        false => Err(frame),
    };
    let mut split_at = 0; // frame position of `whole`'s first byte, when it is writable
                          // What a part split off the frame keeps alive: the whole allocation.
    let held_bytes = whole.as_ref().map_or(0, |b| b.capacity().max(frame_len));
    let mut take = |range: std::ops::Range<usize>| match &mut whole {
        Ok(buf) if 2 * range.len() >= frame_len => {
            buf.advance(range.start - split_at);
            split_at = range.end;
            let bytes = buf.split_to(range.len());
            Received { bytes, held_bytes }
        }
        Ok(buf) => Received::copied(&buf[range.start - split_at..range.end - split_at]),
        Err(shared) => Received::copied(&shared[range]),
    };
    topics
        .into_iter()
        .map(|(name, partitions)| TopicRecords {
            name,
            partitions: partitions
                .into_iter()
                .map(|(index, at)| {
                    let records = match at {
                        At::Frame(range) => Some(take(range)),
                        At::Elsewhere(bytes) => Some(Received::copied(&bytes)),
                        At::Nothing => None,
                    };
                    (index, records)
                })
                .collect(),
        })
        .collect()
}

/// Each partition of the request: topic, index, the checked batches or the refusal, and
/// whether the topic syncs before acks=all answers.
async fn plan_request<B: Broker>(
    broker: &B,
    version: i16,
    topics: Vec<TopicRecords>,
    acks: Option<Acks>,
) -> Vec<(Rc<str>, i32, Planned, bool)> {
    let now = broker.wall_clock();
    let mut plans = Vec::new();
    for topic in topics {
        let name = topic.name;
        let meta = topic_or_auto_create(broker, &name, true).await;
        // Parsed once per config change on this shard, not per request.
        let settings = meta.as_ref().ok().map(|m| {
            broker.topic_settings(&name, m).map_err(|e| {
                tracing::error!(topic = &*name, error = %e, "stored topic config is invalid");
                Refusal::from(ErrorCode::InvalidConfig)
            })
        });
        // acks=all answers mean durable only when the topic syncs before answering.
        let durable = settings.as_ref().is_some_and(|s| {
            s.as_ref()
                .is_ok_and(|s| s.log.flush == FlushPolicy::EveryAppend)
        });
        for (index, records) in topic.partitions {
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
                .and_then(|()| plan_partition(version, records, s, now)),
                (Ok(_), _, Some(Err(refusal))) => Err(refusal.clone()),
                (Ok(_), _, None) => unreachable!("known topics have settings"),
            };
            plans.push((name.clone(), index, plan, durable));
        }
    }
    plans
}

/// Check one partition's records, exactly one whole batch for Produce v3+ (the decoded
/// versions), once, for the owner shard (which rewrites its baseOffset in place, uncopied).
fn plan_partition(
    version: i16,
    records: Option<Received>,
    settings: &TopicSettings,
    now: rill_types::TimestampMs,
) -> Planned {
    let message_bytes_max = settings.log.message_bytes_max as usize;
    let refused = |refusal: Refusal| {
        tracing::debug!(message = refusal.message, "refusing record batch");
        refusal
    };
    let (bytes, held_bytes) = records.map_or((BytesMut::new(), 0), |r| (r.bytes, r.held_bytes));
    let one =
        single_batch(bytes).map_err(|why| refused(produce_rules::not_one_batch(version, &why)))?;
    let batch = ValidatedBatch::new(one, message_bytes_max)
        .map_err(|e| refused(produce_rules::batch_refusal(&e)))?
        .holding(held_bytes);
    produce_rules::apply(batch, settings, message_bytes_max, now)
}

/// A partition's outcome: the owner's answer, or the refusal made before any append.
type Outcome = Result<PartitionReply, Refusal>;

/// The partition answers the transactional verification works on, with each refusal (its
/// message and record errors) set aside by position to be put back into the response.
fn set_refusals_aside(
    outcomes: Vec<(Rc<str>, i32, Outcome)>,
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

fn response(version: i16, results: Vec<(Rc<str>, i32, Outcome)>) -> ProduceResponse {
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
            Some(last) if last.name.0.as_str() == &*topic => {
                last.partition_responses.push(partition)
            }
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
                .with_batch_index_error_message(Some(super::message_bytes(&e.message)))
        })
        .collect();
    base.with_record_errors(errors)
        .with_error_message(refusal.message.as_deref().map(super::message_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::{batch, FakeBroker};
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::produce_request::PartitionProduceData;

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

    /// [`handle`]'s response to `request` (acks 1 or -1), on a request frame of its own.
    fn answer(broker: &FakeBroker, version: i16, request: ProduceRequest) -> ProduceResponse {
        block_on(handle(broker, version, request, Bytes::new(), None))
            .into_response()
            .expect("acks 1 or -1 get a response")
    }

    fn error_of(r: &ProduceResponse) -> i16 {
        r.responses[0].partition_responses[0].error_code
    }

    #[test]
    fn appends_and_assigns_offsets() {
        let broker = FakeBroker::new();
        let r = answer(&broker, 9, request("t", 0, Some(batch(3)), -1));
        assert_eq!(error_of(&r), 0);
        assert_eq!(r.responses[0].partition_responses[0].base_offset, 0);
        let r = answer(&broker, 9, request("t", 0, Some(batch(2)), 1));
        assert_eq!(r.responses[0].partition_responses[0].base_offset, 3);
    }

    #[test]
    fn acks_zero_gets_no_response_but_appends() {
        let broker = FakeBroker::new();
        assert!(matches!(
            block_on(handle(
                &broker,
                9,
                request("t", 0, Some(batch(1)), 0),
                Bytes::new(),
                None,
            )),
            Produced::Silent
        ));
        assert_eq!(
            broker.log_end(TopicPartitionRef::new("t", PartitionIndex(0))),
            1
        );
        // A refused partition closes the connection instead (Kafka's only acks=0 error signal).
        for bad in [
            request("t", 7, Some(batch(1)), 0),
            request("t", 0, Some(Bytes::from([batch(1), batch(1)].concat())), 0),
        ] {
            let answer = block_on(handle(&broker, 9, bad, Bytes::new(), None));
            assert!(matches!(answer, Produced::Close), "{answer:?}");
        }
        assert_eq!(
            broker.log_end(TopicPartitionRef::new("t", PartitionIndex(0))),
            1
        );
    }

    #[test]
    fn corrupt_crc_is_corrupt_message() {
        let broker = FakeBroker::new();
        let mut bad = BytesMut::from(&batch(1)[..]);
        let last = bad.len() - 1;
        bad[last] ^= 0xff;
        let r = answer(&broker, 9, request("t", 0, Some(bad.freeze()), 1));
        assert_eq!(error_of(&r), 2);
        assert_eq!(
            broker.log_end(TopicPartitionRef::new("t", PartitionIndex(0))),
            0
        );
    }

    #[test]
    fn refusals_map_to_kafka_codes() {
        let broker = FakeBroker::new();
        let cases = [
            (request("t", 0, Some(batch(1)), 5), 21),
            (request("bad name", 0, Some(batch(1)), 1), 17),
            (request("t", 7, Some(batch(1)), 1), 3),
            (request("t", 0, None, 1), 87),
            // Five bytes hold no batch for Kafka's reader: INVALID_RECORD, as no records.
            (request("t", 0, Some(Bytes::from_static(b"short")), 1), 87),
        ];
        for (req, code) in cases {
            assert_eq!(error_of(&answer(&broker, 9, req)), code);
        }
    }

    #[test]
    fn two_batches_in_one_partition_are_refused_whole_as_kafka() {
        let broker = FakeBroker::new();
        let two = Bytes::from([batch(2), batch(3)].concat());
        let r = answer(&broker, 9, request("t", 0, Some(two), 1));
        let p = &r.responses[0].partition_responses[0];
        assert_eq!(p.error_code, ErrorCode::InvalidRecord.code());
        assert_eq!((p.base_offset, p.log_start_offset), (-1, -1));
        assert!(p.record_errors.is_empty());
        let message = p.error_message.as_ref().unwrap().to_string();
        assert_eq!(
            message,
            "Produce requests with version 9 are only allowed to contain exactly one record batch per partition"
        );
        assert_eq!(
            broker.log_end(TopicPartitionRef::new("t", PartitionIndex(0))),
            0,
            "nothing of the partition written"
        );

        // A whole batch followed by a cut one: Kafka would drop the cut one and append; Rill
        // refuses the partition, with the batch-count code.
        let cut = Bytes::from([batch(2), batch(3).slice(..20)].concat());
        let r = answer(&broker, 9, request("t", 0, Some(cut), 1));
        assert_eq!(error_of(&r), ErrorCode::InvalidRecord.code());
        // A cut batch alone is no batch to Kafka: INVALID_RECORD, saying so.
        let r = answer(&broker, 9, request("t", 0, Some(batch(3).slice(..70)), 1));
        assert_eq!(error_of(&r), ErrorCode::InvalidRecord.code());
        let message = r.responses[0].partition_responses[0].error_message.as_ref();
        assert!(message.unwrap().contains("no whole batch"), "{message:?}");
        // Batches are counted before either is checked, as Kafka: a corrupt first batch with
        // a second after it is the batch-count refusal, not the CRC's.
        let mut corrupt = BytesMut::from(&batch(2)[..]);
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        corrupt.extend_from_slice(&batch(3));
        let r = answer(&broker, 9, request("t", 0, Some(corrupt.freeze()), 1));
        assert_eq!(error_of(&r), ErrorCode::InvalidRecord.code());
        // An empty records field names the version too.
        let r = answer(&broker, 3, request("t", 0, Some(Bytes::new()), 1));
        assert_eq!(error_of(&r), ErrorCode::InvalidRecord.code());
        assert_eq!(
            broker.log_end(TopicPartitionRef::new("t", PartitionIndex(0))),
            0
        );
    }

    #[test]
    fn oversized_batch_is_message_too_large() {
        let broker = FakeBroker::with_config(|c| {
            c.log
                .static_props
                .insert("message.max.bytes".into(), "100".into());
        });
        let r = answer(&broker, 9, request("t", 0, Some(batch(20)), 1));
        assert_eq!(error_of(&r), 10);
    }

    fn configs(pairs: &[(&str, &str)]) -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_changed_topic_config_is_seen_by_the_very_next_produce() {
        let broker = FakeBroker::new();
        let big = || request("t", 0, Some(batch(20)), 1);
        assert_eq!(error_of(&answer(&broker, 9, big())), 0, "auto-created");
        assert_eq!(error_of(&answer(&broker, 9, big())), 0, "cached");
        let small = configs(&[("max.message.bytes", "100")]);
        broker
            .topics()
            .set_topic_configs("t", |_| Ok(small))
            .unwrap();
        assert_eq!(error_of(&answer(&broker, 9, big())), 10);
        broker
            .topics()
            .set_topic_configs("t", |_| Ok(configs(&[])))
            .unwrap();
        assert_eq!(error_of(&answer(&broker, 9, big())), 0);
    }

    #[test]
    fn a_changed_broker_default_the_topic_inherits_is_seen_by_the_very_next_produce() {
        let broker = FakeBroker::new();
        let big = || request("t", 0, Some(batch(20)), 1);
        assert_eq!(error_of(&answer(&broker, 9, big())), 0);
        let default = crate::topics::CLUSTER_DEFAULT_RESOURCE;
        let small = configs(&[("message.max.bytes", "100")]);
        broker
            .topics()
            .set_broker_configs(default, |_| Ok(small))
            .unwrap();
        assert_eq!(error_of(&answer(&broker, 9, big())), 10);
        // A topic's own config overrides the broker's default.
        let own = configs(&[("max.message.bytes", "100000")]);
        broker.topics().set_topic_configs("t", |_| Ok(own)).unwrap();
        assert_eq!(error_of(&answer(&broker, 9, big())), 0);
    }

    #[test]
    fn a_deleted_and_recreated_topic_is_not_served_stale_settings() {
        let broker = FakeBroker::new();
        let big = || request("t", 0, Some(batch(20)), 1);
        let small = configs(&[("max.message.bytes", "100")]);
        broker.topics().create("t", 1, small).unwrap();
        assert_eq!(error_of(&answer(&broker, 9, big())), 10);
        broker.topics().delete("t").unwrap();
        broker.topics().create("t", 1, configs(&[])).unwrap();
        assert_eq!(error_of(&answer(&broker, 9, big())), 0);
        assert_eq!(broker.settings.len(), 1, "one entry per topic name");
    }

    /// A request frame as the connection hands it over (an allocation of its own), and the
    /// request decoded from it.
    fn decoded(partitions: &[(i32, Bytes)]) -> (ProduceRequest, Bytes) {
        use rill_protocol::kafka_protocol::protocol::{Decodable, Encodable};
        let data = partitions
            .iter()
            .map(|(index, records)| {
                PartitionProduceData::default()
                    .with_index(*index)
                    .with_records(Some(records.clone()))
            })
            .collect();
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(super::super::topic_name("t"))
                .with_partition_data(data)]);
        let mut encoded = BytesMut::new();
        request.encode(&mut encoded, 9).unwrap();
        let frame = Bytes::from(encoded.to_vec());
        let request = ProduceRequest::decode(&mut frame.clone(), 9).unwrap();
        (request, frame)
    }

    /// Whether `part` lies inside the memory of `frame` (was not copied out of it).
    fn inside(part: &[u8], frame: std::ops::Range<usize>) -> bool {
        let at = part.as_ptr() as usize;
        frame.contains(&at) && at + part.len() <= frame.end
    }

    fn records_of(topics: Vec<TopicRecords>) -> Vec<BytesMut> {
        held_of(topics)
            .into_iter()
            .map(|(bytes, _)| bytes)
            .collect()
    }

    /// Each partition's records and the memory they keep alive.
    fn held_of(topics: Vec<TopicRecords>) -> Vec<(BytesMut, usize)> {
        let partitions = topics.into_iter().flat_map(|t| t.partitions);
        let received = partitions.map(|(_, r)| r.unwrap());
        received.map(|r| (r.bytes, r.held_bytes)).collect()
    }

    #[test]
    fn records_of_a_frame_nothing_else_shares_are_not_copied() {
        let (request, frame) = decoded(&[(0, batch(40))]);
        let memory = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        let records = records_of(owned_records(request.topic_data, frame));
        assert!(inside(&records[0], memory), "split off the frame");
        assert_eq!(&records[0][..], &batch(40)[..]);
        assert!(single_batch(records.into_iter().next().unwrap()).is_ok());
    }

    #[test]
    fn records_of_a_shared_frame_or_a_small_part_of_it_are_copied() {
        let (request, frame) = decoded(&[(0, batch(40))]);
        let memory = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        let still_shared = frame.clone();
        let records = records_of(owned_records(request.topic_data, frame));
        assert!(!inside(&records[0], memory.clone()), "copied");
        assert_eq!(&records[0][..], &batch(40)[..]);
        drop(still_shared);

        // One partition with most of the frame, and two small ones: only the big one in place.
        let parts = [(0, batch(2)), (1, batch(60)), (2, batch(1))];
        let (request, frame) = decoded(&parts);
        let memory = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        let records = records_of(owned_records(request.topic_data, frame));
        let in_place: Vec<bool> = records.iter().map(|r| inside(r, memory.clone())).collect();
        assert_eq!(in_place, [false, true, false]);
        let (request, frame) = decoded(&parts);
        let frame_len = frame.len();
        let held: Vec<usize> = held_of(owned_records(request.topic_data, frame))
            .into_iter()
            .map(|(_, held)| held)
            .collect();
        assert!(
            held[1] >= frame_len,
            "the split-off batch counts its whole frame"
        );
        assert_eq!(
            [held[0], held[2]],
            [parts[0].1.len(), parts[2].1.len()],
            "copies: their own"
        );
        for ((_, sent), got) in parts.iter().zip(&records) {
            assert_eq!(&sent[..], &got[..]);
        }
    }

    #[test]
    fn batches_split_off_the_frame_take_their_offsets_in_place() {
        let (request, frame) = decoded(&[(0, batch(30))]);
        let memory = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
        let records = records_of(owned_records(request.topic_data, frame));
        let mut checked =
            ValidatedBatch::new(records.into_iter().next().unwrap(), 1 << 20).unwrap();
        checked.set_base_offset(rill_types::Offset(7));
        assert_eq!(checked.header().base_offset.get(), 7);
        let stored = checked.freeze();
        assert!(inside(&stored, memory), "stamped where it was received");
    }
}
