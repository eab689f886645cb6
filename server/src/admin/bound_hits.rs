//! The resource bounds of issue 26, each named by its property, and how often each bit:
//! `rill_bound_hits_total{bound="<property>"}` on `/metrics`.
//!
//! | bound                          | one hit is                                                  |
//! |--------------------------------|-------------------------------------------------------------|
//! | `max.connections`              | an accepted connection held until a slot freed              |
//! | `max.connections.per.ip`       | a connection closed at once: its address had its maximum    |
//! | `connections.max.idle.ms`      | an idle connection closed                                   |
//! | `queued.max.request.bytes`     | a request frame that waited for memory before being read    |
//! | `fetch.max.bytes`              | a Fetch whose partitions were cut to the response limit     |
//! | `rill.shard.fetch.bytes.max`   | a Fetch read that waited for the shard's budget             |
//! | `group.max.size`               | a JoinGroup answered GROUP_MAX_SIZE_REACHED                 |
//! | `rill.shard.groups.max`        | a request that would create a group refused                 |
//! | `producer.id.expiration.ms`    | an idle producer's state dropped by a partition             |
//! | `rill.partition.producers.max` | a producer's state evicted to make room in a partition      |
//! | `transactional.id.expiration.ms` | an idle transactional id forgotten                        |
//! | `rill.shard.transactional.ids.max` | a new transactional id past the maximum (an idle one forgotten for it, or it refused) |
//!
//! Hits are rare by nature (a bound biting), so each shard counts them straight into atomics of
//! its own [`super::state::ShardStats`]: no flush, nothing on the hot path while nothing bites.

use std::sync::atomic::{AtomicU64, Ordering};

/// One bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// `max.connections`.
    MaxConnections,
    /// `max.connections.per.ip` (or its override for the address).
    MaxConnectionsPerIp,
    /// `connections.max.idle.ms`.
    ConnectionsMaxIdle,
    /// `queued.max.request.bytes`.
    QueuedRequestBytes,
    /// `fetch.max.bytes`.
    FetchMaxBytes,
    /// `rill.shard.fetch.bytes.max`.
    ShardFetchBytes,
    /// `group.max.size`.
    GroupMaxSize,
    /// `rill.shard.groups.max`.
    ShardGroups,
    /// `producer.id.expiration.ms`.
    ProducerIdExpiration,
    /// `rill.partition.producers.max`.
    PartitionProducers,
    /// `transactional.id.expiration.ms`.
    TransactionalIdExpiration,
    /// `rill.shard.transactional.ids.max`.
    ShardTransactionalIds,
}

impl Bound {
    /// Every bound, in declaration order.
    pub const ALL: [Bound; 12] = [
        Bound::MaxConnections,
        Bound::MaxConnectionsPerIp,
        Bound::ConnectionsMaxIdle,
        Bound::QueuedRequestBytes,
        Bound::FetchMaxBytes,
        Bound::ShardFetchBytes,
        Bound::GroupMaxSize,
        Bound::ShardGroups,
        Bound::ProducerIdExpiration,
        Bound::PartitionProducers,
        Bound::TransactionalIdExpiration,
        Bound::ShardTransactionalIds,
    ];

    /// Its property name (the metric label).
    pub fn property(self) -> &'static str {
        match self {
            Bound::MaxConnections => "max.connections",
            Bound::MaxConnectionsPerIp => "max.connections.per.ip",
            Bound::ConnectionsMaxIdle => "connections.max.idle.ms",
            Bound::QueuedRequestBytes => "queued.max.request.bytes",
            Bound::FetchMaxBytes => "fetch.max.bytes",
            Bound::ShardFetchBytes => "rill.shard.fetch.bytes.max",
            Bound::GroupMaxSize => "group.max.size",
            Bound::ShardGroups => "rill.shard.groups.max",
            Bound::ProducerIdExpiration => "producer.id.expiration.ms",
            Bound::PartitionProducers => "rill.partition.producers.max",
            Bound::TransactionalIdExpiration => "transactional.id.expiration.ms",
            Bound::ShardTransactionalIds => "rill.shard.transactional.ids.max",
        }
    }
}

/// One shard's hit counts, by bound.
#[derive(Debug, Default)]
pub struct BoundHits([AtomicU64; Bound::ALL.len()]);

impl BoundHits {
    /// `bound` bit `n` times.
    pub fn add(&self, bound: Bound, n: u64) {
        self.0[bound as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Hits of `bound` since start.
    pub fn get(&self, bound: Bound) -> u64 {
        self.0[bound as usize].load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bound_has_its_own_slot_and_name() {
        let hits = BoundHits::default();
        for (i, bound) in Bound::ALL.iter().enumerate() {
            assert_eq!(*bound as usize, i, "ALL is in declaration order");
            hits.add(*bound, i as u64 + 1);
        }
        for (i, bound) in Bound::ALL.iter().enumerate() {
            assert_eq!(hits.get(*bound), i as u64 + 1);
        }
        let mut names: Vec<_> = Bound::ALL.iter().map(|b| b.property()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Bound::ALL.len());
    }
}
