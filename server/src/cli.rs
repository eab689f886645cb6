//! Command-line flags of the `rill` binary (issue 4 fixes their names; tests and benches use them).
//!
//! Every flag is optional so that [`BrokerConfig::resolve`] (here: the flags are applied over the
//! file's settings) can tell "not given" (the config file or the default applies) from "given"
//! (the flag wins).

use std::path::PathBuf;

use clap::Parser;

use crate::config::settings::{BrokerConfig, ConfigError};
use crate::config::{
    parse_admin_listen, parse_delay_ms, parse_listen, parse_positive_i32, parse_shards,
    read_properties_file, split_host_port,
};

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
    /// The cluster flags, for [`crate::config::cluster::ClusterSettings::apply_flags`].
    pub fn cluster_flags(&self) -> crate::config::cluster::ClusterFlags {
        crate::config::cluster::ClusterFlags {
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

/// Flags over the file: what `rill` runs with ([`crate::config`] parses the file and checks the
/// values; the flags are this module's).
impl BrokerConfig {
    /// Resolve defaults, then `cli.config` (if given), then the flags.
    pub fn resolve(cli: &Cli) -> Result<Self, ConfigError> {
        let mut config = Self::defaults();
        let mut advertise_from_file = None;
        if let Some(path) = &cli.config {
            let properties = read_properties_file(path)?;
            advertise_from_file = config.apply_properties(&properties)?;
        }
        config.apply_cli(cli, advertise_from_file)?;
        Ok(config)
    }

    fn apply_cli(&mut self, cli: &Cli, advertise_file: Option<String>) -> Result<(), ConfigError> {
        if let Some(listen) = &cli.listen {
            self.listen = parse_listen("--listen", listen)?;
        }
        if let Some(dir) = &cli.data_dir {
            self.data_dir = dir.clone();
        }
        if let Some(shards) = cli.shards {
            self.shards = parse_shards("--shards", &shards.to_string())?;
        }
        if let Some(partitions) = cli.default_partitions {
            self.default_partitions =
                parse_positive_i32("--default-partitions", &partitions.to_string())?;
        }
        if let Some(auto) = cli.auto_create_topics {
            self.auto_create_topics = auto;
        }
        if let Some(bytes) = cli.io_memory_bytes {
            self.io_memory_bytes = bytes;
        }
        if let Some(admin) = &cli.admin_listen {
            self.admin.listen = parse_admin_listen("--admin-listen", admin)?;
        }
        if let Some(node_id) = cli.node_id {
            self.node_id = node_id;
        }
        if let Some(ms) = cli.group_initial_rebalance_delay_ms {
            self.group.initial_rebalance_delay_ms =
                parse_delay_ms("--group-initial-rebalance-delay-ms", &ms.to_string())?;
        }
        self.cluster_settings.apply_flags(&cli.cluster_flags());
        self.cluster = self.cluster_settings.resolve(self.node_id)?;
        // A topic config's broker default, so it stays with the log defaults (DescribeConfigs).
        let unclean = self.log.static_props.get("unclean.leader.election.enable");
        if let (Some(cluster), Some(v)) = (&mut self.cluster, unclean) {
            cluster.leadership.unclean_election = v.trim().eq_ignore_ascii_case("true");
        }
        let flags = [
            (cli.listen.is_some(), "listeners"),
            (cli.data_dir.is_some(), "log.dirs"),
            (cli.shards.is_some(), "rill.shards"),
            (cli.default_partitions.is_some(), "num.partitions"),
            (
                cli.auto_create_topics.is_some(),
                "auto.create.topics.enable",
            ),
            (cli.advertise.is_some(), "advertised.listeners"),
            (cli.node_id.is_some(), "node.id"),
            (
                cli.group_initial_rebalance_delay_ms.is_some(),
                "group.initial.rebalance.delay.ms",
            ),
        ];
        for (_, property) in flags.into_iter().filter(|(given, _)| *given) {
            self.explicit.insert(property.to_string());
        }
        self.check_bounds()?;
        // advertise defaults to listen, so it is resolved after the listen address is final.
        self.advertise_host = self.listen.ip().to_string();
        self.advertise_port = self.listen.port();
        if let Some(address) = cli.advertise.clone().or(advertise_file) {
            let (host, port) = split_host_port("--advertise", &address)?;
            self.advertise_host = host;
            self.advertise_port = port;
        }
        self.resolve_listeners()
    }
}

#[cfg(test)]
mod resolve_tests;
