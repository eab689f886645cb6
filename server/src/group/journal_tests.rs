//! The offsets log on the simulated disk: durable across a crash, compacted, replayed.

use super::*;
use rill_engine::io::sim::{block_on, FaultConfig, ManualClock, SimStorage};
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, Offset, TimestampMs};
use std::path::PathBuf;

fn record(group: &str, partition: i32, offset: Option<i64>) -> OffsetRecord {
    OffsetRecord {
        key: OffsetKey::committed(
            group,
            TopicPartitionRef::new("t", PartitionIndex(partition)),
        ),
        value: offset.map(|offset| CommittedOffset {
            offset: Offset(offset),
            leader_epoch: LeaderEpoch::NONE,
            metadata: Some("m".into()),
            commit_time_ms: TimestampMs(5),
        }),
    }
}

fn sorted(mut live: Vec<(OffsetKey, CommittedOffset)>) -> Vec<(OffsetKey, CommittedOffset)> {
    live.sort_by(|a, b| (&a.0.group, a.0.tp.partition).cmp(&(&b.0.group, b.0.tp.partition)));
    live
}

fn setup() -> (SimStorage, LogManager<SimStorage>, Rc<dyn Clock>) {
    let storage = SimStorage::new(7, FaultConfig::default());
    let manager = LogManager::new(storage.clone(), PathBuf::from("/data/__rill_groups"));
    (
        storage,
        manager,
        Rc::new(ManualClock::new(TimestampMs(1_000))),
    )
}

#[test]
fn acknowledged_commits_survive_a_crash() {
    let (storage, manager, clock) = setup();
    block_on(async {
        let log = OffsetsLog::open(&manager, PartitionIndex(3), clock.clone())
            .await
            .unwrap();
        log.append(vec![record("g", 0, Some(10)), record("g", 1, Some(20))])
            .await
            .unwrap();
        log.append(vec![record("g", 0, Some(11)), record("h", 0, Some(1))])
            .await
            .unwrap();
        log.append(vec![record("h", 0, None)]).await.unwrap();
        let before = sorted(log.live());
        assert_eq!(before.len(), 2);
        storage.crash(); // no close: only what was fdatasync'ed counts
        let reopened = OffsetsLog::open(&manager, PartitionIndex(3), clock.clone())
            .await
            .unwrap();
        assert_eq!(sorted(reopened.live()), before);
        assert_eq!(
            reopened
                .live()
                .iter()
                .find(|(k, _)| k.tp.partition == PartitionIndex(0))
                .unwrap()
                .1
                .offset,
            Offset(11)
        );
    });
}

#[test]
fn compaction_keeps_the_log_bounded_and_every_live_entry() {
    let (_storage, manager, clock) = setup();
    block_on(async {
        let log = OffsetsLog::open(&manager, PartitionIndex(0), clock.clone())
            .await
            .unwrap();
        // About 5 MiB of commits to the same 10 keys, one tombstone among them.
        let rounds = 6 * CLEAN_CHECK_AFTER_RECORDS as i64 / 10;
        for round in 0..rounds {
            let records = (0..10).map(|p| record("g", p, Some(round))).collect();
            log.append(records).await.unwrap();
        }
        log.append(vec![record("g", 9, None)]).await.unwrap();
        let bytes = log.size_bytes().await.unwrap();
        assert!(
            bytes < 2 * OFFSETS_SEGMENT_BYTES + (1 << 20),
            "{bytes} bytes: compaction keeps the offsets log bounded"
        );
        let live = sorted(log.live());
        assert_eq!(live.len(), 9);
        assert!(live.iter().all(|(_, v)| v.offset == Offset(rounds - 1)));
        log.close().await;
        let reopened = OffsetsLog::open(&manager, PartitionIndex(0), clock.clone())
            .await
            .unwrap();
        assert_eq!(sorted(reopened.live()), live, "replay of the compacted log");
    });
}

#[test]
fn the_journal_routes_a_group_to_its_partition() {
    let (_storage, manager, clock) = setup();
    block_on(async {
        let all: Vec<PartitionIndex> =
            PartitionIndex::all(crate::group::OFFSETS_PARTITIONS).collect();
        let journal = LogJournal::open(&manager, &all, clock.clone())
            .await
            .unwrap();
        journal
            .append("orders", vec![record("orders", 0, Some(4))])
            .await
            .unwrap();
        let p = offsets_partition("orders");
        assert_eq!(journal.logs[&p].live().len(), 1);
        journal.close().await;
        let only: Vec<PartitionIndex> = all.into_iter().filter(|q| *q != p).collect();
        let partial = LogJournal::open(&manager, &only, clock).await.unwrap();
        assert!(partial.live().is_empty());
        assert_eq!(
            partial
                .append("orders", vec![record("orders", 0, Some(5))])
                .await,
            Err(ErrorCode::CoordinatorNotAvailable)
        );
    });
}

#[test]
fn memberships_survive_a_crash_beside_the_offsets() {
    use super::super::metadata_record::{encode_group_batch, GroupMetadata};
    let (storage, manager, clock) = setup();
    let group = |generation| GroupMetadata {
        protocol_type: "consumer".to_string(),
        generation,
        protocol_name: Some("range".to_string()),
        leader: None,
        current_state_timestamp_ms: TimestampMs(5),
        members: vec![],
    };
    let consumer_key = bytes::Bytes::from_static(b"\x00\x03\x00\x01g");
    block_on(async {
        let log = OffsetsLog::open(&manager, PartitionIndex(2), clock.clone())
            .await
            .unwrap();
        log.append(vec![record("g", 0, Some(4))]).await.unwrap();
        for generation in [1, 2] {
            let batch = encode_group_batch("g", Some(&group(generation)), TimestampMs(5));
            log.append_membership(batch).await.unwrap();
        }
        log.append_membership(encode_group_batch("gone", Some(&group(1)), TimestampMs(5)))
            .await
            .unwrap();
        log.append_membership(encode_group_batch("gone", None, TimestampMs(6)))
            .await
            .unwrap();
        let consumer = vec![(
            consumer_key.clone(),
            Some(bytes::Bytes::from_static(b"\x00\x00v")),
        )];
        let batch =
            super::super::consumer::records::encode_batch(consumer, TimestampMs(7)).unwrap();
        log.append_membership(batch).await.unwrap();
        assert!(super::super::consumer::records::encode_batch(vec![], TimestampMs(7)).is_none());
        storage.crash(); // no close: only what was fdatasync'ed counts
        let reopened = OffsetsLog::open(&manager, PartitionIndex(2), clock.clone())
            .await
            .unwrap();
        assert_eq!(reopened.live().len(), 1);
        let memberships = reopened.take_memberships();
        assert_eq!(memberships.groups.get("g"), Some(&Some(group(2))));
        assert_eq!(memberships.groups.get("gone"), Some(&None));
        assert_eq!(
            memberships.consumer.get(&consumer_key),
            Some(&Some(bytes::Bytes::from_static(b"\x00\x00v")))
        );
        // Taken once: the coordinator owns them from then on.
        assert!(reopened.take_memberships().groups.is_empty());
    });
}
