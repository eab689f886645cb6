//! A follower's fetchers, as Kafka's ReplicaFetcherThread: on each shard, one task per leader
//! that this shard follows partitions of, pulling all of them with one follower Fetch (v12:
//! `replica_id`, each partition's current leader epoch and last fetched epoch) per round over
//! one connection, and handing each partition's answer to its actor: batches to append, a
//! diverging epoch to cut the log at (KIP-320), or the leader's log start to start again at
//! when the log ends below it. A partition joins with [`follow`] and leaves when its actor
//! stops following this leader at this epoch (`stop`) or the actor is gone; a fetcher left
//! with no partition ends. (One task and connection per partition cost a 3-node cluster of 200
//! three-replica partitions ~9% of a core per node at idle, against 1% for 6 partitions.)

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::channel::local::{mpsc, oneshot};
use futures::future::join_all;
use futures::SinkExt;
use rill_metadata::types::NodeId;
use rill_protocol::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use rill_protocol::kafka_protocol::messages::fetch_response::PartitionData;
use rill_protocol::kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, Offset, PartitionIndex, TopicPartition};

use super::wire::LeaderLink;
use crate::cluster::view::ClusterView;
use crate::partition::actor::ActorMsg;
use crate::partition::ops::{PartitionOp, PartitionReply};

/// How long the leader may park a fetch with nothing new.
const FETCH_WAIT_MS: i32 = 500;
/// Bytes asked per partition, and per fetch (the leader always sends the first partition with
/// data whole; the order rotates every round so none starves behind a busy one).
const FETCH_BYTES_MAX: i32 = 8 << 20;
/// Pause after a failed connection or an error answer.
const BACKOFF: Duration = Duration::from_millis(100);

/// What a follower's partition needs fetched.
pub struct FetcherSetup {
    /// Where the leader's address comes from.
    pub view: Arc<ClusterView>,
    /// The partition actor.
    pub mailbox: mpsc::Sender<ActorMsg>,
    /// The partition.
    pub tp: TopicPartition,
    /// The leader epoch this partition follows.
    pub epoch: LeaderEpoch,
    /// The leader.
    pub leader: NodeId,
    /// Set by the actor when it stops following this leader at this epoch.
    pub stop: Rc<Cell<bool>>,
}

thread_local! {
    /// This shard's fetchers, by leader.
    static FETCHERS: RefCell<HashMap<NodeId, Rc<Fetcher>>> = RefCell::new(HashMap::new());
}

/// The partitions one fetcher pulls from its leader.
struct Fetcher {
    partitions: RefCell<Vec<Rc<Followed>>>,
}

/// One followed partition.
struct Followed {
    setup: FetcherSetup,
    /// Left out of fetches until then (an error answer, a failed apply).
    paused_until: Cell<Option<Instant>>,
    /// The leader's high watermark and log start last applied: an answer without records that
    /// repeats them would change nothing, so it is not sent to the actor.
    applied: Cell<Option<(i64, i64)>>,
}

impl Followed {
    fn pause(&self) {
        self.paused_until.set(Some(Instant::now() + BACKOFF));
    }
}

/// Starts fetching a partition for its actor: it joins this shard's fetcher for its leader
/// (started if there is none).
pub fn follow(setup: FetcherSetup) {
    let (leader, view) = (setup.leader, setup.view.clone());
    let followed = Rc::new(Followed {
        setup,
        paused_until: Cell::new(None),
        applied: Cell::new(None),
    });
    let started = FETCHERS.with(|fetchers| {
        let mut fetchers = fetchers.borrow_mut();
        if let Some(fetcher) = fetchers.get(&leader) {
            let same = |p: &Rc<Followed>| p.setup.tp == followed.setup.tp;
            let mut partitions = fetcher.partitions.borrow_mut();
            partitions.retain(|p| !same(p));
            partitions.push(followed.clone());
            // Twice in one fetch, a partition would be answered twice from the same log end.
            assert!(
                partitions.iter().filter(|p| same(p)).count() == 1,
                "a fetcher pulls each partition once"
            );
            return None;
        }
        let fetcher = Rc::new(Fetcher {
            partitions: RefCell::new(vec![followed]),
        });
        fetchers.insert(leader, fetcher.clone());
        Some(fetcher)
    });
    if let Some(fetcher) = started {
        glommio::spawn_local(run(leader, view, fetcher)).detach();
    }
}

async fn ask(mut mailbox: mpsc::Sender<ActorMsg>, op: PartitionOp) -> Option<PartitionReply> {
    let (reply, answer) = oneshot::channel();
    mailbox
        .send(ActorMsg {
            op,
            queued: std::time::Instant::now(),
            reply,
        })
        .await
        .ok()?;
    answer.await.ok()
}

