//! rill-server: the `rill` broker — glommio executors, one per core, each owning a share of the
//! partitions, answering Kafka clients.
//!
//! Map:
//! - [`cli`], [`config`]: flags and Kafka-style properties, resolved into [`config::BrokerConfig`].
//! - [`topics`]: durable topic metadata (names, partition counts, configs, ids, producer ids).
//! - [`routing`]: which shard owns a partition.
pub mod cli;
pub mod config;
pub mod routing;
pub mod topics;
pub mod partition;
pub mod topic_config;
pub mod handler;
