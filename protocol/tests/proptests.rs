//! Property tests: round trips through the codec and the record view, and "never panics" on
//! arbitrary and mutated input.

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use rill_protocol::api_registry::ENTRIES;
use rill_protocol::fetch_encoder::encode_fetch_response_vectored;
use rill_protocol::frame::frame_len;
use rill_protocol::kafka_protocol::indexmap::IndexMap;
use rill_protocol::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, PartitionData,
};
use rill_protocol::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use rill_protocol::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use rill_protocol::kafka_protocol::messages::{
    ApiKey, FetchResponse, MetadataRequest, ProduceRequest, RequestKind, ResponseKind, TopicName,
};
use rill_protocol::kafka_protocol::protocol::StrBytes;
use rill_protocol::kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType,
};
use rill_protocol::record::{batches, RecordBatchView, RecordIter};
use rill_protocol::request::{decode_request, Request};
use rill_protocol::response::encode_response;

fn frame(api_key: ApiKey, version: i16, correlation_id: i32, body: &RequestKind) -> Bytes {
    Request::new(api_key, version, correlation_id, "proptest", body.clone())
        .encode()
        .unwrap()
        .freeze()
}

type RecordSpec = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
    i64,
);

fn record_spec() -> impl Strategy<Value = RecordSpec> {
    (
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)),
        proptest::collection::vec(
            (
                "[a-z]{1,8}",
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..10)),
            ),
            0..3,
        ),
        0i64..100_000,
    )
}

fn codec() -> impl Strategy<Value = KpCompression> {
    prop_oneof![
        Just(KpCompression::None),
        Just(KpCompression::Gzip),
        Just(KpCompression::Snappy),
        Just(KpCompression::Lz4),
        Just(KpCompression::Zstd),
    ]
}

