//! Produce and Fetch at every version, and their error paths: unknown topic and partition, bad
//! acks, a corrupt batch, offsets out of range, leader epochs that do not match.

use bytes::Bytes;
use rill_protocol::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use rill_protocol::kafka_protocol::messages::{ApiKey, FetchRequest, RequestKind};
use rill_protocol::kafka_protocol::records::Compression;

use super::{create_topic, produce_quiet, produce_request, tn, Case};
use crate::pair::Pair;
use crate::records::{batch, BatchSpec};

pub const CASES: &[Case] = &[
    ("produce_each_version", produce_each_version),
    ("produce_compressed", produce_compressed),
    ("produce_errors", produce_errors),
    ("fetch_each_version", fetch_each_version),
    ("fetch_errors", fetch_errors),
    ("fetch_limits", fetch_limits),
];

fn produce_each_version(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-produce", 1, &[])?;
    for version in pair.versions(ApiKey::Produce).filter(|v| *v >= 3) {
        for acks in [-1, 1] {
            let records = batch(&[b"a", b"bb", b"ccc"], BatchSpec::default());
            let request = produce_request("kd-produce", 0, records, acks);
            pair.both(version, |_| RequestKind::Produce(request.clone()))?;
        }
    }
    let records = batch(&[b"zero"], BatchSpec::default());
    let request = produce_request("kd-produce", 0, records, 0);
    pair.both(7, |_| RequestKind::Produce(request.clone()))?;
    Ok(())
}

fn produce_compressed(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-compressed", 1, &[])?;
    for compression in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let spec = BatchSpec {
            compression,
            ..BatchSpec::default()
        };
        let values: Vec<Vec<u8>> = (0..20).map(|i| vec![b'x'; 100 + i]).collect();
        let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
        let request = produce_request("kd-compressed", 0, batch(&refs, spec), -1);
        pair.both(9, |_| RequestKind::Produce(request.clone()))?;
    }
    fetch_all(pair, "kd-compressed", 0, 11)
}

fn produce_errors(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-produce-errors", 1, &[])?;
    let good = batch(&[b"v"], BatchSpec::default());
    let cases: Vec<(&str, i32, Bytes, i16)> = vec![
        ("kd-produce-unknown", 0, good.clone(), -1),
        ("kd-produce-errors", 7, good.clone(), -1),
        ("kd-produce-errors", 0, good.clone(), 2),
        ("kd-produce-errors", 0, corrupt(&good), -1),
        ("kd-produce-errors", 0, Bytes::from_static(&[0u8; 30]), -1),
    ];
    for version in [3, 8, 11] {
        for (topic, partition, records, acks) in &cases {
            let request = produce_request(topic, *partition, records.clone(), *acks);
            pair.both(version, |_| RequestKind::Produce(request.clone()))?;
        }
    }
    Ok(())
}

/// `good` with one byte of its records flipped: the CRC no longer matches.
fn corrupt(good: &Bytes) -> Bytes {
    let mut bytes = good.to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    Bytes::from(bytes)
}

/// A Fetch of one partition from `offset`.
pub fn fetch_request(topic: &str, partition: i32, offset: i64, version: i16) -> FetchRequest {
    let mut p = FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20);
    if version >= 5 {
        p = p.with_log_start_offset(-1);
    }
    FetchRequest::default()
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(tn(topic))
            .with_partitions(vec![p])])
}

fn fetch_all(pair: &mut Pair, topic: &str, partition: i32, version: i16) -> anyhow::Result<()> {
    let request = fetch_request(topic, partition, 0, version);
    pair.both(version, |_| RequestKind::Fetch(request.clone()))?;
    Ok(())
}

fn fetch_each_version(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-fetch", 1, &[])?;
    for _ in 0..3 {
        produce_quiet(pair, "kd-fetch", 0, 4)?;
    }
    for version in pair.versions(ApiKey::Fetch) {
        for offset in [0, 5, 12] {
            let mut request = fetch_request("kd-fetch", 0, offset, version);
            request.isolation_level = i8::from(version >= 4 && offset == 5);
            pair.both(version, |_| RequestKind::Fetch(request.clone()))?;
        }
    }
    Ok(())
}

fn fetch_errors(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-fetch-errors", 1, &[])?;
    produce_quiet(pair, "kd-fetch-errors", 0, 2)?;
    for version in pair.versions(ApiKey::Fetch) {
        let cases = [
            fetch_request("kd-fetch-missing", 0, 0, version),
            fetch_request("kd-fetch-errors", 3, 0, version),
            fetch_request("kd-fetch-errors", 0, 100, version),
            fetch_request("kd-fetch-errors", 0, -5, version),
        ];
        for request in cases {
            pair.both(version, |_| RequestKind::Fetch(request.clone()))?;
        }
        if version >= 9 {
            for epoch in [0, 7] {
                let mut request = fetch_request("kd-fetch-errors", 0, 0, version);
                request.topics[0].partitions[0].current_leader_epoch = epoch;
                pair.both(version, |_| RequestKind::Fetch(request.clone()))?;
            }
        }
        if version >= 12 {
            // A consumer that last saw epoch 3 (the log only has 0): diverging epoch.
            let mut request = fetch_request("kd-fetch-errors", 0, 2, version);
            request.topics[0].partitions[0].last_fetched_epoch = 3;
            request.topics[0].partitions[0].current_leader_epoch = 0;
            pair.both(version, |_| RequestKind::Fetch(request.clone()))?;
        }
    }
    Ok(())
}

/// max_bytes and partition_max_bytes smaller than one batch: the first batch comes whole anyway.
fn fetch_limits(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-fetch-limits", 1, &[])?;
    for _ in 0..4 {
        produce_quiet(pair, "kd-fetch-limits", 0, 10)?;
    }
    for (max_bytes, partition_max_bytes) in [(1, 1 << 20), (1 << 20, 1), (200, 200), (1 << 20, 300)]
    {
        let mut request = fetch_request("kd-fetch-limits", 0, 0, 11);
        request.max_bytes = max_bytes;
        request.topics[0].partitions[0].partition_max_bytes = partition_max_bytes;
        pair.both(11, |_| RequestKind::Fetch(request.clone()))?;
    }
    Ok(())
}
