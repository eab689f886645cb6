//! rill-metadata: the cluster's metadata quorum, KRaft-style (KIP-500, KIP-595, KIP-631), on
//! TiKV's raft-rs. Runtime-free: no sockets, no executor, no clock; the server drives it.
//!
//! # Two layers, as in Kafka's KRaft mode
//! 1. **The metadata log** (this crate): a Raft log replicated over the controller voters
//!    (`controller.quorum.voters`). It holds broker registrations, topics, partitions with their
//!    replicas, leader, leader epoch and ISR, topic configs and producer-id blocks. The Raft
//!    leader is the *active controller*: it alone decides, by proposing records.
//! 2. **Partition data** (the engine, and replication in issue 14): each partition's leader
//!    serves it; brokers learn who leads what by applying the metadata log.
//!
//! # Map
//! - [`types`]: node ids, epochs, log positions.
//! - [`record`]: the records of the log (KRaft's names) and their encoding.
//! - [`image`]: the state the records build, applied deterministically on every node.
//! - [`placement`]: round-robin replica placement (Kafka's rack-unaware assignment).
//! - [`scram`]: SCRAM credentials (KIP-554) and AlterUserScramCredentials' decision.
//! - [`acl`]: ACLs and the authorization decision of Kafka's StandardAuthorizer.
//! - [`client_quota`]: client quotas (KIP-546) and AlterClientQuotas' decision.
//! - [`request`]: what brokers ask the controller (register, heartbeat, admin) and its answers.
//! - [`controller`]: the active controller's decisions: requests and time → records;
//!   [`alter_partition`]: the ISR changes a leader asks for (KIP-497);
//!   [`elect_leaders`]: ElectLeaders and the preferred-leader rebalance;
//!   [`reassign`]: partition reassignments (KIP-455).
//! - [`quorum`]: one voter: raft-rs `RawNode` + durable store + image + controller.
//! - [`store`], [`files`]: the durable raft log and snapshots, over a file trait with a
//!   simulated, crashable implementation.
//! - [`wire`]: framing of the controller listener (raft messages and controller RPCs).
//!
//! # Why raft-rs
//! Consensus is never hand-written here. raft-rs is sans-I/O: `tick`, `step`, `propose`, then a
//! `Ready` of what to persist, send and apply. That fits a thread-per-core broker (the quorum
//! runs on one thread and owns its state, no locks, no async runtime of its own), and it lets
//! the tests drive several voters through a simulated network and clock from a seed
//! (`quorum_sim`). `openraft` also builds here but runs on its own async runtime (tokio by
//! default), which would be a second runtime beside glommio.
//!
//! # What replication reads here
//! Records carry what replication needs: replicas in preference order, ISR, leader epoch and
//! partition epoch ([`record::MetadataRecord::PartitionChange`] is KRaft's
//! PartitionChangeRecord, checked against the epochs it was decided on). A new partition starts
//! with every replica in the ISR (it is empty); partition leaders send AlterPartition (KIP-497,
//! decided by [`alter_partition`]) to add a follower that reached the high watermark and to drop
//! one that lags. Leader election from the live ISR is [`controller::reconcile`]'s rule, so a fenced
//! leader's partitions move to an ISR follower.
#![forbid(unsafe_code)]

pub mod acl;
pub mod alter_partition;
pub mod client_quota;
pub mod controller;
pub mod elect_leaders;
pub mod files;
pub mod image;
pub mod placement;
pub mod quorum;
mod raft_log;
pub mod reassign;
pub mod record;
pub mod request;
pub mod scram;
pub mod store;
pub mod types;
pub mod wire;

#[cfg(test)]
mod quorum_sim;
#[cfg(test)]
mod test_support;

pub use raft::eraftpb::Message as RaftMessage;