fn encode_batch(specs: &[RecordSpec], compression: KpCompression) -> BytesMut {
    let records: Vec<KpRecord> = specs
        .iter()
        .enumerate()
        .map(|(i, (key, value, headers, ts))| {
            let mut map = IndexMap::new();
            for (k, v) in headers {
                map.insert(StrBytes::from_string(k.clone()), v.clone().map(Bytes::from));
            }
            KpRecord {
                transactional: false,
                control: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                sequence: -1,
                timestamp: 1_700_000_000_000 + ts,
                key: key.clone().map(Bytes::from),
                value: value.clone().map(Bytes::from),
                headers: map,
                delete_horizon: false,
            }
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .unwrap();
    buf
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn frame_len_never_panics_and_is_consistent(buf in proptest::collection::vec(any::<u8>(), 0..64), max in 0usize..100) {
        if let Ok(Some(n)) = frame_len(&buf, max) {
            prop_assert!(n <= buf.len());
            prop_assert_eq!(n - 4, i32::from_be_bytes(buf[..4].try_into().unwrap()) as usize);
        }
    }

    #[test]
    fn decode_request_never_panics_on_arbitrary_bodies(
        entry in 0..ENTRIES.len(),
        version in 0i16..20,
        body in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut raw = BytesMut::new();
        raw.extend_from_slice(&(ENTRIES[entry].api_key as i16).to_be_bytes());
        raw.extend_from_slice(&version.to_be_bytes());
        raw.extend_from_slice(&1i32.to_be_bytes());
        raw.extend_from_slice(&body);
        let _ = decode_request(raw.freeze());
    }

    #[test]
    fn metadata_request_round_trip(
        version in 0i16..=12,
        names in proptest::collection::vec("[a-zA-Z0-9._-]{1,40}", 0..20),
        correlation_id in any::<i32>(),
    ) {
        let topics = names.into_iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(n)))))
            .collect();
        let mut request = MetadataRequest::default().with_topics(Some(topics));
        if version >= 4 {
            request = request.with_allow_auto_topic_creation(true);
        }
        let body = RequestKind::Metadata(request);
        let decoded = decode_request(frame(ApiKey::Metadata, version, correlation_id, &body)).unwrap();
        prop_assert_eq!(decoded.correlation_id, correlation_id);
        prop_assert_eq!(decoded.body, body);
    }

    #[test]
    fn produce_request_round_trip_and_batches_validate(
        version in 3i16..=11,
        specs in proptest::collection::vec(record_spec(), 1..20),
        compression in codec(),
        partitions in 1usize..5,
    ) {
        let batch = encode_batch(&specs, compression).freeze();
        let partition_data = (0..partitions)
            .map(|p| PartitionProduceData::default().with_index(p as i32).with_records(Some(batch.clone())))
            .collect();
        let topic = TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_data(partition_data);
        let body = RequestKind::Produce(ProduceRequest::default().with_acks(-1).with_timeout_ms(30_000).with_topic_data(vec![topic]));
        let decoded = decode_request(frame(ApiKey::Produce, version, 3, &body)).unwrap();
        prop_assert_eq!(&decoded.body, &body);
        let RequestKind::Produce(produce) = decoded.body else { unreachable!() };
        for p in &produce.topic_data[0].partition_data {
            let mut count = 0;
            for view in batches(p.records.clone().unwrap()) {
                let view = view.unwrap();
                count += view.record_count() as usize;
                view.validate_records(1 << 24).unwrap();
            }
            prop_assert_eq!(count, specs.len());
        }
    }

    #[test]
    fn record_view_reads_what_kafka_protocol_wrote(specs in proptest::collection::vec(record_spec(), 1..30)) {
        // The encoder may split the records over several batches (it starts a new one when
        // timestamps run backwards), so read every batch in the blob.
        let blob = encode_batch(&specs, KpCompression::None).freeze();
        let views: Vec<RecordBatchView<Bytes>> = batches(blob).collect::<Result<_, _>>().unwrap();
        let mut records = Vec::new();
        for view in &views {
            for r in view.records().unwrap() {
                let r = r.unwrap();
                records.push((view.base_offset().0 + i64::from(r.offset_delta), view.base_timestamp().0 + r.timestamp_delta, r));
            }
        }
        prop_assert_eq!(records.len(), specs.len());
        for (i, ((offset, timestamp, r), (key, value, headers, ts))) in records.iter().zip(&specs).enumerate() {
            prop_assert_eq!(*offset, i as i64);
            prop_assert_eq!(r.key, key.as_deref());
            prop_assert_eq!(r.value, value.as_deref());
            prop_assert_eq!(*timestamp, 1_700_000_000_000 + ts);
            // kafka_protocol stores headers in an IndexMap: duplicate keys collapse to the last.
            prop_assert!(r.headers.len() <= headers.len());
        }
    }

    #[test]
    fn mutated_batches_never_panic(
        specs in proptest::collection::vec(record_spec(), 1..10),
        compression in codec(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut buf = encode_batch(&specs, compression).to_vec();
        for (at, xor) in flips {
            let i = at.index(buf.len());
            buf[i] ^= xor;
        }
        let cut = cut.index(buf.len() + 1);
        for view in batches(Bytes::copy_from_slice(&buf[..cut])).flatten() {
            let _ = view.validate_records(1 << 20);
        }
        let _ = RecordIter::new(&buf[61.min(buf.len())..], 3).count();
    }

    #[test]
    fn vectored_fetch_matches_plain_encoder(
        version in 4i16..=12,
        sizes in proptest::collection::vec(proptest::collection::vec(0usize..3000, 0..4), 0..12),
    ) {
        let records: Vec<Vec<Bytes>> = sizes.iter()
            .map(|chunks| chunks.iter().map(|&n| Bytes::from(vec![n as u8; n])).collect())
            .collect();
        let partitions = |with_records: bool| -> Vec<PartitionData> {
            records.iter().enumerate().map(|(i, chunks)| {
                let p = PartitionData::default().with_partition_index(i as i32).with_high_watermark(i as i64);
                if with_records { p.with_records(Some(Bytes::from(chunks.concat()))) } else { p }
            }).collect()
        };
        let response = |with_records: bool| FetchResponse::default().with_responses(vec![
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(partitions(with_records)),
        ]);
        let mut plain = BytesMut::new();
        encode_response(&mut plain, 9, ApiKey::Fetch, version, &ResponseKind::Fetch(response(true))).unwrap();
        let parts = encode_fetch_response_vectored(9, version, response(false), &records).unwrap();
        prop_assert_eq!(parts.concat(), plain.to_vec());
    }
}
