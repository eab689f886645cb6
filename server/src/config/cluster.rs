//! Cluster settings with Apache Kafka's KRaft property names, so a KRaft `server.properties`
//! drops in:
//!
//! | property                                  | flag                                | default |
//! |-------------------------------------------|-------------------------------------|---------|
//! | `node.id`                                 | `--node-id`                         | 0       |
//! | `process.roles` (broker, controller)      | `--process-roles`                   | —       |
//! | `controller.quorum.voters` (id@host:port) | `--controller-quorum`               | —       |
//! | `controller.quorum.bootstrap.servers` (KIP-853; host:port) | — | — (see [`ClusterSettings::standalone_voter`]) |
//! | `controller.listener.names`               | (implied by `--controller-listen`)  | —       |
//! | a `listeners` entry with that name        | `--controller-listen HOST:PORT`     | —       |
//! | `broker.session.timeout.ms`               | `--broker-session-timeout-ms`       | 9000    |
//! | `broker.heartbeat.interval.ms`            | `--broker-heartbeat-interval-ms`    | 2000    |
//! | `controller.quorum.election.timeout.ms`   | `--controller-quorum-election-timeout-ms` | 1000 |
//! | `default.replication.factor`              | `--default-replication-factor`      | 1       |
//! | `min.insync.replicas`                     | `--min-insync-replicas`             | 1       |
//! | `offsets.topic.replication.factor`        | `--offsets-topic-replication-factor`| 3       |
//! | `auto.leader.rebalance.enable`            | —                                   | true    |
//! | `leader.imbalance.check.interval.seconds` | —                                   | 300     |
//! | `leader.imbalance.per.broker.percentage`  | —                                   | 10      |
//! | `unclean.leader.election.enable` (also a topic config, read with the log defaults) | — | false |
//! | `transaction.state.log.replication.factor`| `--transaction-state-log-replication-factor` | 3 |
//! | `transaction.state.log.min.isr` (at most the factor) | (property only)      | 2       |
//! | `replica.lag.time.max.ms`                 | (property only)                     | 30000   |
//! | `replica.high.watermark.checkpoint.interval.ms` | (property only)               | 5000    |
//! | `rill.metadata.catch.up.max.ms` (Rill's own: see [`crate::cluster::catch_up_before_serving`]) | (property only) | no bound |
//!
//! Without `controller.quorum.voters` (and `process.roles`) Rill is the single node it always
//! was and none of this applies. With them, every mistake below stops the start with an error
//! naming the property: a malformed voter list or a voter id given twice; a controller whose
//! `node.id` is not a voter; a controller listener name missing from `listeners`; a controller
//! listener whose port is not its voter entry's.

use std::net::SocketAddr;
use std::time::Duration;

use rill_metadata::types::NodeId;

use crate::config::settings::ConfigError;

/// Kafka's `broker.session.timeout.ms` default.
pub const SESSION_TIMEOUT_MS_DEFAULT: u64 = 9000;
/// Kafka's `broker.heartbeat.interval.ms` default.
pub const HEARTBEAT_INTERVAL_MS_DEFAULT: u64 = 2000;
/// Kafka's `controller.quorum.election.timeout.ms` default.
pub const ELECTION_TIMEOUT_MS_DEFAULT: u64 = 1000;
/// Kafka's `offsets.topic.replication.factor` default.
pub const OFFSETS_REPLICATION_DEFAULT: u16 = 3;
/// Kafka's `transaction.state.log.replication.factor` default.
pub const TXN_REPLICATION_DEFAULT: u16 = 3;
/// Kafka's `transaction.state.log.min.isr` default.
pub const TXN_MIN_ISR_DEFAULT: u16 = 2;
/// Voters in a quorum, at most (each is a full Raft peer).
pub const VOTERS_MAX: usize = 15;

/// The roles a node plays (`process.roles`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roles {
    /// Serves Kafka clients.
    pub broker: bool,
    /// Votes in the metadata quorum (and may be the active controller).
    pub controller: bool,
}

/// One `controller.quorum.voters` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voter {
    /// Its `node.id`.
    pub id: NodeId,
    /// Its controller listener as written (`host:port`).
    pub address: String,
}

