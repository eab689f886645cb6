//! Replication of partition data between brokers (issue 14), Kafka's ISR protocol (KIP-101,
//! KIP-279, KIP-320, KIP-497) over the metadata the controller decides (`crate::cluster`).
//!
//! A partition with more than one replica is *replicated*. Who leads, at which leader epoch,
//! and the ISR come from the metadata image; the partition actor on the owning shard follows
//! them ([`role`]):
//! - **Leader**: appends are stamped with its leader epoch; followers pull with Kafka's
//!   follower Fetch (a `replica_id`); the leader notes each follower's log end from its fetch
//!   offset ([`leader`]); the high watermark is the least of the leader's durable offset and
//!   the ISR followers' log ends; acks=all is answered once the high watermark passes the
//!   batch (every ISR member holds it) and the ISR has `min.insync.replicas` members. The ISR
//!   shrinks when a follower has not caught up for `replica.lag.time.max.ms` and grows when a
//!   follower reaches the high watermark, through the controller's AlterPartition.
//! - **Follower**: the shard's fetcher for its leader ([`fetcher`], one per leader, pulling
//!   every partition this shard follows from it in one Fetch) pulls, the actor appends the
//!   batches at the leader's offsets and flushes them before fetching again, and takes the
//!   leader's high watermark. The offset it reports is what it made durable under the default
//!   flush policy, and a failed log reports nothing ([`follower::fetch_position`]). A Fetch answered with a diverging epoch (KIP-320) cuts the divergent tail
//!   (`PartitionLog::truncate_to`) and reopens the log. One answered OFFSET_OUT_OF_RANGE
//!   because the leader's log starts past this log's end (DeleteRecords or retention there
//!   while this replica was away) empties the log to start at the leader's log start
//!   (`PartitionLog::truncate_fully_and_start_at`, Kafka's truncateFullyAndStartAt).
//!
//! [`manager`] opens, on each shard, the partitions this broker follows (nothing else would:
//! partitions open on first use) so their actors start fetching.

pub mod fetcher;
pub mod follower;
pub mod leader;
pub mod manager;
pub mod role;
pub mod wire;
