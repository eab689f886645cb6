//! The receiving side of the channel mesh: requests from other shards for partitions this shard
//! owns. Each is served in its own task (so a long poll does not block the stream), bounded by
//! a per-shard permit count: when it is exhausted the stream stops being read and senders wait
//! on the bounded channel (back-pressure instead of unbounded memory).

use std::rc::Rc;

use glommio::channels::shared_channel::ConnectedReceiver;
use glommio::sync::Semaphore;
use rill_engine::io::Storage;

use crate::partition::ops::ShardMsg;
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
            let reply = table.call(&msg.topic, msg.partition, msg.op).await;
            let _ = msg.reply.send(reply);
            drop(permit);
        })
        .detach();
    }
}
