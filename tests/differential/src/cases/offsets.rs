//! ListOffsets, OffsetForLeaderEpoch and DeleteRecords at every version: earliest, latest, by
//! timestamp, max timestamp, leader epochs that do not match, offsets out of range.

use rill_protocol::kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use rill_protocol::kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use rill_protocol::kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use rill_protocol::kafka_protocol::messages::{
    ApiKey, DeleteRecordsRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest, RequestKind,
};

use super::{create_topic, produce_quiet, tn, Case};
use crate::pair::Pair;

pub const CASES: &[Case] = &[
    ("list_offsets", list_offsets),
    ("offset_for_leader_epoch", offset_for_leader_epoch),
    ("delete_records", delete_records),
];

fn list_request(
    topic: &str,
    partition: i32,
    timestamp: i64,
    epoch: i32,
    version: i16,
) -> ListOffsetsRequest {
    let mut p = ListOffsetsPartition::default()
        .with_partition_index(partition)
        .with_timestamp(timestamp);
    if version >= 4 {
        p = p.with_current_leader_epoch(epoch);
    }
    let mut r = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(tn(topic))
            .with_partitions(vec![p])]);
    if version >= 10 {
        r = r.with_timeout_ms(1000);
    }
    r
}

fn list_offsets(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-list-offsets", 2, &[])?;
    for _ in 0..3 {
        produce_quiet(pair, "kd-list-offsets", 0, 3)?;
    }
    for version in pair.versions(ApiKey::ListOffsets) {
        // latest, earliest, max timestamp (v7+), the batches' CreateTime, after it, before it.
        let mut stamps = vec![-1, -2, 1_700_000_000_000, 1_800_000_000_000, 1];
        if version >= 7 {
            stamps.push(-3);
        }
        for timestamp in stamps {
            for partition in [0, 1] {
                let request = list_request("kd-list-offsets", partition, timestamp, -1, version);
                pair.both(version, |_| RequestKind::ListOffsets(request.clone()))?;
            }
        }
        let errors = [
            list_request("kd-list-missing", 0, -1, -1, version),
            list_request("kd-list-offsets", 9, -1, -1, version),
            list_request("kd-list-offsets", 0, -1, 4, version),
            list_request("kd-list-offsets", 0, -7, -1, version),
        ];
        for request in errors {
            pair.both(version, |_| RequestKind::ListOffsets(request.clone()))?;
        }
        let mut committed = list_request("kd-list-offsets", 0, -1, -1, version);
        committed.isolation_level = 1;
        if version >= 2 {
            pair.both(version, |_| RequestKind::ListOffsets(committed.clone()))?;
        }
    }
    Ok(())
}

fn epoch_request(
    topic: &str,
    partition: i32,
    current: i32,
    epoch: i32,
) -> OffsetForLeaderEpochRequest {
    OffsetForLeaderEpochRequest::default().with_topics(vec![OffsetForLeaderTopic::default()
        .with_topic(tn(topic))
        .with_partitions(vec![OffsetForLeaderPartition::default()
            .with_partition(partition)
            .with_current_leader_epoch(current)
            .with_leader_epoch(epoch)])])
}

fn offset_for_leader_epoch(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-epochs", 1, &[])?;
    produce_quiet(pair, "kd-epochs", 0, 5)?;
    for version in pair.versions(ApiKey::OffsetForLeaderEpoch) {
        let cases = [
            epoch_request("kd-epochs", 0, -1, 0),
            epoch_request("kd-epochs", 0, 0, 0),
            epoch_request("kd-epochs", 0, -1, 5),
            epoch_request("kd-epochs", 0, 3, 0),
            epoch_request("kd-epochs", 4, -1, 0),
            epoch_request("kd-epochs-missing", 0, -1, 0),
        ];
        for request in cases {
            pair.both(version, |_| {
                RequestKind::OffsetForLeaderEpoch(request.clone())
            })?;
        }
    }
    Ok(())
}

fn delete_request(topic: &str, partition: i32, offset: i64) -> DeleteRecordsRequest {
    DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(tn(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])])
}

fn delete_records(pair: &mut Pair) -> anyhow::Result<()> {
    create_topic(pair, "kd-delete-records", 1, &[])?;
    for _ in 0..5 {
        produce_quiet(pair, "kd-delete-records", 0, 2)?;
    }
    let mut offset = 0;
    for version in pair.versions(ApiKey::DeleteRecords) {
        offset += 2;
        let cases = [
            delete_request("kd-delete-records", 0, offset),
            delete_request("kd-delete-records", 0, 1),
            delete_request("kd-delete-records", 0, 100),
            delete_request("kd-delete-records", 0, -1),
            delete_request("kd-delete-records", 2, 1),
            delete_request("kd-delete-records-missing", 0, 1),
        ];
        for request in cases {
            pair.both(version, |_| RequestKind::DeleteRecords(request.clone()))?;
        }
        let list = list_request("kd-delete-records", 0, -2, -1, 1);
        pair.both(1, |_| RequestKind::ListOffsets(list.clone()))?;
    }
    Ok(())
}
