//! A follower's fetcher: one task per followed partition on its owning shard, pulling from the
//! leader with Kafka's follower Fetch (v12: `replica_id`, the current leader epoch, the last
//! fetched epoch) and handing what it gets to the partition actor: batches to append, a
//! diverging epoch to cut the log at (KIP-320), or the leader's log start to start again at
//! when the log ends below it. It ends when the actor stops following this
//! leader at this epoch (`stop`) or the actor is gone.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::{mpsc, oneshot};
use futures::SinkExt;
use rill_metadata::types::NodeId;
use rill_protocol::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use rill_protocol::kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse};
use rill_protocol::ErrorCode;
use rill_types::{LeaderEpoch, Offset};

use super::wire::LeaderLink;
use crate::cluster::ClusterView;
use crate::partition::actor::ActorMsg;
use crate::partition::ops::{PartitionOp, PartitionReply};

/// How long the leader may park a fetch with nothing new.
const FETCH_WAIT_MS: i32 = 500;
/// Bytes asked per fetch.
const FETCH_BYTES_MAX: i32 = 8 << 20;
/// Pause after a failed connection or an error answer.
const BACKOFF: Duration = Duration::from_millis(100);

/// What a fetcher needs.
pub struct FetcherSetup {
    /// Where the leader's address comes from.
    pub view: Arc<ClusterView>,
    /// The partition actor.
    pub mailbox: mpsc::Sender<ActorMsg>,
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The leader epoch this fetcher follows.
    pub epoch: LeaderEpoch,
    /// The leader.
    pub leader: NodeId,
    /// Set by the actor when it stops following this leader at this epoch.
    pub stop: Rc<Cell<bool>>,
}

async fn ask(mailbox: &mut mpsc::Sender<ActorMsg>, op: PartitionOp) -> Option<PartitionReply> {
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

/// Fetch until stopped.
pub async fn run(mut setup: FetcherSetup) {
    let (topic, partition) = (setup.topic.clone(), setup.partition);
    let me = setup.view.node_id();
    let mut link: Option<LeaderLink> = None;
    while !setup.stop.get() {
        let Some(PartitionReply::FollowerPosition {
            log_end,
            last_epoch,
        }) = ask(&mut setup.mailbox, PartitionOp::FollowerPosition).await
        else {
            return; // the actor is gone
        };
        if link.is_none() {
            let Some(endpoint) = setup.view.endpoint(setup.leader) else {
                glommio::timer::sleep(BACKOFF).await;
                continue;
            };
            let addr = format!("{}:{}", endpoint.host, endpoint.port);
            match LeaderLink::connect(&addr, me.0).await {
                Ok(connected) => link = Some(connected),
                Err(e) => {
                    tracing::debug!(topic, partition, %addr, error = %e, "cannot reach the leader");
                    glommio::timer::sleep(BACKOFF).await;
                    continue;
                }
            }
        }
        let request = fetch_request(&setup, me, log_end, last_epoch);
        let fetched = match link.as_mut() {
            Some(l) => l.fetch(&request).await,
            None => continue,
        };
        if setup.stop.get() {
            return;
        }
        let response = match fetched {
            Ok(response) => response,
            Err(e) => {
                tracing::debug!(topic, partition, error = %e, "fetch from the leader failed");
                link = None;
                glommio::timer::sleep(BACKOFF).await;
                continue;
            }
        };
        let Some(op) = next_op(setup.epoch, log_end, response) else {
            glommio::timer::sleep(BACKOFF).await;
            continue;
        };
        match ask(&mut setup.mailbox, op).await {
            Some(PartitionReply::ReplicaAppended) => {}
            Some(other) => {
                tracing::debug!(topic, partition, code = ?other.error_code(), "applying a fetch failed");
                glommio::timer::sleep(BACKOFF).await;
            }
            None => return,
        }
    }
}

/// What the actor must do with the leader's answer to a fetch from `log_end`: append, cut a
/// divergent tail, or start again at the leader's log start (OFFSET_OUT_OF_RANGE below it, as
/// Kafka's ReplicaFetcherThread); `None` for another error answer (retried after a pause; a
/// change of leader stops this fetcher).
fn next_op(epoch: LeaderEpoch, log_end: Offset, response: FetchResponse) -> Option<PartitionOp> {
    let answer = response
        .responses
        .into_iter()
        .next()
        .and_then(|t| t.partitions.into_iter().next())?;
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

fn fetch_request(
    setup: &FetcherSetup,
    me: NodeId,
    log_end: Offset,
    last_epoch: Option<LeaderEpoch>,
) -> FetchRequest {
    let partition = FetchPartition::default()
        .with_partition(setup.partition)
        .with_current_leader_epoch(setup.epoch.0)
        .with_fetch_offset(log_end.0)
        .with_last_fetched_epoch(last_epoch.map_or(-1, |e| e.0))
        .with_log_start_offset(-1)
        .with_partition_max_bytes(FETCH_BYTES_MAX);
    FetchRequest::default()
        .with_replica_id(BrokerId(me.0))
        .with_max_wait_ms(FETCH_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_BYTES_MAX)
        .with_isolation_level(0)
        .with_topics(vec![FetchTopic::default()
            .with_topic(crate::handler::topic_name(&setup.topic))
            .with_partitions(vec![partition])])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_protocol::kafka_protocol::messages::fetch_response::{
        FetchableTopicResponse, PartitionData,
    };

    fn answer(error: ErrorCode, log_start: i64) -> FetchResponse {
        let partition = PartitionData::default()
            .with_error_code(error.code())
            .with_log_start_offset(log_start);
        FetchResponse::default().with_responses(vec![
            FetchableTopicResponse::default().with_partitions(vec![partition])
        ])
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
