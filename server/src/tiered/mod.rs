//! Tiered storage (KIP-405) on one node: sealed segments copied to an S3-compatible object
//! store, local retention deleting only what is copied, and reads below the local log start
//! served from the store.
//!
//! # Map
//! - [`settings`]: `remote.log.storage.system.enable` and `rill.remote.*` (endpoint, bucket,
//!   region, credentials, prefix, concurrency, backoff).
//! - [`store`]: the `object_store` S3 client on its own tokio thread, and the bridge from a
//!   glommio shard to it (its module doc has the thread diagram and why no waker crosses).
//! - [`keys`]: the object key layout.
//! - [`metadata`]: remote log metadata (COPY_STARTED → COPY_FINISHED → DELETE_STARTED →
//!   DELETE_FINISHED, offset and leader-epoch ranges), where it is stored and why.
//! - [`tier`]: one partition's copy/delete jobs, driven by its actor, and its remote reads.
//! - [`pacer`]: the bandwidth bound of a shard's copies.
//! - [`reader`]: ranged GETs of a copied segment guided by its remote offset index.
//! - [`metrics`]: bytes and segments copied, upload lag, remote fetches and errors.
//!
//! # What a tiered partition does
//! A topic with `remote.storage.enable=true` (refused unless the broker sets
//! `remote.log.storage.system.enable=true`, and on compacted topics, as Kafka refuses them):
//! 1. Every `rill.remote.task.interval.ms`, and at once after each copy ends, its actor copies
//!    the oldest sealed segment below the high watermark not yet copied: COPY_STARTED
//!    written, its objects put (`.log`, `.index`, `.timeindex`, `.txnindex` if any, the
//!    producer snapshot and leader-epoch checkpoint as they are at copy time), COPY_FINISHED
//!    written and fsynced. A failed copy is retried with backoff after its objects are deleted.
//! 2. Local retention runs on `local.retention.ms` / `local.retention.bytes` (-2: the value of
//!    `retention.ms` / `retention.bytes`) and deletes a local segment only once its
//!    COPY_FINISHED is durable (the engine's gate, `rill_engine::tiering`).
//! 3. Total retention (`retention.ms` / `retention.bytes`) deletes remote copies, oldest first.
//! 4. A read below the local log start is served from the remote copy holding the offset, in
//!    a task of its own: the actor goes on serving while the GETs run.
//! 5. The partition's log start offset (Fetch, ListOffsets earliest) is the remote tier's first
//!    offset; ListOffsets -4 answers the local log start and -5 the highest copied offset.
//!
//! 6. DeleteRecords moves the remote tier's log start (durably, before it is answered) and the
//!    copies below it are deleted; a deleted topic's objects are deleted in the background.
//!
//! 7. A read_committed read from the remote tier lists the aborted transactions of the remote
//!    copies' `.txnindex` objects from the copy read on, then the local log's.
//!
//! `rill check --remote-config` compares the bucket with the metadata (`crate::tools::check_remote`).
//!
//! Not done yet: a cluster's replicas sharing the metadata.

pub mod keys;
pub mod metadata;
pub mod metrics;
pub mod pacer;
pub mod reader;
pub mod settings;
pub mod store;
pub mod tier;
