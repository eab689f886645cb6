//! [`PartitionIndex`], a partition's number within its topic, and the topic-partition key:
//! [`TopicPartition`] (owned) and [`TopicPartitionRef`] (borrowed). A map keyed by the owned
//! form is looked up by the borrowed one through [`TopicPartitionKey`], so routing a request to
//! its partition allocates no copy of the topic's name.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};

/// A partition's index within its topic (0-based). Raw `i32` only at the wire, where a client
/// may send anything (a negative index is simply an unknown partition).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PartitionIndex(pub i32);

impl PartitionIndex {
    /// The index as a position in a topic's list of partitions; `None` when negative.
    pub fn as_usize(self) -> Option<usize> {
        usize::try_from(self.0).ok()
    }

    /// Whether this index names one of a topic's `count` partitions (`0..count`).
    pub fn is_within(self, count: i32) -> bool {
        (0..count).contains(&self.0)
    }

    /// The indexes of a topic with `count` partitions, in order.
    pub fn all(count: i32) -> impl Iterator<Item = PartitionIndex> {
        (0..count.max(0)).map(PartitionIndex)
    }
}

impl fmt::Display for PartitionIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A topic's partition, owning the topic's name: the key of a broker's maps of partitions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic's name.
    pub topic: String,
    /// The partition's index in the topic.
    pub partition: PartitionIndex,
}

/// A topic's partition, borrowing the topic's name: what a request names and a map is looked
/// up by (Copy, no allocation).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartitionRef<'a> {
    /// The topic's name.
    pub topic: &'a str,
    /// The partition's index in the topic.
    pub partition: PartitionIndex,
}

impl TopicPartition {
    /// `topic`'s partition `partition`.
    pub fn new(topic: impl Into<String>, partition: PartitionIndex) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// The borrowed form of this key.
    pub fn borrowed(&self) -> TopicPartitionRef<'_> {
        TopicPartitionRef {
            topic: &self.topic,
            partition: self.partition,
        }
    }
}

impl<'a> TopicPartitionRef<'a> {
    /// `topic`'s partition `partition`.
    pub fn new(topic: &'a str, partition: PartitionIndex) -> Self {
        TopicPartitionRef { topic, partition }
    }

    /// The owned form of this key (copies the topic's name).
    pub fn owned(self) -> TopicPartition {
        TopicPartition::new(self.topic, self.partition)
    }

    /// This key as a map of [`TopicPartition`]s is looked up by (borrowed, no allocation).
    pub fn key(&self) -> &(dyn TopicPartitionKey + 'a) {
        self
    }
}

/// Hashes as its borrowed form does, so that [`TopicPartitionKey`] finds it in a map.
impl Hash for TopicPartition {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.borrowed().hash(state);
    }
}

impl<'a> From<&'a TopicPartition> for TopicPartitionRef<'a> {
    fn from(owned: &'a TopicPartition) -> Self {
        owned.borrowed()
    }
}

/// Kafka's name for a partition: `topic-3` (also its log directory's name).
impl fmt::Display for TopicPartitionRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.borrowed().fmt(f)
    }
}

/// A topic-partition key as a map compares it, owned or borrowed alike: a map of
/// [`TopicPartition`]s is looked up by [`TopicPartitionRef::key`].
pub trait TopicPartitionKey {
    /// The key, borrowed.
    fn view(&self) -> TopicPartitionRef<'_>;
}

impl TopicPartitionKey for TopicPartition {
    fn view(&self) -> TopicPartitionRef<'_> {
        self.borrowed()
    }
}

impl TopicPartitionKey for TopicPartitionRef<'_> {
    fn view(&self) -> TopicPartitionRef<'_> {
        *self
    }
}

// A map hashes and compares its owned keys through this view, so a borrowed key finds them.
impl<'a> Borrow<dyn TopicPartitionKey + 'a> for TopicPartition {
    fn borrow(&self) -> &(dyn TopicPartitionKey + 'a) {
        self
    }
}

/// The same hash as the owned key's (both hash their borrowed form).
impl Hash for dyn TopicPartitionKey + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.view().hash(state);
    }
}

impl PartialEq for dyn TopicPartitionKey + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.view() == other.view()
    }
}

impl Eq for dyn TopicPartitionKey + '_ {}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;
    use std::collections::HashMap;

    use super::*;

    fn hash_of(key: &(dyn TopicPartitionKey + '_)) -> u64 {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        hasher.finish()
    }

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic, PartitionIndex(partition))
    }

    fn at(topic: &str, partition: i32) -> TopicPartitionRef<'_> {
        TopicPartitionRef::new(topic, PartitionIndex(partition))
    }

    #[test]
    fn a_borrowed_key_hashes_and_compares_as_the_owned_one() {
        let owned = tp("orders", 3);
        let mut plain = DefaultHasher::new();
        owned.hash(&mut plain);
        assert_eq!(
            hash_of(&owned),
            plain.finish(),
            "the map's hash of its own key"
        );
        assert_eq!(hash_of(&owned), hash_of(&at("orders", 3)));
        assert!(*at("orders", 3).key() == *Borrow::<dyn TopicPartitionKey>::borrow(&owned));
        assert!(*at("orders", 4).key() != *Borrow::<dyn TopicPartitionKey>::borrow(&owned));
    }

    #[test]
    fn a_map_of_owned_keys_is_found_by_borrowed_ones() {
        let mut map: HashMap<TopicPartition, u32> = HashMap::new();
        map.insert(tp("a", 0), 1);
        map.insert(tp("a", 1), 2);
        map.insert(tp("ab", 0), 3);
        assert_eq!(map.get(at("a", 1).key()), Some(&2));
        assert_eq!(map.get(at("ab", 0).key()), Some(&3));
        assert_eq!(map.get(at("a", 2).key()), None);
        assert_eq!(map.get(at("b", 0).key()), None);
        assert_eq!(map.get(at("", 0).key()), None);
        assert!(map.contains_key(at("a", 0).key()));
        assert_eq!(map.remove(at("a", 0).key()), Some(1));
        assert!(!map.contains_key(at("a", 0).key()));
    }

    #[test]
    fn the_owned_and_borrowed_forms_convert_both_ways() {
        let owned = tp("orders", 3);
        assert_eq!(owned.borrowed(), at("orders", 3));
        assert_eq!(at("orders", 3).owned(), owned);
        assert_eq!(TopicPartitionRef::from(&owned), at("orders", 3));
    }

    #[test]
    fn displays_as_kafka_names_a_partition() {
        assert_eq!(tp("orders", 3).to_string(), "orders-3");
        assert_eq!(at("my-topic", 0).to_string(), "my-topic-0");
        assert_eq!(at("t", -1).to_string(), "t--1");
        assert_eq!(PartitionIndex(12).to_string(), "12");
    }

    #[test]
    fn an_index_is_within_its_topic_only_from_zero_to_the_count() {
        assert!(PartitionIndex(0).is_within(1));
        assert!(PartitionIndex(2).is_within(3));
        assert!(!PartitionIndex(3).is_within(3));
        assert!(!PartitionIndex(-1).is_within(3));
        assert!(!PartitionIndex(0).is_within(0));
        assert_eq!(PartitionIndex(-1).as_usize(), None);
        assert_eq!(PartitionIndex(i32::MAX).as_usize(), Some(i32::MAX as usize));
        let all: Vec<_> = PartitionIndex::all(3).collect();
        assert_eq!(
            all,
            [PartitionIndex(0), PartitionIndex(1), PartitionIndex(2)]
        );
        assert_eq!(PartitionIndex::all(-2).count(), 0);
    }
}
