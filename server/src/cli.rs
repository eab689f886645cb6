//! Command-line flags of the `rill` binary (issue 4 fixes their names; tests and benches use them).
//!
//! Every flag is optional so that [`crate::config::BrokerConfig::resolve`] can tell "not given"
//! (the config file or the default applies) from "given" (the flag wins).

use std::path::PathBuf;

use clap::Parser;

pub use crate::build_info::VERSION;

/// `rill [--listen HOST:PORT] [--advertise HOST:PORT] [--data-dir DIR] [--shards N]
/// [--default-partitions N] [--auto-create-topics true|false] [--admin-listen HOST:PORT|off]
/// [--config FILE]`, or `rill dump-log ...` / `rill check ...` (see [`crate::tools`]).
#[derive(Debug, Clone, Parser)]
#[command(
    name = "rill",
    version = VERSION,
    about = "Rill: a thread-per-core Kafka-compatible broker",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// A tool to run instead of the broker (`rill` alone runs the broker).
    #[command(subcommand)]
    pub command: Option<crate::tools::Command>,
    /// Address to listen on [default: 127.0.0.1:9092].
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// Address clients are told to connect to [default: the listen address].
    #[arg(long, value_name = "HOST:PORT")]
    pub advertise: Option<String>,
    /// Directory holding partition logs and broker metadata [default: ./rill-data].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Number of shards (executors, one per core) [default: all cores].
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// Partitions of an auto-created topic (Kafka's num.partitions) [default: 1].
    #[arg(long, value_name = "N")]
    pub default_partitions: Option<i32>,
    /// Create unknown topics on Metadata/Produce [default: true].
    #[arg(long, value_name = "true|false")]
    pub auto_create_topics: Option<bool>,
    /// Kafka-style .properties file (num.partitions, log.segment.bytes, ...); flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// glommio io_memory per shard in bytes (RLIMIT_MEMLOCK bounds it) [default: 2 MiB].
    #[arg(long, value_name = "BYTES")]
    pub io_memory_bytes: Option<usize>,
    /// Admin HTTP listener (/metrics, /health/live, /health/ready, /v1/status, /), or `off`
    /// [default: 127.0.0.1:9644].
    #[arg(long, value_name = "HOST:PORT|off")]
    pub admin_listen: Option<String>,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty consumer
    /// group waits for more members [default: 3000].
    #[arg(long, value_name = "MS")]
    pub group_initial_rebalance_delay_ms: Option<i64>,
    /// `node.id`: this node's id in the cluster [default: 0].
    #[arg(long, value_name = "ID")]
    pub node_id: Option<i32>,
    /// `process.roles`: broker, controller, or broker,controller (needs --controller-quorum).
    #[arg(long, value_name = "ROLES")]
    pub process_roles: Option<String>,
    /// `controller.quorum.voters`: the metadata quorum, `id@host:port,...`.
    #[arg(long, value_name = "VOTERS")]
    pub controller_quorum: Option<String>,
    /// This controller's listener address (the `listeners` entry `controller.listener.names`
    /// names).
    #[arg(long, value_name = "HOST:PORT")]
    pub controller_listen: Option<String>,
    /// `broker.session.timeout.ms`: a broker without a heartbeat this long is fenced [9000].
    #[arg(long, value_name = "MS")]
    pub broker_session_timeout_ms: Option<u64>,
    /// `broker.heartbeat.interval.ms` [2000].
    #[arg(long, value_name = "MS")]
    pub broker_heartbeat_interval_ms: Option<u64>,
    /// `controller.quorum.election.timeout.ms` [1000].
    #[arg(long, value_name = "MS")]
    pub controller_quorum_election_timeout_ms: Option<u64>,
    /// `default.replication.factor`: replicas of a topic created without a factor [1].
    #[arg(long, value_name = "N")]
    pub default_replication_factor: Option<u16>,
    /// `min.insync.replicas` [1].
    #[arg(long, value_name = "N")]
    pub min_insync_replicas: Option<u16>,
    /// `offsets.topic.replication.factor`: replicas of `__consumer_offsets` [3].
    #[arg(long, value_name = "N")]
    pub offsets_topic_replication_factor: Option<u16>,
    /// `transaction.state.log.replication.factor`: replicas of `__transaction_state` [3].
    #[arg(long, value_name = "N")]
    pub transaction_state_log_replication_factor: Option<u16>,
}

impl Cli {
    /// The cluster flags, for [`crate::cluster::config::ClusterSettings::apply_flags`].
    pub fn cluster_flags(&self) -> crate::cluster::config::ClusterFlags {
        crate::cluster::config::ClusterFlags {
            process_roles: self.process_roles.clone(),
            voters: self.controller_quorum.clone(),
            controller_listen: self.controller_listen.clone(),
            session_timeout_ms: self.broker_session_timeout_ms,
            heartbeat_interval_ms: self.broker_heartbeat_interval_ms,
            election_timeout_ms: self.controller_quorum_election_timeout_ms,
            default_replication_factor: self.default_replication_factor,
            min_insync_replicas: self.min_insync_replicas,
            offsets_replication_factor: self.offsets_topic_replication_factor,
            txn_replication_factor: self.transaction_state_log_replication_factor,
        }
    }
}
