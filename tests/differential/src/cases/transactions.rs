//! Transactions: a whole commit and abort at every client version of each transactional API,
//! then the invalid transitions (end without begin, a fenced epoch, produce before
//! AddPartitionsToTxn, an unknown transactional id) and the describe/list APIs.

use std::time::Duration;

use rill_protocol::kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use rill_protocol::kafka_protocol::messages::describe_producers_request::TopicRequest;
use rill_protocol::kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use rill_protocol::kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use rill_protocol::kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, ApiKey, DescribeProducersRequest,
    DescribeTransactionsRequest, EndTxnRequest, FindCoordinatorRequest, GroupId,
    InitProducerIdRequest, ListTransactionsRequest, RequestKind, TransactionalId,
    WriteTxnMarkersRequest,
};

use super::producers::save_producer;
use super::{create_topic, produce_request, sb, tn, Case};
use crate::cases::produce_fetch::fetch_request;
use crate::pair::{Pair, Side};
use crate::records::{batch, BatchSpec};

pub const CASES: &[Case] = &[
    ("transaction_commit_abort", commit_abort),
    ("transaction_invalid_transitions", invalid_transitions),
    ("transaction_fenced", fenced),
    ("transaction_describe", describe),
    ("transaction_broker_apis", broker_apis),
];

/// How long a coordinator may take to write its markers after EndTxn.
const MARKERS_SETTLE: Duration = Duration::from_millis(300);

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(sb(id))
}

fn find_and_init(pair: &mut Pair, id: &str, version: i16) -> anyhow::Result<()> {
    let find = FindCoordinatorRequest::default()
        .with_key(sb(id))
        .with_key_type(1);
    pair.both(2, |_| RequestKind::FindCoordinator(find.clone()))?;
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(60_000);
    let answers = pair.both(version, |_| RequestKind::InitProducerId(init.clone()))?;
    save_producer(pair, &answers);
    Ok(())
}

fn add_partitions(side: &Side, id: &str, topic: &str, epoch_delta: i16) -> RequestKind {
    RequestKind::AddPartitionsToTxn(
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(txn_id(id))
            .with_v3_and_below_producer_id(side.int("pid", -1).into())
            .with_v3_and_below_producer_epoch(side.int("epoch", -1) as i16 + epoch_delta)
            .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(tn(topic))
                .with_partitions(vec![0])]),
    )
}

fn txn_produce(side: &Side, topic: &str, seq: i32) -> RequestKind {
    let spec = BatchSpec {
        producer_id: side.int("pid", -1),
        producer_epoch: side.int("epoch", -1) as i16,
        base_sequence: seq,
        transactional: true,
        ..BatchSpec::default()
    };
    let mut request = produce_request(topic, 0, batch(&[b"t1", b"t2"], spec), -1);
    request.transactional_id = Some(txn_id(&side.get("txn", "")));
    RequestKind::Produce(request)
}

fn end_txn(side: &Side, id: &str, commit: bool) -> RequestKind {
    RequestKind::EndTxn(
        EndTxnRequest::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(side.int("pid", -1).into())
            .with_producer_epoch(side.int("epoch", -1) as i16)
            .with_committed(commit),
    )
}

fn offsets_to_txn(side: &Side, id: &str, group: &str) -> RequestKind {
    RequestKind::AddOffsetsToTxn(
        AddOffsetsToTxnRequest::default()
            .with_transactional_id(txn_id(id))
            .with_producer_id(side.int("pid", -1).into())
            .with_producer_epoch(side.int("epoch", -1) as i16)
            .with_group_id(GroupId(sb(group))),
    )
}

fn txn_offset_commit(side: &Side, id: &str, group: &str, topic: &str, version: i16) -> RequestKind {
    let mut r = rill_protocol::kafka_protocol::messages::TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(id))
        .with_group_id(GroupId(sb(group)))
        .with_producer_id(side.int("pid", -1).into())
        .with_producer_epoch(side.int("epoch", -1) as i16)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(tn(topic))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(1)
                .with_committed_metadata(Some(sb("m")))])]);
    if version >= 3 {
        r = r.with_generation_id(-1).with_member_id(sb(""));
    }
    RequestKind::TxnOffsetCommit(r)
}