/// A partition in this round's fetch: where its log ends and the epoch of its last batch.
type Asked = (Rc<Followed>, Offset, Option<LeaderEpoch>);

/// Fetch from `leader` until no partition is left.
async fn run(leader: NodeId, view: Arc<ClusterView>, fetcher: Rc<Fetcher>) {
    let me = view.node_id();
    let mut link: Option<LeaderLink> = None;
    // Whether the leader's unreachability was told at warn level since the last connection:
    // once per outage, so a wrong inter-broker login or certificate is seen, not repeated.
    let mut told = false;
    let mut round = 0usize;
    loop {
        let Some(due) = due_partitions(leader, &fetcher) else {
            return;
        };
        if due.is_empty() {
            glommio::timer::sleep(BACKOFF).await;
            continue;
        }
        let mut asked = positions(due).await;
        if asked.is_empty() {
            continue;
        }
        if link.is_none() {
            let Some(endpoint) = view.endpoint(leader) else {
                glommio::timer::sleep(BACKOFF).await;
                continue;
            };
            match LeaderLink::connect(view.peer_client(), &endpoint, me.0).await {
                Ok(connected) => {
                    link = Some(connected);
                    told = false;
                }
                Err(e) => {
                    if !told {
                        tracing::warn!(leader = leader.0, error = %e, "cannot reach the leader");
                        told = true;
                    }
                    glommio::timer::sleep(BACKOFF).await;
                    continue;
                }
            }
        }
        round = round.wrapping_add(1);
        let turn = round % asked.len();
        asked.rotate_left(turn);
        let request = fetch_request(me, view.replica_secret(), &asked);
        let fetched = match link.as_mut() {
            Some(l) => l.fetch(&request).await,
            None => continue,
        };
        match fetched {
            Ok(response) => apply(asked, response).await,
            Err(e) => {
                tracing::debug!(leader = leader.0, error = %e, "fetch from the leader failed");
                link = None;
                glommio::timer::sleep(BACKOFF).await;
            }
        }
    }
}

/// The partitions to fetch now (stopped ones leave); `None` once none is left, and the fetcher
/// is gone from this shard's map (a later [`follow`] starts another).
fn due_partitions(leader: NodeId, fetcher: &Rc<Fetcher>) -> Option<Vec<Rc<Followed>>> {
    let mut partitions = fetcher.partitions.borrow_mut();
    partitions.retain(|p| !p.setup.stop.get());
    debug_assert!(
        partitions.iter().all(|p| p.setup.leader == leader),
        "a fetcher pulls only partitions that follow its leader"
    );
    if partitions.is_empty() {
        FETCHERS.with(|fetchers| {
            let mut fetchers = fetchers.borrow_mut();
            if fetchers
                .get(&leader)
                .is_some_and(|f| Rc::ptr_eq(f, fetcher))
            {
                fetchers.remove(&leader);
            }
        });
        return None;
    }
    let now = Instant::now();
    let due = partitions
        .iter()
        .filter(|p| p.paused_until.get().is_none_or(|t| t <= now));
    Some(due.cloned().collect())
}

/// Each partition's log end and last epoch, from its actor (a gone actor stops it).
async fn positions(due: Vec<Rc<Followed>>) -> Vec<Asked> {
    let asks = due
        .iter()
        .map(|p| ask(p.setup.mailbox.clone(), PartitionOp::FollowerPosition));
    let answers = join_all(asks).await;
    let mut asked = Vec::with_capacity(due.len());
    for (p, answer) in due.into_iter().zip(answers) {
        match answer {
            Some(PartitionReply::FollowerPosition {
                log_end,
                last_epoch,
            }) => asked.push((p, log_end, last_epoch)),
            Some(_) => p.pause(),
            None => p.setup.stop.set(true),
        }
    }
    asked
}