/// Kafka's `replica.lag.time.max.ms` default.
pub const REPLICA_LAG_TIME_MAX_MS_DEFAULT: u64 = 30_000;
/// Kafka's `replica.high.watermark.checkpoint.interval.ms` default.
pub const HW_CHECKPOINT_INTERVAL_MS_DEFAULT: u64 = 5_000;

/// A validated cluster configuration (present only when a quorum is configured).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterConfig {
    /// This node.
    pub node_id: NodeId,
    /// Its roles.
    pub roles: Roles,
    /// Where this controller listens (`Some` iff it is a controller).
    pub controller_listen: Option<SocketAddr>,
    /// The quorum, in the order given.
    pub voters: Vec<Voter>,
    /// `broker.session.timeout.ms`.
    pub session_timeout_ms: u64,
    /// `broker.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: u64,
    /// `controller.quorum.election.timeout.ms`.
    pub election_timeout_ms: u64,
    /// `default.replication.factor`.
    pub default_replication_factor: u16,
    /// `min.insync.replicas` (enforced with replication, issue 14).
    pub min_insync_replicas: u16,
    /// `offsets.topic.replication.factor`.
    pub offsets_replication_factor: u16,
    /// `transaction.state.log.replication.factor`.
    pub txn_replication_factor: u16,
    /// `transaction.state.log.min.isr`: `min.insync.replicas` of `__transaction_state`.
    pub txn_min_isr: u16,
    /// `replica.lag.time.max.ms`: a follower not caught up for this long leaves the ISR.
    pub replica_lag_time_max_ms: u64,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often a replica writes its
    /// partitions' high watermarks (also on a clean close), so a restart resumes from them.
    pub hw_checkpoint_interval_ms: u64,
    /// Who leads: preferred-leader rebalance and unclean elections.
    pub leadership: Leadership,
    /// `rill.metadata.catch.up.max.ms`: how long a restarted broker waits to catch up with the
    /// metadata quorum before it serves what it last knew anyway. `None` (the default): no
    /// bound, as Kafka's broker, which never serves before it caught up.
    pub catch_up_max: Option<Duration>,
}

/// The controller's leadership settings (Kafka's names, [`rill_metadata::elect_leaders`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    /// `auto.leader.rebalance.enable`.
    pub auto_rebalance: bool,
    /// `leader.imbalance.check.interval.seconds`, in ms.
    pub imbalance_check_interval_ms: u64,
    /// `leader.imbalance.per.broker.percentage`.
    pub imbalance_per_broker_percentage: u32,
    /// `unclean.leader.election.enable`, for topics without their own.
    pub unclean_election: bool,
}

impl Default for Leadership {
    fn default() -> Self {
        Self {
            auto_rebalance: true,
            imbalance_check_interval_ms: 300_000,
            imbalance_per_broker_percentage: 10,
            unclean_election: false,
        }
    }
}

/// The cluster properties as given, before validation (file first, flags over it).
#[derive(Debug, Clone, Default)]
pub struct ClusterSettings {
    process_roles: Option<String>,
    voters: Option<String>,
    bootstrap_servers: Option<String>,
    controller_listener_names: Option<String>,
    listeners: Option<String>,
    controller_listen: Option<String>,
    session_timeout_ms: Option<u64>,
    heartbeat_interval_ms: Option<u64>,
    election_timeout_ms: Option<u64>,
    default_replication_factor: Option<u16>,
    min_insync_replicas: Option<u16>,
    offsets_replication_factor: Option<u16>,
    auto_leader_rebalance: Option<bool>,
    leader_imbalance_check_interval_s: Option<u64>,
    leader_imbalance_per_broker_percentage: Option<u32>,
    txn_replication_factor: Option<u16>,
    txn_min_isr: Option<u16>,
    replica_lag_time_max_ms: Option<u64>,
    hw_checkpoint_interval_ms: Option<u64>,
    catch_up_max_ms: Option<u64>,
}

