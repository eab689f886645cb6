//! [`LogManager`]: owns `<data-dir>/<topic>-<partition>/` and opens partition logs in it.

use crate::config::LogConfig;
use crate::error::EngineError;
use crate::io::{Clock, Storage};
use crate::partition_log::PartitionLog;
use crate::prealloc::{PreallocBudget, SHARD_PREALLOC_BYTES_DEFAULT};
use crate::read_cache::{ReadCache, READ_CACHE_BYTES_DEFAULT};
use rill_types::TopicPartitionRef;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Owns the data directory layout of one core's partitions, and what they share: the storage,
/// the preallocation budget and the read cache.
pub struct LogManager<S: Storage> {
    storage: Rc<S>,
    data_dir: PathBuf,
    prealloc_budget: Rc<PreallocBudget>,
    read_cache: Rc<ReadCache>,
}

impl<S: Storage> LogManager<S> {
    /// A manager for partitions under `data_dir` (created on first open), with the default
    /// preallocation budget ([`SHARD_PREALLOC_BYTES_DEFAULT`]) and read cache
    /// ([`READ_CACHE_BYTES_DEFAULT`]).
    pub fn new(storage: S, data_dir: PathBuf) -> Self {
        LogManager {
            storage: Rc::new(storage),
            data_dir,
            prealloc_budget: PreallocBudget::new(SHARD_PREALLOC_BYTES_DEFAULT),
            read_cache: Rc::new(ReadCache::new(READ_CACHE_BYTES_DEFAULT)),
        }
    }

    /// The same manager whose logs share `read_cache` for their cold reads (one per core).
    pub fn with_read_cache(mut self, read_cache: Rc<ReadCache>) -> Self {
        self.read_cache = read_cache;
        self
    }

    /// The read cache the logs opened here share.
    pub fn read_cache(&self) -> &Rc<ReadCache> {
        &self.read_cache
    }

    /// The same manager with a preallocation budget of `bytes` for all its partitions.
    pub fn with_prealloc_budget(mut self, bytes: u64) -> Self {
        self.prealloc_budget = PreallocBudget::new(bytes);
        self
    }

    /// Bytes allocated ahead of the data by this manager's partitions, and the bound.
    pub fn prealloc_budget(&self) -> &PreallocBudget {
        &self.prealloc_budget
    }

    /// The storage every partition of this manager uses.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The directory of one partition: `<data-dir>/<topic>-<partition>` (the key's display).
    pub fn partition_dir(&self, tp: TopicPartitionRef<'_>) -> PathBuf {
        self.data_dir.join(tp.to_string())
    }

    /// Opens (creating or recovering) the log of partition `tp`.
    pub async fn open_partition(
        &self,
        tp: TopicPartitionRef<'_>,
        config: LogConfig,
        clock: Rc<dyn Clock>,
    ) -> Result<PartitionLog<S>, EngineError> {
        check_topic_name(tp.topic)?;
        assert!(tp.partition.0 >= 0, "partition index must be >= 0");
        let dir = self.partition_dir(tp);
        let budget = self.prealloc_budget.clone();
        let read_cache = self.read_cache.clone();
        PartitionLog::open(self.storage.clone(), dir, config, clock, budget, read_cache).await
    }

    /// Deletes the whole directory of a partition (its log must be closed or dropped first).
    pub async fn delete_partition(&self, tp: TopicPartitionRef<'_>) -> Result<(), EngineError> {
        check_topic_name(tp.topic)?;
        let dir = self.partition_dir(tp);
        if self.storage.exists(&dir).await? {
            self.storage.remove_dir_all(&dir).await?;
        }
        Ok(())
    }
}

/// Rejects topic names that could escape the data directory (Kafka's rule, from the one
/// limits table: legal characters only, never `.` or `..`).
fn check_topic_name(topic: &str) -> Result<(), EngineError> {
    rill_types::limits::check_topic_name(topic)
        .map_err(|e| EngineError::Layout(format!("illegal topic name: {}", e.reason)))
}