fn commit_abort(pair: &mut Pair) -> anyhow::Result<()> {
    let topic = "kd-txn";
    create_topic(pair, topic, 1, &[])?;
    let add_versions: Vec<i16> = pair
        .versions(ApiKey::AddPartitionsToTxn)
        .filter(|v| *v <= 3)
        .collect();
    let end_versions: Vec<i16> = pair.versions(ApiKey::EndTxn).collect();
    let offsets_versions: Vec<i16> = pair.versions(ApiKey::AddOffsetsToTxn).collect();
    let commit_versions: Vec<i16> = pair.versions(ApiKey::TxnOffsetCommit).collect();
    let init_versions: Vec<i16> = pair.versions(ApiKey::InitProducerId).collect();
    // As many rounds as the API with the most versions has, so every version of each is used
    // once (the shorter lists repeat their newest).
    let rounds = [
        &add_versions,
        &end_versions,
        &offsets_versions,
        &commit_versions,
        &init_versions,
    ]
    .iter()
    .map(|l| l.len())
    .max()
    .unwrap_or(0);
    for round in 0..rounds {
        let id = format!("kd-txn-{round}");
        let pick = |list: &[i16]| list[round.min(list.len() - 1)];
        let add_version = pick(&add_versions);
        for side in [&mut pair.kafka, &mut pair.rill] {
            side.state.insert("txn".into(), id.clone());
        }
        find_and_init(pair, &id, pick(&init_versions))?;
        for (commit, seq) in [(true, 0), (false, 2)] {
            pair.both(add_version, |s| add_partitions(s, &id, topic, 0))?;
            pair.both(9, |s| txn_produce(s, topic, seq))?;
            let group = format!("kd-txn-group-{round}");
            pair.both(pick(&offsets_versions), |s| offsets_to_txn(s, &id, &group))?;
            let v = pick(&commit_versions);
            pair.both(v, |s| txn_offset_commit(s, &id, &group, topic, v))?;
            pair.both(pick(&end_versions), |s| end_txn(s, &id, commit))?;
            std::thread::sleep(MARKERS_SETTLE);
        }
    }
    for isolation in [0, 1] {
        let mut request = fetch_request(topic, 0, 0, 11);
        request.isolation_level = isolation;
        pair.both(11, |_| RequestKind::Fetch(request.clone()))?;
    }
    Ok(())
}

fn invalid_transitions(pair: &mut Pair) -> anyhow::Result<()> {
    let topic = "kd-txn-invalid";
    let id = "kd-txn-invalid";
    create_topic(pair, topic, 1, &[])?;
    for side in [&mut pair.kafka, &mut pair.rill] {
        side.state.insert("txn".into(), id.into());
    }
    find_and_init(pair, id, 3)?;
    for version in [0, 3] {
        pair.both(version, |s| end_txn(s, id, true))?; // nothing begun
        pair.both(version, |s| end_txn(s, id, false))?;
    }
    pair.both(9, |s| txn_produce(s, topic, 0))?; // before AddPartitionsToTxn
    pair.both(3, |s| add_partitions(s, id, "kd-txn-invalid-missing", 0))?;
    pair.both(3, |s| add_partitions(s, id, topic, 0))?;
    pair.both(3, |s| end_txn(s, id, true))?; // commit with nothing produced
    std::thread::sleep(MARKERS_SETTLE);
    // An id that never called InitProducerId.
    let unknown = "kd-txn-never-initialised";
    pair.both(3, |s| add_partitions(s, unknown, topic, 0))?;
    pair.both(3, |s| end_txn(s, unknown, true))?;
    // A transactional produce with no transactional id at all on the request.
    pair.both(9, |s| {
        let RequestKind::Produce(mut p) = txn_produce(s, topic, 0) else {
            unreachable!()
        };
        p.transactional_id = None;
        RequestKind::Produce(p)
    })?;
    Ok(())
}

fn fenced(pair: &mut Pair) -> anyhow::Result<()> {
    let topic = "kd-txn-fenced";
    let id = "kd-txn-fenced";
    create_topic(pair, topic, 1, &[])?;
    for side in [&mut pair.kafka, &mut pair.rill] {
        side.state.insert("txn".into(), id.into());
    }
    find_and_init(pair, id, 3)?;
    pair.both(3, |s| add_partitions(s, id, topic, 0))?;
    pair.both(9, |s| txn_produce(s, topic, 0))?;
    // A second producer with the same id: the first is fenced (its transaction aborted).
    let old: Vec<i64> = [&pair.kafka, &pair.rill]
        .iter()
        .map(|s| s.int("epoch", -1))
        .collect();
    find_and_init(pair, id, 3)?;
    std::thread::sleep(MARKERS_SETTLE);
    find_and_init(pair, id, 3)?;
    for (side, epoch) in [&mut pair.kafka, &mut pair.rill].into_iter().zip(old) {
        side.state.insert("epoch".into(), epoch.to_string());
    }
    for version in [0, 2, 3] {
        pair.both(version, |s| add_partitions(s, id, topic, 0))?;
    }
    pair.both(9, |s| txn_produce(s, topic, 2))?;
    for version in [0, 3] {
        pair.both(version, |s| end_txn(s, id, true))?;
    }
    Ok(())
}