/// Cluster flags (a subset of [`crate::cli::Cli`]).
#[derive(Debug, Clone, Default)]
pub struct ClusterFlags {
    /// `--process-roles`.
    pub process_roles: Option<String>,
    /// `--controller-quorum`.
    pub voters: Option<String>,
    /// `--controller-listen`.
    pub controller_listen: Option<String>,
    /// `--broker-session-timeout-ms`.
    pub session_timeout_ms: Option<u64>,
    /// `--broker-heartbeat-interval-ms`.
    pub heartbeat_interval_ms: Option<u64>,
    /// `--controller-quorum-election-timeout-ms`.
    pub election_timeout_ms: Option<u64>,
    /// `--default-replication-factor`.
    pub default_replication_factor: Option<u16>,
    /// `--min-insync-replicas`.
    pub min_insync_replicas: Option<u16>,
    /// `--offsets-topic-replication-factor`.
    pub offsets_replication_factor: Option<u16>,
    /// `--transaction-state-log-replication-factor`.
    pub txn_replication_factor: Option<u16>,
}

fn bad(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn number<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError>
where
    T::Err: std::fmt::Display,
{
    v.trim()
        .parse::<T>()
        .map_err(|e| bad(key, v, e.to_string()))
}

impl ClusterSettings {
    /// Take a cluster property; `Ok(false)` if `key` is not one.
    pub fn apply_property(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        let v = v.trim();
        match key {
            "process.roles" => self.process_roles = Some(v.to_string()),
            "controller.quorum.voters" => self.voters = Some(v.to_string()),
            "controller.quorum.bootstrap.servers" => self.bootstrap_servers = Some(v.to_string()),
            "controller.listener.names" => self.controller_listener_names = Some(v.to_string()),
            "broker.session.timeout.ms" => self.session_timeout_ms = Some(number(key, v)?),
            "broker.heartbeat.interval.ms" => self.heartbeat_interval_ms = Some(number(key, v)?),
            "controller.quorum.election.timeout.ms" => {
                self.election_timeout_ms = Some(number(key, v)?)
            }
            "default.replication.factor" => self.default_replication_factor = Some(number(key, v)?),
            "min.insync.replicas" => self.min_insync_replicas = Some(number(key, v)?),
            "replica.lag.time.max.ms" => self.replica_lag_time_max_ms = Some(number(key, v)?),
            "replica.high.watermark.checkpoint.interval.ms" => {
                self.hw_checkpoint_interval_ms = Some(number(key, v)?)
            }
            "rill.metadata.catch.up.max.ms" => self.catch_up_max_ms = Some(number(key, v)?),
            "offsets.topic.replication.factor" => {
                self.offsets_replication_factor = Some(number(key, v)?)
            }
            "transaction.state.log.replication.factor" => {
                self.txn_replication_factor = Some(number(key, v)?)
            }
            "transaction.state.log.min.isr" => self.txn_min_isr = Some(number(key, v)?),
            "auto.leader.rebalance.enable" => {
                self.auto_leader_rebalance = Some(match v.to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(bad(key, v, "expected true or false")),
                })
            }
            "leader.imbalance.check.interval.seconds" => {
                let seconds: u64 = number(key, v)?;
                if seconds == 0 {
                    return Err(bad(key, v, "must be at least 1"));
                }
                self.leader_imbalance_check_interval_s = Some(seconds)
            }
            "leader.imbalance.per.broker.percentage" => {
                let percent: u32 = number(key, v)?;
                if percent > 100 {
                    return Err(bad(key, v, "must be 0..=100"));
                }
                self.leader_imbalance_per_broker_percentage = Some(percent)
            }
            // Kafka properties a KRaft file carries that Rill reads elsewhere or has no use for
            // (PLAINTEXT only; the broker listener is the first non-controller listener).
            "listener.security.protocol.map" | "inter.broker.listener.name" => {}
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Remember `listeners` (its controller entry is the controller listener).
    pub fn set_listeners(&mut self, v: &str) {
        self.listeners = Some(v.trim().to_string());
    }

    /// Names of the controller listeners (`controller.listener.names`, upper-cased).
    pub fn controller_listener_names(&self) -> Vec<String> {
        let names = self.controller_listener_names.as_deref().unwrap_or("");
        names
            .split(',')
            .map(|n| n.trim().to_ascii_uppercase())
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// Flags override the file.
    pub fn apply_flags(&mut self, flags: &ClusterFlags) {
        fn over<T: Clone>(slot: &mut Option<T>, flag: &Option<T>) {
            if flag.is_some() {
                slot.clone_from(flag);
            }
        }
        over(&mut self.process_roles, &flags.process_roles);
        over(&mut self.voters, &flags.voters);
        over(&mut self.controller_listen, &flags.controller_listen);
        over(&mut self.session_timeout_ms, &flags.session_timeout_ms);
        over(
            &mut self.heartbeat_interval_ms,
            &flags.heartbeat_interval_ms,
        );
        over(&mut self.election_timeout_ms, &flags.election_timeout_ms);
        over(
            &mut self.default_replication_factor,
            &flags.default_replication_factor,
        );
        over(&mut self.min_insync_replicas, &flags.min_insync_replicas);
        over(
            &mut self.offsets_replication_factor,
            &flags.offsets_replication_factor,
        );
        over(
            &mut self.txn_replication_factor,
            &flags.txn_replication_factor,
        );
    }

    /// Validate into a [`ClusterConfig`]; `None` when no quorum is configured (single node).
    pub fn resolve(&self, node_id: i32) -> Result<Option<ClusterConfig>, ConfigError> {
        let standalone = match (&self.voters, &self.bootstrap_servers) {
            (None, Some(servers)) => Some(self.standalone_voter(node_id, servers)?),
            _ => None,
        };
        let Some(voters_text) = self.voters.as_ref().or(standalone.as_ref()) else {
            if let Some(roles) = &self.process_roles {
                return Err(bad(
                    "process.roles",
                    roles,
                    "needs controller.quorum.voters (the metadata quorum)",
                ));
            }
            return Ok(None);
        };
        let voters = parse_voters(voters_text)?;
        let Some(roles_text) = &self.process_roles else {
            return Err(bad(
                "process.roles",
                "",
                "required with controller.quorum.voters: broker, controller or both",
            ));
        };
        let roles = parse_roles(roles_text)?;
        if node_id < 0 || NodeId(node_id) > NodeId::MAX {
            return Err(bad("node.id", &node_id.to_string(), "must be >= 0"));
        }
        let node_id = NodeId(node_id);
        let controller_listen = self.controller_listen(roles, node_id, &voters)?;
        let config = ClusterConfig {
            node_id,
            roles,
            controller_listen,
            voters,
            session_timeout_ms: self
                .session_timeout_ms
                .unwrap_or(SESSION_TIMEOUT_MS_DEFAULT),
            heartbeat_interval_ms: self
                .heartbeat_interval_ms
                .unwrap_or(HEARTBEAT_INTERVAL_MS_DEFAULT),
            election_timeout_ms: self
                .election_timeout_ms
                .unwrap_or(ELECTION_TIMEOUT_MS_DEFAULT),
            default_replication_factor: self.default_replication_factor.unwrap_or(1),
            min_insync_replicas: self.min_insync_replicas.unwrap_or(1),
            offsets_replication_factor: self
                .offsets_replication_factor
                .unwrap_or(OFFSETS_REPLICATION_DEFAULT),
            leadership: self.leadership(),
            txn_replication_factor: self
                .txn_replication_factor
                .unwrap_or(TXN_REPLICATION_DEFAULT),
            txn_min_isr: self.txn_min_isr.unwrap_or(TXN_MIN_ISR_DEFAULT),
            replica_lag_time_max_ms: self
                .replica_lag_time_max_ms
                .unwrap_or(REPLICA_LAG_TIME_MAX_MS_DEFAULT),
            hw_checkpoint_interval_ms: self
                .hw_checkpoint_interval_ms
                .unwrap_or(HW_CHECKPOINT_INTERVAL_MS_DEFAULT)
                .max(1),
            catch_up_max: self.catch_up_max_ms.map(Duration::from_millis),
        };
        check_timings_and_factors(&config)?;
        Ok(Some(config))
    }

    /// `controller.quorum.bootstrap.servers` without `controller.quorum.voters`: Kafka 4's own
    /// `server.properties`, a combined node formatted `--standalone` (KIP-853), whose quorum is
    /// that one controller. Rill formats on its first start, so the same file gives the same
    /// quorum: this node, at the one bootstrap server (`id@host:port`). A dynamic quorum of
    /// several controllers, or a broker that must learn its controllers' ids, is refused with
    /// the property named.
    fn standalone_voter(&self, node_id: i32, servers: &str) -> Result<String, ConfigError> {
        const KEY: &str = "controller.quorum.bootstrap.servers";
        let entries: Vec<&str> = servers
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .collect();
        let is_controller = self
            .process_roles
            .as_deref()
            .is_some_and(|r| r.split(',').any(|role| role.trim() == "controller"));
        match entries.as_slice() {
            [one] if is_controller => Ok(format!("{node_id}@{one}")),
            _ => Err(bad(
                KEY,
                servers,
                "a dynamic quorum (KIP-853) is served only as one standalone combined node \
                 (one bootstrap server, process.roles with controller); for more controllers, \
                 or a broker-only node, give controller.quorum.voters",
            )),
        }
    }

    fn leadership(&self) -> Leadership {
        let default = Leadership::default();
        Leadership {
            auto_rebalance: self.auto_leader_rebalance.unwrap_or(default.auto_rebalance),
            imbalance_check_interval_ms: self
                .leader_imbalance_check_interval_s
                .map_or(default.imbalance_check_interval_ms, |s| {
                    s.saturating_mul(1000)
                }),
            imbalance_per_broker_percentage: self
                .leader_imbalance_per_broker_percentage
                .unwrap_or(default.imbalance_per_broker_percentage),
            unclean_election: default.unclean_election,
        }
    }

    /// The controller listener: `--controller-listen`, else the `listeners` entry named in
    /// `controller.listener.names`; checked against this node's voter entry.
    fn controller_listen(
        &self,
        roles: Roles,
        node_id: NodeId,
        voters: &[Voter],
    ) -> Result<Option<SocketAddr>, ConfigError> {
        if !roles.controller {
            return Ok(None);
        }
        let Some(me) = voters.iter().find(|v| v.id == node_id) else {
            return Err(bad(
                "node.id",
                &node_id.to_string(),
                format!(
                    "this node is a controller (process.roles) but controller.quorum.voters \
                     names only {}",
                    voter_ids(voters)
                ),
            ));
        };
        let (key, address) = match &self.controller_listen {
            Some(address) => ("--controller-listen", address.clone()),
            None => (
                "controller.listener.names",
                self.named_controller_listener()?,
            ),
        };
        let listen = crate::security::listeners::bind_address(key, &address)
            .map_err(|_| bad(key, &address, "not a HOST:PORT this machine can bind"))?;
        let voter_port = me.address.rsplit_once(':').map(|(_, p)| p);
        if voter_port != Some(&listen.port().to_string()) {
            return Err(bad(
                key,
                &address,
                format!(
                    "this controller listens on port {} but controller.quorum.voters gives \
                     {}@{}",
                    listen.port(),
                    node_id,
                    me.address
                ),
            ));
        }
        Ok(Some(listen))
    }

    fn named_controller_listener(&self) -> Result<String, ConfigError> {
        let names = self.controller_listener_names();
        let Some(name) = names.first() else {
            return Err(bad(
                "controller.listener.names",
                "",
                "required for a controller (the name of its entry in listeners)",
            ));
        };
        let listeners = self.listeners.as_deref().unwrap_or("");
        let parsed = parse_listeners("listeners", listeners)?;
        parsed
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, address)| address)
            .ok_or_else(|| {
                bad(
                    "controller.listener.names",
                    name,
                    format!("no listener named {name} in listeners={listeners:?}"),
                )
            })
    }
}

fn check_timings_and_factors(config: &ClusterConfig) -> Result<(), ConfigError> {
    if config.heartbeat_interval_ms == 0
        || config.heartbeat_interval_ms >= config.session_timeout_ms
    {
        return Err(bad(
            "broker.heartbeat.interval.ms",
            &config.heartbeat_interval_ms.to_string(),
            format!(
                "must be above 0 and below broker.session.timeout.ms ({})",
                config.session_timeout_ms
            ),
        ));
    }
    if config.election_timeout_ms < 100 {
        return Err(bad(
            "controller.quorum.election.timeout.ms",
            &config.election_timeout_ms.to_string(),
            "must be at least 100",
        ));
    }
    for (key, value) in [
        (
            "default.replication.factor",
            config.default_replication_factor,
        ),
        ("min.insync.replicas", config.min_insync_replicas),
        (
            "offsets.topic.replication.factor",
            config.offsets_replication_factor,
        ),
        (
            "transaction.state.log.replication.factor",
            config.txn_replication_factor,
        ),
        ("transaction.state.log.min.isr", config.txn_min_isr),
    ] {
        if value == 0 {
            return Err(bad(key, "0", "must be at least 1"));
        }
    }
    Ok(())
}

/// `1@host:port,2@host:port,...`: ids distinct, addresses `host:port`.
pub fn parse_voters(text: &str) -> Result<Vec<Voter>, ConfigError> {
    const KEY: &str = "controller.quorum.voters";
    let mut voters: Vec<Voter> = Vec::new();
    for entry in text.split(',').map(str::trim) {
        let malformed = |why: &str| {
            bad(
                KEY,
                text,
                format!("entry {entry:?}: {why} (expected id@host:port)"),
            )
        };
        let (id, address) = entry.split_once('@').ok_or_else(|| malformed("no '@'"))?;
        let id: i32 = id
            .trim()
            .parse()
            .map_err(|_| malformed("the id is not a number"))?;
        if id < 0 {
            return Err(malformed("negative id"));
        }
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| malformed("no port"))?;
        if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(malformed("bad host or port"));
        }
        if voters.iter().any(|v| v.id == NodeId(id)) {
            return Err(bad(KEY, text, format!("node id {id} is given twice")));
        }
        voters.push(Voter {
            id: NodeId(id),
            address: address.to_string(),
        });
    }
    if voters.len() > VOTERS_MAX {
        return Err(bad(KEY, text, format!("more than {VOTERS_MAX} voters")));
    }
    Ok(voters)
}

