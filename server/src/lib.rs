//! rill-server: the `rill` broker — glommio executors, one per core, each owning a share of the
//! partitions, answering Kafka clients.
//!
//! The floors these modules stand on, and the check that keeps imports pointing down them, are
//! in `server/LAYERS.md` (`ops/layering.py`, run by `./test.sh`).
//!
//! Map (a request's path, top to bottom):
//! - [`cli`], [`config`]: flags and Kafka-style properties, resolved into
//!   [`config::settings::BrokerConfig`], the settings every module reads; every other kind of
//!   configuration (per-topic, the broker's dynamic configs, AlterConfigs) is under [`config`] too;
//!   [`build_info`]: the version `--version` and the status page show.
//! - [`cluster`]: the metadata quorum's edge (KRaft properties, controller, broker registration)
//!   and the cluster view handlers answer from; absent on a single node.
//! - [`shard`]: executors per core, the channel mesh between them, startup and shutdown.
//! - [`net`]: accept loop; per-connection pipeline (frames in, responses out in request order).
//! - [`dispatch`]: frame body → handler → response frame (or silence, or close);
//!   [`panic_guard`]: a panic while serving a request is answered, never the shard's end;
//!   [`client_quotas`]: clients' byte rates against their quotas, shared by every shard.
//! - [`broker`]: the [`broker::Broker`] facade handlers and coordinators call, and wire helpers.
//! - [`handler`]: one Kafka API per file, written against that facade.
//! - [`shard::owner`]: which shard owns a partition ([`shard::router`] takes a request there).
//! - [`group`]: consumer-group coordinators (one per shard) and durable committed offsets.
//! - [`internal_topics`]: the names, partition counts and placement of `__consumer_offsets`
//!   and `__transaction_state`, and the two ways they are kept:
//!   [`internal_topics::replicated`], in a cluster, the coordinators' state on a replicated
//!   internal partition (loading on leadership, acks=all writes), shared by
//!   `group::replicated` and `txn::replicated`; [`internal_topics::single_node`], a single
//!   node's, served read-only from the coordinators' private journals (`group::journal`,
//!   `txn::journal`).
//! - [`partition`]: the per-partition actor that alone touches a log (group commit, long poll),
//!   and the shard's open-file budget; [`open_files`]: RLIMIT_NOFILE and each shard's share.
//! - [`topics`], [`config::topic`]: durable topic metadata and per-topic log configs;
//!   [`capacity`]: whether new partitions fit (partition limit, disk) before they are created.
//! - [`compaction`]: the Kafka record codec for the engine's cleaner, and each shard's cleaner.
//! - [`config::broker`], [`config::changes`]: the broker's configs as DescribeConfigs shows them,
//!   and (Incremental)AlterConfigs of topics and brokers, persisted and applied live;
//!   [`produce_rules`]: what a topic's configs require of produced batches (keys, timestamps,
//!   codec, min.insync.replicas).
//! - [`channel`]: in-process channels whose ends cannot carry a waker to another thread.
//! - [`memory_budget`]: a shard's byte budgets (request frames, Fetch reads): reserve before
//!   allocating, wait in order when spent.
//! - [`request_order`]: a connection's request order, kept where concurrent requests must
//!   (transactional Produce's verified appends).
//! - [`shutdown`]: SIGTERM/SIGINT → every shard stops accepting, drains, closes its logs.
//! - [`admin`]: the admin HTTP listener: Prometheus metrics, health checks, status JSON and page.
//! - [`tools`]: `rill dump-log`, `rill check`: offline inspection and repair of a data directory.
//! - [`test_hooks`]: faults the end-to-end tests inject (debug builds only); `test_batches`:
//!   the record batches unit tests write.
//! - [`tiered`]: tiered storage (KIP-405): sealed segments copied to an S3 object store, read back.
pub mod admin;
pub mod broker;
pub mod build_info;
pub mod capacity;
pub mod channel;
pub mod cli;
pub mod client_quotas;
pub mod cluster;
pub mod compaction;
pub mod config;
pub mod data_dir_lock;
pub mod dispatch;
pub mod group;
pub mod handler;
pub mod internal_topics;
pub mod memory_budget;
pub mod net;
pub mod open_files;
pub mod panic_guard;
pub mod partition;
pub mod produce_rules;
pub mod record_fields;
pub mod replication;
pub mod request_order;
pub mod security;
pub mod shard;
pub mod shutdown;
/// Record batches for unit tests (and the fuzz targets' fake broker).
#[cfg(any(test, feature = "fuzzing"))]
pub mod test_batches;
pub mod test_hooks;
pub mod tiered;
pub mod tools;
pub mod topics;
pub mod txn;
