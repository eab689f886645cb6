//! End-to-end: start the real `rill` binary on a free loopback port with a temp data dir and
//! speak the Kafka protocol to it over raw TCP (requests encoded with kafka-protocol, the crate
//! rill-protocol re-exports). Covers ApiVersions, Metadata with auto-create, Produce with
//! acks=all across shards, Fetch, ListOffsets, bad input, SIGTERM and restart.

mod common;

use std::io::Write;

use common::{free_port, Broker, Client};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use rill_protocol::kafka_protocol::messages::*;
use rill_protocol::kafka_protocol::protocol::{Decodable, StrBytes};
use rill_protocol::kafka_protocol::records::RecordBatchDecoder;
use rill_protocol::record::{encode_plain_batch, PlainRecord};

const TOPIC: &str = "it-topic";
const PARTITIONS: i32 = 3;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn batch(values: &[String]) -> Bytes {
    encode_plain_batch(values.iter().enumerate().map(|(i, v)| PlainRecord {
        key: None,
        value: Some(Bytes::from(v.clone())),
        timestamp_ms: 1_700_000_000_000 + i as i64,
    }))
    .freeze()
}

fn values_for(partition: i32) -> Vec<String> {
    (0..5).map(|i| format!("p{partition}-v{i}")).collect()
}

fn produce(client: &mut Client, partition: i32, values: &[String]) -> ProduceResponse {
    let data = produce_request::PartitionProduceData::default()
        .with_index(partition)
        .with_records(Some(batch(values)));
    let topic = produce_request::TopicProduceData::default()
        .with_name(name(TOPIC))
        .with_partition_data(vec![data]);
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![topic]);
    client.call(ApiKey::Produce, 9, &request)
}

fn fetch_values(client: &mut Client, partition: i32) -> (i64, Vec<String>) {
    let p = fetch_request::FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(0)
        .with_partition_max_bytes(1 << 20);
    let topic = fetch_request::FetchTopic::default()
        .with_topic(name(TOPIC))
        .with_partitions(vec![p]);
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![topic]);
    let response: FetchResponse = client.call(ApiKey::Fetch, 12, &request);
    let data = &response.responses[0].partitions[0];
    assert_eq!(data.error_code, 0);
    assert_eq!(data.last_stable_offset, data.high_watermark);
    let mut records = data.records.clone().unwrap_or_default();
    let mut values = Vec::new();
    while records.has_remaining() {
        let set = RecordBatchDecoder::decode(&mut records).unwrap();
        for r in set.records {
            values.push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    (data.high_watermark, values)
}

fn api_versions_and_metadata(client: &mut Client) {
    let versions: ApiVersionsResponse = client.call(
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("it"))
            .with_client_software_version(StrBytes::from_static_str("1")),
    );
    assert_eq!(versions.error_code, 0);
    assert!(versions
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16));
    let request = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(name(TOPIC)))]))
        .with_allow_auto_topic_creation(true);
    let metadata: MetadataResponse = client.call(ApiKey::Metadata, 12, &request);
    let topic = &metadata.topics[0];
    assert_eq!(topic.error_code, 0);
    assert_eq!(topic.partitions.len(), PARTITIONS as usize);
    assert!(!topic.topic_id.is_nil());
}

fn list_latest(client: &mut Client, partition: i32) -> i64 {
    let p = list_offsets_request::ListOffsetsPartition::default()
        .with_partition_index(partition)
        .with_timestamp(-1);
    let t = list_offsets_request::ListOffsetsTopic::default()
        .with_name(name(TOPIC))
        .with_partitions(vec![p]);
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![t]);
    let response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 5, &request);
    response.topics[0].partitions[0].offset
}

#[test]
fn produce_fetch_restart_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let broker = Broker::start(dir.path(), port, PARTITIONS);
    let mut client = broker.connect();
    api_versions_and_metadata(&mut client);
    for partition in 0..PARTITIONS {
        let response = produce(&mut client, partition, &values_for(partition));
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (0, 0),
            "partition {partition}"
        );
    }
    for partition in 0..PARTITIONS {
        assert_eq!(
            fetch_values(&mut client, partition),
            (5, values_for(partition))
        );
        assert_eq!(list_latest(&mut client, partition), 5);
    }
    broker.stop();

    let broker = Broker::start(dir.path(), port, PARTITIONS);
    let mut client = broker.connect();
    for partition in 0..PARTITIONS {
        assert_eq!(
            fetch_values(&mut client, partition),
            (5, values_for(partition))
        );
    }
    let response = produce(&mut client, 1, &values_for(9));
    assert_eq!(response.responses[0].partition_responses[0].base_offset, 5);
    broker.stop();
}