fn describe(pair: &mut Pair) -> anyhow::Result<()> {
    let topic = "kd-txn-describe";
    let id = "kd-txn-describe";
    create_topic(pair, topic, 1, &[])?;
    for side in [&mut pair.kafka, &mut pair.rill] {
        side.state.insert("txn".into(), id.into());
    }
    find_and_init(pair, id, 3)?;
    pair.both(3, |s| add_partitions(s, id, topic, 0))?;
    pair.both(9, |s| txn_produce(s, topic, 0))?;
    let ids = vec![txn_id(id), txn_id("kd-txn-describe-missing")];
    for version in pair.versions(ApiKey::DescribeTransactions) {
        let request = DescribeTransactionsRequest::default().with_transactional_ids(ids.clone());
        pair.both(version, |_| {
            RequestKind::DescribeTransactions(request.clone())
        })?;
    }
    for version in pair.versions(ApiKey::ListTransactions) {
        for states in [vec![], vec![sb("Ongoing")], vec![sb("Bogus")]] {
            let mut request = ListTransactionsRequest::default().with_state_filters(states);
            if version >= 1 {
                request = request.with_duration_filter(-1);
            }
            pair.both(version, |_| RequestKind::ListTransactions(request.clone()))?;
        }
    }
    for version in pair.versions(ApiKey::DescribeProducers) {
        let request = DescribeProducersRequest::default().with_topics(vec![
            TopicRequest::default()
                .with_name(tn(topic))
                .with_partition_indexes(vec![0, 5]),
            TopicRequest::default()
                .with_name(tn("kd-txn-describe-missing"))
                .with_partition_indexes(vec![0]),
        ]);
        pair.both(version, |_| RequestKind::DescribeProducers(request.clone()))?;
    }
    pair.both(3, |s| end_txn(s, id, false))?;
    std::thread::sleep(MARKERS_SETTLE);
    Ok(())
}

/// The brokers' own transactional APIs, as a partition leader sends them (no authorizer: any
/// client may): AddPartitionsToTxn v4+ batched verification (KIP-890), a partition in the
/// transaction, one not, an unknown transactional id; then WriteTxnMarkers, an abort marker
/// for the open transaction's partition and one of an unknown topic.
fn broker_apis(pair: &mut Pair) -> anyhow::Result<()> {
    let topic = "kd-txn-broker";
    let id = "kd-txn-broker";
    create_topic(pair, topic, 2, &[])?;
    for side in [&mut pair.kafka, &mut pair.rill] {
        side.state.insert("txn".into(), id.into());
    }
    find_and_init(pair, id, 3)?;
    pair.both(3, |s| add_partitions(s, id, topic, 0))?;
    pair.both(9, |s| txn_produce(s, topic, 0))?;
    let verify = |side: &Side, txn: &str| {
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(txn_id(txn))
            .with_producer_id(side.int("pid", -1).into())
            .with_producer_epoch(side.int("epoch", -1) as i16)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(tn(topic))
                .with_partitions(vec![0, 1])])
    };
    let batched: Vec<i16> = pair
        .versions(ApiKey::AddPartitionsToTxn)
        .filter(|v| *v >= 4)
        .collect();
    for version in batched {
        pair.both(version, |s| {
            RequestKind::AddPartitionsToTxn(
                AddPartitionsToTxnRequest::default()
                    .with_transactions(vec![verify(s, id), verify(s, "kd-txn-broker-missing")]),
            )
        })?;
    }
    for version in pair.versions(ApiKey::WriteTxnMarkers) {
        pair.both(version, |s| {
            let marker = WritableTxnMarker::default()
                .with_producer_id(s.int("pid", -1).into())
                .with_producer_epoch(s.int("epoch", -1) as i16)
                .with_transaction_result(false)
                .with_coordinator_epoch(0)
                .with_topics(vec![
                    WritableTxnMarkerTopic::default()
                        .with_name(tn(topic))
                        .with_partition_indexes(vec![0]),
                    WritableTxnMarkerTopic::default()
                        .with_name(tn("kd-txn-broker-missing"))
                        .with_partition_indexes(vec![0]),
                ]);
            RequestKind::WriteTxnMarkers(
                WriteTxnMarkersRequest::default().with_markers(vec![marker]),
            )
        })?;
    }
    Ok(())
}
