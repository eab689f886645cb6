//! A topic removed from the metadata log disappears from every broker's disk: each shard
//! watches the topic registry (which mirrors the log) and deletes the partitions it owns of
//! topics that are gone, or that were recreated under the same name with a new id.
//!
//! The watch starts from the registry as it was on disk before this start's first mirror, so a
//! topic deleted while this node was down is deleted here too once the node catches up.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{select, Either};
use rill_engine::io::Storage;

use crate::partition::ops::PartitionOp;
use crate::partition::table::PartitionTable;
use crate::routing::owner_shard;
use crate::shutdown::ShutdownSignal;
use crate::topics::{TopicMeta, TopicRegistry};

/// How often a shard compares the registry with what it last saw.
const POLL: Duration = Duration::from_millis(100);

/// Delete this shard's partitions of removed topics until shutdown.
pub async fn follow<S: Storage + 'static>(
    table: Rc<PartitionTable<S>>,
    registry: Arc<TopicRegistry>,
    mut known: BTreeMap<String, Arc<TopicMeta>>,
    (shard, shards): (usize, usize),
    shutdown: Rc<ShutdownSignal>,
) {
    loop {
        let tick = select(
            Box::pin(glommio::timer::sleep(POLL)),
            Box::pin(shutdown.wait()),
        )
        .await;
        if matches!(tick, Either::Right(_)) {
            return;
        }
        let now: BTreeMap<String, Arc<TopicMeta>> = registry.list().into_iter().collect();
        for (name, old) in &known {
            if now.get(name).is_some_and(|m| m.id == old.id) {
                continue;
            }
            for partition in 0..old.partitions {
                if owner_shard(name, partition, shards) != shard {
                    continue;
                }
                let reply = table.call(name, partition, PartitionOp::Delete).await;
                if reply.error_code() != rill_types::ErrorCode::None {
                    tracing::error!(topic = %name, partition, code = ?reply.error_code(), "deleting a removed topic's partition failed");
                }
            }
            tracing::info!(topic = %name, shard, "deleted a topic the metadata log removed");
        }
        known = now;
    }
}
