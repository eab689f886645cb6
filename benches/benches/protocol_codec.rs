//! Protocol codec throughput: Produce request decode (with and without batch CRC validation)
//! and Fetch response encode (zero-copy vectored vs. plain), in MB/s of frame bytes.
use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rill_protocol::fetch_encoder::encode_fetch_response_vectored;
use rill_protocol::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, PartitionData,
};
use rill_protocol::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use rill_protocol::kafka_protocol::messages::{
    ApiKey, FetchResponse, ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::record::{batches, encode_plain_batch, PlainRecord};
use rill_protocol::request::{decode_request, Request};
use rill_protocol::response::encode_response;

/// One uncompressed batch of `records` records of `value_bytes` each.
fn batch(records: usize, value_bytes: usize) -> Bytes {
    encode_plain_batch((0..records).map(|i| PlainRecord {
        key: Some(Bytes::from(format!("key-{i}"))),
        value: Some(Bytes::from(vec![b'x'; value_bytes])),
        timestamp_ms: 1_700_000_000_000,
    }))
    .freeze()
}

/// A Produce v9 request body (header + body, no size prefix) with `partitions` batches.
fn produce_frame(partitions: usize, batch: &Bytes) -> Bytes {
    let partition_data = (0..partitions)
        .map(|p| {
            PartitionProduceData::default()
                .with_index(p as i32)
                .with_records(Some(batch.clone()))
        })
        .collect();
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_static_str("bench")))
        .with_partition_data(partition_data);
    let body = RequestKind::Produce(
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![topic]),
    );
    Request::new(ApiKey::Produce, 9, 1, "bench", body)
        .encode()
        .expect("encodes")
        .freeze()
}

fn produce_decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("produce_request_decode");
    for (partitions, records, value_bytes) in [(1, 1, 1000), (4, 64, 1000), (8, 1000, 1000)] {
        let frame = produce_frame(partitions, &batch(records, value_bytes));
        let label = format!("{partitions}p_x_{records}r_x_{value_bytes}B");
        group.throughput(Throughput::Bytes(frame.len() as u64));
        group.bench_with_input(BenchmarkId::new("decode", &label), &frame, |b, frame| {
            b.iter(|| black_box(decode_request(frame.clone()).expect("decodes")))
        });
        group.bench_with_input(
            BenchmarkId::new("decode_and_crc", &label),
            &frame,
            |b, frame| {
                b.iter(|| {
                    let request = decode_request(frame.clone()).expect("decodes");
                    let RequestKind::Produce(produce) = request.body else {
                        unreachable!()
                    };
                    for p in &produce.topic_data[0].partition_data {
                        for view in batches(p.records.clone().expect("records")) {
                            black_box(view.expect("valid"));
                        }
                    }
                })
            },
        );
    }
    group.finish();
}

fn fetch_response(partitions: usize, records: Option<&[Vec<Bytes>]>) -> FetchResponse {
    let parts = (0..partitions)
        .map(|p| {
            let data = PartitionData::default()
                .with_partition_index(p as i32)
                .with_high_watermark(1 << 20);
            match records {
                Some(r) => data.with_records(Some(Bytes::from(r[p].concat()))),
                None => data,
            }
        })
        .collect();
    FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
        .with_topic(TopicName(StrBytes::from_static_str("bench")))
        .with_partitions(parts)])
}

fn fetch_encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("fetch_response_encode");
    for (partitions, chunk_bytes, chunks) in [(1, 16 << 10, 1), (8, 256 << 10, 4)] {
        let records: Vec<Vec<Bytes>> = (0..partitions)
            .map(|_| {
                (0..chunks)
                    .map(|_| Bytes::from(vec![7u8; chunk_bytes]))
                    .collect()
            })
            .collect();
        let total = (partitions * chunks * chunk_bytes) as u64;
        let label = format!("{partitions}p_x_{chunks}x{}KiB", chunk_bytes >> 10);
        group.throughput(Throughput::Bytes(total));
        group.bench_function(BenchmarkId::new("vectored", &label), |b| {
            b.iter(|| {
                let response = fetch_response(partitions, None);
                black_box(
                    encode_fetch_response_vectored(1, 12, response, &records).expect("encodes"),
                )
            })
        });
        let plain = ResponseKind::Fetch(fetch_response(partitions, Some(&records)));
        group.bench_function(BenchmarkId::new("plain_copying", &label), |b| {
            b.iter(|| {
                let mut out = BytesMut::new();
                encode_response(&mut out, 1, ApiKey::Fetch, 12, &plain).expect("encodes");
                black_box(out)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, produce_decode, fetch_encode);
criterion_main!(benches);