fn parse_roles(text: &str) -> Result<Roles, ConfigError> {
    let mut roles = Roles {
        broker: false,
        controller: false,
    };
    for role in text.split(',').map(|r| r.trim().to_ascii_lowercase()) {
        match role.as_str() {
            "broker" => roles.broker = true,
            "controller" => roles.controller = true,
            _ => {
                return Err(bad(
                    "process.roles",
                    text,
                    format!("unknown role {role:?} (broker, controller or both)"),
                ))
            }
        }
    }
    Ok(roles)
}

/// Kafka's `listeners` syntax: `NAME://host:port,...` (a bare `host:port` is `PLAINTEXT`);
/// names upper-cased, in order.
pub fn parse_listeners(key: &str, text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    crate::security::listeners::parse_listeners(key, text).map_err(|e| ConfigError::BadValue {
        key: e.key,
        value: e.value,
        reason: e.reason,
    })
}

/// The client listener in `listeners`: the first entry that is not a controller listener.
pub fn client_listener(
    key: &str,
    text: &str,
    controller_names: &[String],
) -> Result<String, ConfigError> {
    parse_listeners(key, text)?
        .into_iter()
        .find(|(name, _)| !controller_names.contains(name))
        .map(|(_, address)| address)
        .ok_or_else(|| bad(key, text, "no client (non-controller) listener"))
}