/// Hands each partition's answer to its actor, all at once.
async fn apply(asked: Vec<Asked>, response: FetchResponse) {
    let mut answers: HashMap<TopicPartition, PartitionData> = HashMap::new();
    for topic in response.responses {
        let name = topic.topic.0.to_string();
        for p in topic.partitions {
            answers.insert(
                TopicPartition::new(name.clone(), PartitionIndex(p.partition_index)),
                p,
            );
        }
    }
    let applies = asked.into_iter().filter_map(|(p, log_end, _)| {
        if p.setup.stop.get() {
            return None;
        }
        let Some(op) = answers.remove(&p.setup.tp).and_then(|a| next_op(p.setup.epoch, log_end, a)) else {
            p.pause();
            return None;
        };
        let applied = match &op {
            PartitionOp::ReplicaAppend {
                records,
                leader_high_watermark,
                leader_log_start,
                ..
            } => {
                let positions = (leader_high_watermark.0, leader_log_start.0);
                if records.is_empty() && p.applied.get() == Some(positions) {
                    return None;
                }
                Some(positions)
            }
            _ => None,
        };
        Some(async move {
            let (topic, partition) = (&p.setup.tp.topic, p.setup.tp.partition.0);
            match ask(p.setup.mailbox.clone(), op).await {
                Some(PartitionReply::ReplicaAppended) => p.applied.set(applied),
                Some(other) => {
                    tracing::debug!(topic, partition, code = ?other.error_code(), "applying a fetch failed");
                    p.applied.set(None);
                    p.pause();
                }
                None => p.setup.stop.set(true),
            }
        })
    });
    join_all(applies).await;
}

/// What the actor must do with the leader's answer to a fetch from `log_end`: append, cut a
/// divergent tail, or start again at the leader's log start (OFFSET_OUT_OF_RANGE below it, as
/// Kafka's ReplicaFetcherThread); `None` for another error answer (retried after a pause; a
/// change of leader stops this fetcher).
fn next_op(epoch: LeaderEpoch, log_end: Offset, answer: PartitionData) -> Option<PartitionOp> {
    let code = ErrorCode::try_from(answer.error_code);
    if code == Ok(ErrorCode::OffsetOutOfRange) && answer.log_start_offset > log_end.0 {
        return Some(PartitionOp::ResetToLeaderStart {
            epoch,
            leader_log_start: Offset(answer.log_start_offset),
        });
    }
    if answer.error_code != 0 {
        tracing::debug!(?code, "the leader refused a fetch");
        return None;
    }
    let diverging = answer.diverging_epoch;
    Some(if diverging.epoch >= 0 || diverging.end_offset >= 0 {
        PartitionOp::Truncate {
            epoch,
            diverging_epoch: LeaderEpoch(diverging.epoch),
            end_offset: Offset(diverging.end_offset.max(0)),
        }
    } else {
        PartitionOp::ReplicaAppend {
            epoch,
            records: answer.records.unwrap_or_default(),
            leader_high_watermark: Offset(answer.high_watermark.max(0)),
            leader_log_start: Offset(answer.log_start_offset.max(0)),
        }
    })
}

/// One follower Fetch for every asked partition, grouped by topic in the asked order.
fn fetch_request(me: NodeId, secret: uuid::Uuid, asked: &[Asked]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (p, log_end, last_epoch) in asked {
        debug_assert!(
            log_end.0 >= 0,
            "a follower fetches from its log end, an offset"
        );
        let partition = FetchPartition::default()
            .with_partition(p.setup.tp.partition.0)
            .with_current_leader_epoch(p.setup.epoch.0)
            .with_fetch_offset(log_end.0)
            .with_last_fetched_epoch(last_epoch.map_or(-1, |e| e.0))
            .with_log_start_offset(-1)
            .with_partition_max_bytes(FETCH_BYTES_MAX);
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == p.setup.tp.topic => t.partitions.push(partition),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(crate::broker::topic_name(&p.setup.tp.topic))
                    .with_partitions(vec![partition]),
            ),
        }
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(me.0))
        .with_max_wait_ms(FETCH_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_BYTES_MAX)
        .with_isolation_level(0)
        .with_topics(topics)
        .with_unknown_tagged_field(
            super::wire::REPLICA_SECRET_TAG,
            bytes::Bytes::copy_from_slice(secret.as_bytes()),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    fn answer(error: ErrorCode, log_start: i64) -> PartitionData {
        PartitionData::default()
            .with_error_code(error.code())
            .with_log_start_offset(log_start)
    }

    #[test]
    fn out_of_range_below_the_leaders_log_start_resets_there_and_otherwise_waits() {
        let epoch = LeaderEpoch(3);
        let reset = next_op(epoch, Offset(30), answer(ErrorCode::OffsetOutOfRange, 125));
        assert!(
            matches!(
                reset,
                Some(PartitionOp::ResetToLeaderStart {
                    epoch: LeaderEpoch(3),
                    leader_log_start: Offset(125)
                })
            ),
            "{reset:?}"
        );
        // Out of range without a log start past this log's end: retried, never reset.
        for log_start in [-1, 0, 30] {
            let answer = answer(ErrorCode::OffsetOutOfRange, log_start);
            assert!(next_op(epoch, Offset(30), answer).is_none(), "{log_start}");
        }
        let answer = answer(ErrorCode::NotLeaderOrFollower, 125);
        assert!(next_op(epoch, Offset(30), answer).is_none());
    }
}
