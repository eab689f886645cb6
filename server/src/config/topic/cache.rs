//! One shard's parsed [`TopicSettings`], so a Produce does not re-parse every topic config
//! string (and allocate for each) on every request.
//!
//! An entry is good while both of its inputs are unchanged:
//!
//! | input                         | how a change is seen                                        |
//! |-------------------------------|-------------------------------------------------------------|
//! | the topic's own configs       | a new `Arc<TopicMeta>` (the registry replaces metas whole: AlterConfigs, delete and re-create, a cluster's metadata image) |
//! | the broker's dynamic layers   | the registry's config generation (bumped by every change)  |
//! | the properties file, flags    | never change while the broker runs                          |
//!
//! The entry keeps the meta it was parsed from, so the pointer it compares cannot be freed and
//! reused by another topic's meta. The generation is read before the settings are computed,
//! so a change that lands meanwhile is seen by the next lookup, never hidden. Entries of
//! deleted topics are swept once the cache doubles, so it stays within twice the live topics.
//! Per shard (a `RefCell`, no lock): each core has its own.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use super::{RefusedConfig, TopicSettings};
use crate::topics::{TopicMeta, TopicRegistry};

/// A topic's parsed settings, or why its stored configs do not parse.
pub type Settled = Result<Arc<TopicSettings>, RefusedConfig>;

/// Entries below this many are never swept (a sweep reads the registry for each).
const SWEEP_FLOOR: usize = 64;

/// One topic's settings and what they were parsed from.
struct Entry {
    meta: Arc<TopicMeta>,
    generation: u64,
    settled: Settled,
}

/// Parsed settings by topic name, valid per (topic meta, config generation); see the module doc.
pub struct SettingsCache {
    entries: RefCell<HashMap<String, Entry>>,
    /// The size at which the next insert sweeps out deleted topics.
    sweep_at: Cell<usize>,
}

impl Default for SettingsCache {
    fn default() -> Self {
        SettingsCache {
            entries: RefCell::new(HashMap::new()),
            sweep_at: Cell::new(SWEEP_FLOOR),
        }
    }
}

impl SettingsCache {
    /// `name`'s settings given its current `meta` (from `registry`): the cached ones while
    /// neither input changed, else `parse`'s (then cached). `parse` must compute them from
    /// `meta`'s configs over the broker's layers as they are now.
    pub fn settings(
        &self,
        registry: &TopicRegistry,
        name: &str,
        meta: &Arc<TopicMeta>,
        parse: impl FnOnce() -> Result<TopicSettings, RefusedConfig>,
    ) -> Settled {
        // Read before parsing: a broker config change landing meanwhile bumps it past this.
        let generation = registry.config_generation();
        if let Some(entry) = self.entries.borrow().get(name) {
            if entry.generation == generation && Arc::ptr_eq(&entry.meta, meta) {
                return entry.settled.clone();
            }
        }
        let settled = parse().map(Arc::new);
        let entry = Entry {
            meta: meta.clone(),
            generation,
            settled: settled.clone(),
        };
        let mut entries = self.entries.borrow_mut();
        match entries.get_mut(name) {
            Some(slot) => *slot = entry,
            None => {
                entries.insert(name.to_string(), entry);
                if entries.len() >= self.sweep_at.get() {
                    sweep(&mut entries, registry);
                    self.sweep_at.set((2 * entries.len()).max(SWEEP_FLOOR));
                }
            }
        }
        settled
    }

    /// Topics cached (for tests and metrics).
    pub fn len(&self) -> usize {
        self.entries.borrow().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.borrow().is_empty()
    }
}

/// Drops the entries of topics deleted (or re-created) since they were parsed.
fn sweep(entries: &mut HashMap<String, Entry>, registry: &TopicRegistry) {
    entries.retain(|name, entry| {
        registry
            .get(name)
            .is_some_and(|now| Arc::ptr_eq(&now, &entry.meta))
    });
}

#[cfg(test)]
mod tests;