fn voter_ids(voters: &[Voter]) -> String {
    let ids: Vec<String> = voters.iter().map(|v| v.id.to_string()).collect();
    ids.join(",")
}

#[cfg(test)]
impl ClusterConfig {
    /// The unit tests' cluster node: node 1, the only voter, with replication factor 3 and a
    /// transaction state ISR of 2 (the cluster view's and the replicated actor's tests).
    pub fn node_1_of_three_replicas() -> ClusterConfig {
        ClusterConfig {
            node_id: NodeId(1),
            roles: Roles {
                broker: true,
                controller: true,
            },
            controller_listen: None,
            voters: vec![Voter {
                id: NodeId(1),
                address: "127.0.0.1:1".into(),
            }],
            session_timeout_ms: 9000,
            heartbeat_interval_ms: 2000,
            election_timeout_ms: 1000,
            default_replication_factor: 3,
            min_insync_replicas: 1,
            offsets_replication_factor: 3,
            txn_replication_factor: 3,
            txn_min_isr: 2,
            leadership: Default::default(),
            replica_lag_time_max_ms: 30_000,
            catch_up_max: None,
            hw_checkpoint_interval_ms: 5_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> ClusterSettings {
        let mut s = ClusterSettings::default();
        for (k, v) in pairs {
            if *k == "listeners" {
                s.set_listeners(v);
            } else {
                assert!(s.apply_property(k, v).unwrap(), "{k} not a cluster key");
            }
        }
        s
    }

    const VOTERS: &str = "1@127.0.0.1:9093,2@127.0.0.1:19093,3@127.0.0.1:29093";

    fn combined() -> Vec<(&'static str, &'static str)> {
        vec![
            ("process.roles", "broker,controller"),
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            ),
            ("controller.listener.names", "CONTROLLER"),
            ("controller.quorum.voters", VOTERS),
        ]
    }

    fn error_of(pairs: &[(&str, &str)], node: i32) -> String {
        settings(pairs).resolve(node).unwrap_err().to_string()
    }

    /// Kafka 4's own config/server.properties (KRaft, combined, formatted `--standalone`).
    #[test]
    fn kafkas_standalone_server_properties_is_a_quorum_of_this_node() {
        let kafka = [
            ("process.roles", "broker,controller"),
            ("node.id", "1"),
            ("controller.quorum.bootstrap.servers", "localhost:9093"),
            ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
            ("controller.listener.names", "CONTROLLER"),
        ];
        let pairs: Vec<_> = kafka.into_iter().filter(|(k, _)| *k != "node.id").collect();
        let c = settings(&pairs).resolve(1).unwrap().unwrap();
        assert_eq!(c.voters.len(), 1);
        assert_eq!(
            (c.voters[0].id, c.voters[0].address.as_str()),
            (NodeId(1), "localhost:9093")
        );
        assert_eq!(c.controller_listen.unwrap().port(), 9093);
        let mut two = pairs.clone();
        two[1] = ("controller.quorum.bootstrap.servers", "a:9093,b:9093");
        assert!(error_of(&two, 1).contains("controller.quorum.bootstrap.servers"));
        let mut broker = pairs.clone();
        broker[0] = ("process.roles", "broker");
        assert!(error_of(&broker, 1).contains("controller.quorum.bootstrap.servers"));
    }

    #[test]
    fn the_issues_example_resolves() {
        let mut pairs = combined();
        pairs.push(("default.replication.factor", "3"));
        pairs.push(("min.insync.replicas", "2"));
        pairs.push(("offsets.topic.replication.factor", "3"));
        let c = settings(&pairs).resolve(1).unwrap().unwrap();
        assert_eq!(c.node_id, NodeId(1));
        assert!(c.roles.broker && c.roles.controller);
        assert_eq!(c.controller_listen, Some("127.0.0.1:9093".parse().unwrap()));
        assert_eq!(c.voters.len(), 3);
        assert_eq!(
            (c.default_replication_factor, c.min_insync_replicas),
            (3, 2)
        );
        assert_eq!(c.session_timeout_ms, 9000);
        assert_eq!(c.txn_replication_factor, TXN_REPLICATION_DEFAULT);
        pairs.push(("transaction.state.log.replication.factor", "1"));
        let c = settings(&pairs).resolve(1).unwrap().unwrap();
        assert_eq!(c.txn_replication_factor, 1);
        assert_eq!(c.txn_min_isr, TXN_MIN_ISR_DEFAULT);
        pairs.push(("transaction.state.log.min.isr", "1"));
        let c = settings(&pairs).resolve(1).unwrap().unwrap();
        assert_eq!(c.txn_min_isr, 1);
        // A restarted broker waits for the quorum without a bound unless an operator sets one.
        assert_eq!(c.catch_up_max, None);
        pairs.push(("rill.metadata.catch.up.max.ms", "2500"));
        let c = settings(&pairs).resolve(1).unwrap().unwrap();
        assert_eq!(c.catch_up_max, Some(std::time::Duration::from_millis(2500)));
        let mut s = ClusterSettings::default();
        let e = s.apply_property("rill.metadata.catch.up.max.ms", "-1");
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("rill.metadata.catch.up.max.ms"));
    }

