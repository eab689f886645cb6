//! [`LeaderEpoch`]: which leadership of a partition wrote a batch or answers a request.

/// A partition's leader epoch (KIP-101/KIP-320): bumped on every leader change, stamped into
/// each batch's `partitionLeaderEpoch`, and checked by clients (OffsetForLeaderEpoch) to detect
/// truncation. -1 means "unknown / not given".
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(transparent)
)]
pub struct LeaderEpoch(pub i32);

impl LeaderEpoch {
    /// Kafka's "no epoch" value (old clients, batches written before epochs existed).
    pub const NONE: LeaderEpoch = LeaderEpoch(-1);

    /// The epoch a partition's next leader gets (the controller bumps it on every change).
    pub fn next(self) -> LeaderEpoch {
        assert!(self.0 >= 0, "no epoch has no successor");
        LeaderEpoch(self.0.checked_add(1).expect("leader epoch overflow"))
    }
}

impl Default for LeaderEpoch {
    fn default() -> Self {
        LeaderEpoch::NONE
    }
}

impl std::fmt::Display for LeaderEpoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
