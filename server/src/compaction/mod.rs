//! Compaction in the broker (`cleanup.policy=compact`): the engine's cleaner
//! (`rill_engine::cleaner`) given Kafka's record format, and one cleaner per shard.
//!
//! - [`record_codec`]: [`KafkaRecords`], the v2 record format from `rill-protocol`, which the
//!   engine needs to read keys and rebuild batches.
//! - [`shard_cleaner`]: [`ShardCleaner`], at most one clean at a time per shard, in a task
//!   queue of its own, its I/O paced; the partition actor plans cleans and swaps the results in.
pub mod record_codec;
pub mod settings;
pub mod shard_cleaner;

pub use record_codec::KafkaRecords;
pub use settings::CleanerSettings;
pub use shard_cleaner::{CleanEvent, ShardCleaner};
