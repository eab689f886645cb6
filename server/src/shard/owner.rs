//! Which shard owns a partition (on this broker; which broker leads it is
//! `crate::cluster::view::ClusterView::check_leader`, and `crate::shard::router` carries a
//! request to the owning shard).
//!
//! Ownership is a pure function of (topic, partition, shard count), so every shard computes the
//! same answer without asking anyone: `crc32c(topic) ^ mix(partition) mod shards`. CRC-32C is
//! stable across Rust releases (unlike `DefaultHasher`) and hardware-accelerated. Consecutive
//! partitions of one topic land on consecutive shards, which spreads a topic evenly.

use rill_types::TopicPartitionRef;

/// The shard that alone touches partition `tp`'s log.
pub fn owner_shard(tp: TopicPartitionRef<'_>, shards: usize) -> usize {
    assert!(shards > 0);
    assert!(tp.partition.0 >= 0);
    let topic_hash = u64::from(crc32c::crc32c(tp.topic.as_bytes()));
    // Adding the partition (rather than hashing it) keeps a topic's partitions round-robin.
    let slot = topic_hash.wrapping_add(tp.partition.0 as u64);
    (slot % shards as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_types::PartitionIndex;

    #[test]
    fn one_shard_owns_everything() {
        for p in 0..100 {
            let tp = TopicPartitionRef::new("t", PartitionIndex(p));
            assert_eq!(owner_shard(tp, 1), 0);
        }
    }

    #[test]
    fn stable_and_in_range() {
        for shards in 1..8 {
            for p in 0..50 {
                let tp = TopicPartitionRef::new("orders", PartitionIndex(p));
                let a = owner_shard(tp, shards);
                assert!(a < shards);
                assert_eq!(a, owner_shard(tp, shards));
            }
        }
    }

    #[test]
    fn partitions_of_one_topic_spread_evenly() {
        let shards = 4;
        let mut counts = [0usize; 4];
        for p in 0..400 {
            counts[owner_shard(TopicPartitionRef::new("events", PartitionIndex(p)), shards)] += 1;
        }
        assert_eq!(counts, [100; 4]);
    }
}
