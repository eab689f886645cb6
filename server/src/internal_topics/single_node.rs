//! A single node's internal topics, read-only: `__consumer_offsets` and `__transaction_state`
//! as the coordinators' private logs (`crate::group::journal`, `crate::txn::journal`) hold them.
//!
//! Kafka lets any consumer read its internal topics (`kcat -C -t __consumer_offsets`): Metadata
//! lists them with `is_internal`, ListOffsets and Fetch serve them, and only the coordinators
//! write them (a client's Produce gets INVALID_TOPIC_EXCEPTION, "Cannot append to internal
//! topic"). A cluster keeps them as replicated partitions (`crate::internal_topics::replicated`); a single
//! node keeps each partition's log inside its coordinator on the shard that owns the partition,
//! and the shard's partition table serves reads of it (`crate::partition::internal`, which
//! reads the engine log each coordinator's log gives as a [`PrivateLog`]): the same routing
//! as any partition, without a partition actor.

use std::sync::Arc;

use futures::lock::Mutex;
use rill_engine::io::Storage;
use rill_engine::PartitionLog;
use uuid::Uuid;

use crate::group::journal::OffsetsLog;
use crate::partition::internal::PrivateLog;
use crate::topics::TopicMeta;
use crate::txn::journal::TxnPartitionLog;

/// Topic ids of a single node's internal topics: fixed, as the logs behind them are (Kafka
/// draws one when it creates the topic; here the topics exist from the first start).
const OFFSETS_TOPIC_ID: Uuid = Uuid::from_u128(0x5f5f_636f_6e73_756d_6572_5f6f_6666_7365);
const TXN_TOPIC_ID: Uuid = Uuid::from_u128(0x5f5f_7472_616e_7361_6374_696f_6e5f_7374);

/// A single node's internal topic `name`, if it is one.
pub fn topic(name: &str) -> Option<Arc<TopicMeta>> {
    let (id, partitions, configs) = match name {
        crate::group::OFFSETS_TOPIC => (
            OFFSETS_TOPIC_ID,
            crate::group::OFFSETS_PARTITIONS,
            crate::internal_topics::offsets_topic_configs(),
        ),
        crate::txn::TXN_TOPIC => (
            TXN_TOPIC_ID,
            crate::txn::TXN_PARTITIONS,
            crate::internal_topics::txn_topic_configs(1),
        ),
        _ => return None,
    };
    Some(Arc::new(TopicMeta {
        id,
        partitions,
        configs,
    }))
}

/// A single node's internal topics, each as [`topic`] gives it.
pub fn topics() -> Vec<(String, Arc<TopicMeta>)> {
    [crate::group::OFFSETS_TOPIC, crate::txn::TXN_TOPIC]
        .into_iter()
        .filter_map(|name| topic(name).map(|meta| (name.to_string(), meta)))
        .collect()
}

impl<S: Storage> PrivateLog<S> for OffsetsLog<S> {
    fn engine_log(&self) -> &Mutex<Option<PartitionLog<S>>> {
        OffsetsLog::engine_log(self)
    }
}

impl<S: Storage> PrivateLog<S> for TxnPartitionLog<S> {
    fn engine_log(&self) -> &Mutex<Option<PartitionLog<S>>> {
        TxnPartitionLog::engine_log(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_node_has_both_internal_topics_with_fixed_ids_and_compacted() {
        let listed = topics();
        let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["__consumer_offsets", "__transaction_state"]);
        for (name, meta) in &listed {
            assert!(crate::internal_topics::is_internal(name));
            assert_eq!(meta.partitions, 8);
            assert!(!meta.id.is_nil());
            assert_eq!(topic(name).unwrap().id, meta.id, "stable across calls");
            let policy = meta.configs.get("cleanup.policy").map(String::as_str);
            assert_eq!(policy, Some("compact"));
        }
        assert_ne!(listed[0].1.id, listed[1].1.id);
        assert!(topic("orders").is_none());
    }
}
