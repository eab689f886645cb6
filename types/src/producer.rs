//! Idempotent and transactional producers: [`ProducerId`], [`ProducerEpoch`], [`Sequence`].

/// A producer id handed out by InitProducerId; -1 ([`ProducerId::NONE`]) on batches from a
/// producer that is neither idempotent nor transactional.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(transparent)
)]
pub struct ProducerId(pub i64);

impl ProducerId {
    /// Kafka's "no producer id".
    pub const NONE: ProducerId = ProducerId(-1);

    /// Whether this is a real id (idempotent or transactional producer).
    pub fn is_some(self) -> bool {
        self.0 >= 0
    }
}

impl Default for ProducerId {
    fn default() -> Self {
        ProducerId::NONE
    }
}

/// A producer id's epoch: bumped to fence an older instance of the same producer. -1 means none.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProducerEpoch(pub i16);

impl ProducerEpoch {
    /// Kafka's "no epoch".
    pub const NONE: ProducerEpoch = ProducerEpoch(-1);
}

impl Default for ProducerEpoch {
    fn default() -> Self {
        ProducerEpoch::NONE
    }
}

/// The sequence number of a producer's record (per partition), for deduplication. -1 means none.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sequence(pub i32);

impl Sequence {
    /// Kafka's "no sequence".
    pub const NONE: Sequence = Sequence(-1);
}

impl Default for Sequence {
    fn default() -> Self {
        Sequence::NONE
    }
}

impl std::fmt::Display for ProducerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::fmt::Display for ProducerEpoch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::fmt::Display for Sequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