    #[test]
    fn leadership_settings_resolve_and_refuse_nonsense() {
        let c = settings(&combined()).resolve(1).unwrap().unwrap();
        assert_eq!(c.leadership, Leadership::default());
        let mut pairs = combined();
        pairs.push(("auto.leader.rebalance.enable", "FALSE"));
        pairs.push(("leader.imbalance.check.interval.seconds", "5"));
        pairs.push(("leader.imbalance.per.broker.percentage", "0"));
        let c = settings(&pairs).resolve(1).unwrap().unwrap();
        let expected = Leadership {
            auto_rebalance: false,
            imbalance_check_interval_ms: 5000,
            imbalance_per_broker_percentage: 0,
            unclean_election: false,
        };
        assert_eq!(c.leadership, expected);
        let mut s = ClusterSettings::default();
        for (key, value) in [
            ("auto.leader.rebalance.enable", "yes"),
            ("leader.imbalance.check.interval.seconds", "0"),
            ("leader.imbalance.per.broker.percentage", "101"),
        ] {
            let e = s.apply_property(key, value).unwrap_err().to_string();
            assert!(e.contains(key), "{e}");
        }
    }

    #[test]
    fn no_quorum_is_the_single_node() {
        assert_eq!(ClusterSettings::default().resolve(0).unwrap(), None);
    }

