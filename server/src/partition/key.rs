//! A partition's key in the table's maps, looked up by a borrowed `(&str, i32)`: routing a
//! request to its actor allocates no copy of the topic's name (only opening one does).

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// An owned key: (topic, partition).
pub type PartitionKey = (String, i32);

/// A key as the maps compare it, owned or borrowed alike.
pub trait KeyView {
    /// The topic and partition.
    fn parts(&self) -> (&str, i32);
}

impl KeyView for PartitionKey {
    fn parts(&self) -> (&str, i32) {
        (&self.0, self.1)
    }
}

impl KeyView for (&str, i32) {
    fn parts(&self) -> (&str, i32) {
        *self
    }
}

// The map hashes and compares an owned key through this view, so a borrowed one finds it.
impl<'a> Borrow<dyn KeyView + 'a> for PartitionKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

/// The same hash as the owned tuple's (a `String` hashes as its `str`).
impl Hash for dyn KeyView + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyView + '_ {}

/// `topic`'s `partition` as a map lookup key (borrowed, no allocation).
pub fn lookup<'a>(key: &'a (&'a str, i32)) -> &'a (dyn KeyView + 'a) {
    key
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;
    use std::collections::HashMap;

    use super::*;

    fn hash_of(key: &(dyn KeyView + '_)) -> u64 {
        let mut hasher = DefaultHasher::new();
        key.hash(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn a_borrowed_key_hashes_and_compares_as_the_owned_one() {
        let owned: PartitionKey = ("orders".to_string(), 3);
        let mut plain = DefaultHasher::new();
        owned.hash(&mut plain);
        assert_eq!(
            hash_of(&owned),
            plain.finish(),
            "the map's hash of its own key"
        );
        assert_eq!(hash_of(&owned), hash_of(&("orders", 3)));
        assert!(*lookup(&("orders", 3)) == *Borrow::<dyn KeyView>::borrow(&owned));
    }

    #[test]
    fn a_map_of_owned_keys_is_found_by_borrowed_ones() {
        let mut map: HashMap<PartitionKey, u32> = HashMap::new();
        map.insert(("a".to_string(), 0), 1);
        map.insert(("a".to_string(), 1), 2);
        map.insert(("ab".to_string(), 0), 3);
        assert_eq!(map.get(lookup(&("a", 1))), Some(&2));
        assert_eq!(map.get(lookup(&("ab", 0))), Some(&3));
        assert_eq!(map.get(lookup(&("a", 2))), None);
        assert_eq!(map.get(lookup(&("b", 0))), None);
        assert!(map.contains_key(lookup(&("a", 0))));
    }
}