#[test]
fn bad_input_gets_kafka_answers_or_a_closed_connection() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), free_port(), PARTITIONS);

    // ApiVersions at an unsupported version: error 35 with a v0 body.
    let mut client = broker.connect();
    let mut body = BytesMut::new();
    body.put_i16(ApiKey::ApiVersions as i16);
    body.put_i16(99);
    body.put_i32(42);
    body.put_i16(-1);
    client.send_frame(&body);
    let mut frame = client.read_frame().expect("answer to ApiVersions v99");
    assert_eq!(frame.get_i32(), 42);
    let versions = ApiVersionsResponse::decode(&mut frame, 0).unwrap();
    assert_eq!(versions.error_code, 35);

    // Garbage, an absurd size, an unknown api key: the connection is closed, nothing hangs.
    for bytes in [
        vec![0xff, 0xff, 0xff, 0xff, 1, 2],
        vec![0x7f, 0xff, 0xff, 0xff],
        [8i32.to_be_bytes(), [0x7f, 0x00, 0, 0], [0, 0, 0, 1]].concat(),
    ] {
        let mut client = broker.connect();
        client.stream.write_all(&bytes).unwrap();
        assert!(
            client.read_frame().is_none(),
            "expected a closed connection for {bytes:?}"
        );
    }

    // Corrupt CRC: CORRUPT_MESSAGE for that partition, and the broker still serves.
    let mut client = broker.connect();
    api_versions_and_metadata(&mut client);
    let mut bad = BytesMut::from(&batch(&values_for(0))[..]);
    let last = bad.len() - 1;
    bad[last] ^= 0x55;
    let data = produce_request::PartitionProduceData::default()
        .with_index(0)
        .with_records(Some(bad.freeze()));
    let topic = produce_request::TopicProduceData::default()
        .with_name(name(TOPIC))
        .with_partition_data(vec![data]);
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![topic]);
    let response: ProduceResponse = client.call(ApiKey::Produce, 9, &request);
    assert_eq!(response.responses[0].partition_responses[0].error_code, 2);
    let ok = produce(&mut client, 0, &values_for(0));
    assert_eq!(ok.responses[0].partition_responses[0].error_code, 0);
    broker.stop();
}

#[test]
fn pipelined_responses_come_back_in_order_and_acks_zero_is_silent() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::start(dir.path(), free_port(), PARTITIONS);
    let mut client = broker.connect();
    api_versions_and_metadata(&mut client);

    // A stalled client (half a frame, then nothing) must not hold up anyone else.
    let mut stalled = broker.connect();
    stalled.stream.write_all(&[0, 0, 0, 100, 0, 3]).unwrap();

    // acks=0 produce, then pipelined Metadata / Produce acks=1 / Fetch: the first response on
    // the wire answers the request after the acks=0 one, and all come back in request order.
    let data = produce_request::PartitionProduceData::default()
        .with_index(2)
        .with_records(Some(batch(&values_for(2))));
    let topic = produce_request::TopicProduceData::default()
        .with_name(name(TOPIC))
        .with_partition_data(vec![data]);
    client.send(
        ApiKey::Produce,
        9,
        &ProduceRequest::default()
            .with_acks(0)
            .with_topic_data(vec![topic.clone()]),
    );
    let mut expected = Vec::new();
    for i in 0..30 {
        let id = match i % 3 {
            0 => client.send(
                ApiKey::Metadata,
                12,
                &MetadataRequest::default().with_topics(None),
            ),
            1 => client.send(
                ApiKey::Produce,
                9,
                &ProduceRequest::default()
                    .with_acks(1)
                    .with_topic_data(vec![topic.clone()]),
            ),
            _ => client.send(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()),
        };
        expected.push(id);
    }
    for id in expected {
        let mut frame = client.read_frame().expect("pipelined response");
        assert_eq!(frame.get_i32(), id, "responses out of request order");
    }
    // 1 acks=0 batch + 10 acks=1 batches of 5 records each.
    assert_eq!(list_latest(&mut client, 2), 55);
    drop(stalled);
    broker.stop();
}