    #[test]
    fn each_mistake_names_its_property() {
        let with = |key: &'static str, value: &'static str| {
            let mut pairs: Vec<_> = combined().into_iter().filter(|(k, _)| *k != key).collect();
            pairs.push((key, value));
            pairs
        };
        let malformed = error_of(&with("controller.quorum.voters", "1@127.0.0.1"), 1);
        assert!(
            malformed.contains("controller.quorum.voters"),
            "{malformed}"
        );
        for text in [
            "x@127.0.0.1:1",
            "1-127.0.0.1:1",
            "1@:1",
            "1@h:0",
            "1@h:1,1@h:2",
            "",
        ] {
            let e = error_of(&with("controller.quorum.voters", text), 1);
            assert!(e.contains("controller.quorum.voters"), "{text}: {e}");
        }
        let not_a_voter = error_of(&combined(), 7);
        assert!(
            not_a_voter.contains("node.id") && not_a_voter.contains("1,2,3"),
            "{not_a_voter}"
        );
        let missing = error_of(&with("controller.listener.names", "CTRL"), 1);
        assert!(
            missing.contains("controller.listener.names") && missing.contains("CTRL"),
            "{missing}"
        );
        let wrong_port = error_of(
            &with(
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9999",
            ),
            1,
        );
        assert!(
            wrong_port.contains("9999") && wrong_port.contains("1@127.0.0.1:9093"),
            "{wrong_port}"
        );
        let roles = error_of(&with("process.roles", "broker,zookeeper"), 1);
        assert!(roles.contains("process.roles"), "{roles}");
        let heartbeat = error_of(&with("broker.heartbeat.interval.ms", "9000"), 1);
        assert!(
            heartbeat.contains("broker.heartbeat.interval.ms"),
            "{heartbeat}"
        );
        let no_roles: Vec<_> = combined()
            .into_iter()
            .filter(|(k, _)| *k != "process.roles")
            .collect();
        assert!(error_of(&no_roles, 1).contains("process.roles"));
        let only_roles = vec![("process.roles", "broker")];
        assert!(error_of(&only_roles, 1).contains("controller.quorum.voters"));
    }

