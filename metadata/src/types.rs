//! Newtypes for the numbers of the metadata layer that must never mix: node ids, the epochs of
//! brokers and partitions, and positions in the metadata log. (Leader epochs and producer ids are
//! `rill_types`' own: one definition each, shared with the engine and the wire.)

use std::fmt;

use serde::{Deserialize, Serialize};

/// A Kafka `node.id` / broker id (>= 0). Raft ids are this plus one, because raft-rs reserves 0.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct NodeId(pub i32);

impl NodeId {
    /// The largest node id accepted (Kafka's is `Int32.MAX`; a named bound keeps raft ids sane).
    pub const MAX: NodeId = NodeId(i32::MAX - 1);

    /// This node's id in raft-rs (which reserves 0 for "none").
    pub fn raft_id(self) -> u64 {
        assert!(self.0 >= 0, "negative node id {}", self.0);
        self.0 as u64 + 1
    }

    /// The node a raft-rs id names; `None` for raft-rs's "no node" (0) or an out-of-range id.
    pub fn from_raft_id(id: u64) -> Option<NodeId> {
        let node = id.checked_sub(1)?;
        i32::try_from(node).ok().map(NodeId)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A partition's epoch: bumped on every change of its replicas, ISR or leader (KIP-497's
/// `partition_epoch`, checked by AlterPartition).
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct PartitionEpoch(pub i32);

impl PartitionEpoch {
    /// The epoch after this one.
    pub fn next(self) -> PartitionEpoch {
        PartitionEpoch(self.0.checked_add(1).expect("partition epoch overflow"))
    }
}

/// A broker registration's epoch: the metadata-log index of its `RegisterBroker` record
/// (KIP-631), so a restarted broker always has a larger epoch than its previous life.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct BrokerEpoch(pub i64);

/// A position in the replicated metadata log (raft-rs's entry index; 0 = before the first).
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct LogIndex(pub u64);

impl fmt::Display for LogIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where clients reach a broker (its advertised listener).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Endpoint {
    /// Host name or address clients connect to.
    pub host: String,
    /// Port clients connect to.
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raft_ids_skip_zero_and_round_trip() {
        assert_eq!(NodeId(0).raft_id(), 1);
        assert_eq!(NodeId::from_raft_id(1), Some(NodeId(0)));
        assert_eq!(NodeId::from_raft_id(0), None);
        assert_eq!(
            NodeId::from_raft_id(NodeId::MAX.raft_id()),
            Some(NodeId::MAX)
        );
        assert_eq!(NodeId::from_raft_id(u64::MAX), None);
    }

    #[test]
    fn epochs_only_grow() {
        assert_eq!(PartitionEpoch(7).next(), PartitionEpoch(8));
    }
}
