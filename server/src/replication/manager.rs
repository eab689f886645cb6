//! Opens, on each shard, the replicated partitions this broker holds a replica of: partitions
//! open on first use, and nothing else would use a follower's. Once open, the partition actor
//! follows its role (`crate::partition::actor`), so a follower starts fetching and a replica
//! that becomes leader is ready.

use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use rill_engine::io::Storage;
use rill_types::{PartitionIndex, TopicPartition, TopicPartitionRef};

use crate::cluster::view::ClusterView;
use crate::partition::ops::PartitionOp;
use crate::partition::table::PartitionTable;
use crate::shard::owner::owner_shard;
use crate::shutdown::ShutdownSignal;

/// How often a shard looks for replicas to open.
const POLL: Duration = Duration::from_millis(200);

/// Until shutdown: open this shard's replicas of replicated partitions as the image names them.
pub async fn open_followed<S: Storage + 'static>(
    table: Rc<PartitionTable<S>>,
    view: Arc<ClusterView>,
    (shard, shards): (usize, usize),
    shutdown: Rc<ShutdownSignal>,
) {
    let me = view.node_id();
    let mut opened: BTreeSet<TopicPartition> = BTreeSet::new();
    loop {
        if !shutdown.sleep(POLL).await {
            return;
        }
        let image = view.image();
        let mut held = BTreeSet::new();
        for (name, topic) in &image.topics {
            for (index, state) in topic.partitions.iter().enumerate() {
                let tp = TopicPartitionRef::new(name, PartitionIndex(index as i32));
                let mine = state.replicas.len() > 1
                    && state.replicas.contains(&me)
                    && owner_shard(tp, shards) == shard;
                if mine {
                    held.insert(tp.owned());
                }
            }
        }
        for tp in held.difference(&opened) {
            // Any op opens it; the actor then takes its role from the image.
            let reply = table.call(tp.borrowed(), PartitionOp::Offsets).await;
            if !reply.error_code().is_ok() {
                let (name, partition) = (&tp.topic, tp.partition.0);
                tracing::debug!(topic = %name, partition, code = ?reply.error_code(), "opening a replica failed; retrying");
            }
        }
        opened = held;
    }
}
