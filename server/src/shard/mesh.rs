//! The receiving side of the channel mesh: requests from other shards for partitions this shard
//! owns. Each is served in its own task (so a long poll does not block the stream), bounded by
//! a per-shard permit count: when it is exhausted the stream stops being read and senders wait
//! on the bounded channel (back-pressure instead of unbounded memory).

use std::rc::Rc;

use glommio::channels::shared_channel::ConnectedReceiver;
use glommio::sync::Semaphore;
use rill_engine::io::Storage;

use futures::future::{select, Either};

use crate::partition::ops::{PartitionOp, ShardMsg};
use crate::partition::table::PartitionTable;

/// Cross-shard requests one shard serves concurrently.
pub const REMOTE_REQUESTS_MAX: u64 = 4096;

/// Serve one peer's stream until the peer closes it.
pub async fn serve_peer<S: Storage + 'static>(
    receiver: ConnectedReceiver<ShardMsg>,
    table: Rc<PartitionTable<S>>,
    permits: Rc<Semaphore>,
) {
    while let Some(msg) = receiver.recv().await {
        let Ok(permit) = permits.acquire_static_permit(1).await else {
            break;
        };
        let table = table.clone();
        glommio::spawn_local(async move {
            serve_one(&table, msg).await;
            drop(permit);
        })
        .detach();
    }
}

/// Serve one request. A long-poll wait is abandoned as soon as its asker stops listening (the
/// fetch completed through another partition), so parked waits do not pile up; other operations
/// always run to completion once received.
async fn serve_one<S: Storage + 'static>(table: &PartitionTable<S>, msg: ShardMsg) {
    let ShardMsg {
        topic,
        partition,
        op,
        mut reply,
    } = msg;
    let is_wait = matches!(op, PartitionOp::WaitForData { .. });
    let call = table.call(&topic, partition, op);
    let answer = if is_wait {
        let cancelled = reply.cancellation();
        futures::pin_mut!(call, cancelled);
        match select(call, cancelled).await {
            Either::Left((answer, _)) => Some(answer),
            Either::Right(_) => None,
        }
    } else {
        Some(call.await)
    };
    if let Some(answer) = answer {
        let _ = reply.send(answer);
    }
}