    #[test]
    fn brokers_need_no_controller_listener_and_flags_win() {
        let pairs = vec![
            ("process.roles", "broker"),
            ("controller.quorum.voters", VOTERS),
        ];
        let c = settings(&pairs).resolve(4).unwrap().unwrap();
        assert_eq!(c.controller_listen, None);
        let mut s = settings(&combined());
        s.apply_flags(&ClusterFlags {
            controller_listen: Some("127.0.0.1:19093".into()),
            session_timeout_ms: Some(3000),
            heartbeat_interval_ms: Some(500),
            ..Default::default()
        });
        let c = s.resolve(2).unwrap().unwrap();
        assert_eq!(c.controller_listen.unwrap().port(), 19093);
        assert_eq!((c.session_timeout_ms, c.heartbeat_interval_ms), (3000, 500));
    }

    #[test]
    fn the_client_listener_is_the_first_non_controller_one() {
        let names = vec!["CONTROLLER".to_string()];
        let text = "CONTROLLER://127.0.0.1:9093, PLAINTEXT://127.0.0.1:9092";
        assert_eq!(
            client_listener("listeners", text, &names).unwrap(),
            "127.0.0.1:9092"
        );
        assert_eq!(
            client_listener("listeners", "127.0.0.1:1", &[]).unwrap(),
            "127.0.0.1:1"
        );
        assert!(client_listener("listeners", "CONTROLLER://127.0.0.1:9093", &names).is_err());
    }
}
