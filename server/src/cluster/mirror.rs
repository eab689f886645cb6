//! The topic registry of a cluster node is a mirror of the metadata image: the same topics, ids,
//! partition counts and configs, and the cluster's id. Everything that reads the registry on a
//! single node (the partition table, Fetch by topic id, DescribeConfigs) then works unchanged in
//! a cluster, and nothing writes it but this mirror. Internal topics (`__consumer_offsets`) stay
//! out of it, hidden from clients as on a single node.

use std::collections::BTreeMap;
use std::sync::Arc;

use rill_metadata::image::MetadataImage;

use crate::topics::{TopicError, TopicMeta, TopicRegistry};

/// Make `registry` match `image` (one durable write, and only when something differs).
pub fn mirror(registry: &TopicRegistry, image: &MetadataImage) -> Result<bool, TopicError> {
    let topics: BTreeMap<String, Arc<TopicMeta>> = image
        .topics
        .values()
        .filter(|t| !t.internal)
        .map(|t| {
            let meta = TopicMeta {
                id: t.id,
                partitions: i32::try_from(t.partitions.len()).expect("partition count fits i32"),
                configs: t.configs.clone(),
            };
            (t.name.clone(), Arc::new(meta))
        })
        .collect();
    // Until the first controller names the cluster, keep the registry's own id.
    let cluster_id = image
        .cluster_id
        .clone()
        .unwrap_or_else(|| registry.cluster_id());
    registry.mirror(&cluster_id, topics)
}
