//! Whether new partitions fit on this broker, checked before CreateTopics, CreatePartitions or
//! an auto-creation commits anything (under the topic registry's write lock, so a refused
//! request leaves nothing behind and two concurrent ones cannot pass a limit together):
//!
//! - the broker's partition limit, `rill.broker.partitions.max`: INVALID_PARTITIONS (37), the
//!   code Redpanda answers for its partition limits;
//! - the data directory's free space and inodes: KAFKA_STORAGE_ERROR (56).
//!
//! A topic exists whole in `topics.json` or not at all; its partitions' directories are made
//! on first use (or at start-up) by their owning shards. What a partition needs on disk before
//! and just after its first data is [`PARTITION_DISK_BYTES`] and [`PARTITION_INODES`]; a
//! share of the file system ([`reserve_bytes`]) is never promised to new partitions, so the
//! partitions already there keep room to write.

use std::path::{Path, PathBuf};

use crate::config::settings::BrokerConfig;
use crate::topics::{Growth, TopicError};

/// Disk a new partition needs: its directory, producer snapshot and index files (a block
/// each), and room for its first writes (the smallest preallocation step).
pub const PARTITION_DISK_BYTES: u64 = 4 * 4096 + rill_engine::prealloc::PREALLOC_STEP_MIN;
/// Inodes a partition uses: its directory, `.log`, `.index`, `.timeindex`, `producer.snapshot`,
/// and one file being replaced atomically.
pub const PARTITION_INODES: u64 = 6;
/// Share of the file system kept out of reach of new partitions (1%, at most [`RESERVE_BYTES_MAX`]).
const RESERVE_PERCENT: u64 = 1;
/// Largest reserve.
const RESERVE_BYTES_MAX: u64 = 1 << 30;

/// Free space and inodes of a file system, as `statvfs` reports them to unprivileged users.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes free.
    pub free_bytes: u64,
    /// Size of the file system.
    pub total_bytes: u64,
    /// Inodes free; `None` where the file system has no inode limit (it reports 0 inodes).
    pub free_inodes: Option<u64>,
}

/// The free space and inodes of the file system holding `dir`.
pub fn disk_space(dir: &Path) -> std::io::Result<DiskSpace> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is NUL-terminated and outlives the call; statvfs writes only into `st`.
    if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let unit = st.f_frsize as u64;
    Ok(DiskSpace {
        free_bytes: st.f_bavail as u64 * unit,
        total_bytes: st.f_blocks as u64 * unit,
        free_inodes: (st.f_files > 0).then_some(st.f_favail as u64),
    })
}

/// Space of a file system new partitions may not claim.
pub fn reserve_bytes(space: &DiskSpace) -> u64 {
    (space.total_bytes / 100 * RESERVE_PERCENT).min(RESERVE_BYTES_MAX)
}

/// What admission checks against: the broker's partition limit and its data directory. Owned
/// (`Send`), so an admission can run off the shard's thread with the registry's commit.
#[derive(Debug, Clone)]
pub struct Capacity {
    partitions_max: i64,
    data_dir: PathBuf,
}

impl Capacity {
    /// This broker's capacity, from its configuration.
    pub fn of(config: &BrokerConfig) -> Capacity {
        Capacity {
            partitions_max: config.broker_partitions_max(),
            data_dir: config.data_dir.clone(),
        }
    }

    /// Admits `growth` on this broker, or says why not. `pending` partitions were admitted
    /// earlier in the same request and have no files yet: they count against the disk too.
    /// Blocks on `statvfs`: call it where blocking is allowed (see `Broker::blocking`).
    pub fn admit(&self, growth: Growth, pending: i64) -> Result<(), TopicError> {
        admit_count(self.partitions_max, growth)?;
        let space = disk_space(&self.data_dir).map_err(|e| {
            TopicError::NoSpace(format!(
                "cannot tell the free space of {}: {e}",
                self.data_dir.display()
            ))
        })?;
        admit_space(&space, growth.adding + pending, &self.data_dir)
    }
}

/// The partition limit.
pub fn admit_count(max: i64, growth: Growth) -> Result<(), TopicError> {
    let after = growth.partitions_before + growth.adding;
    if after > max {
        return Err(TopicError::PartitionLimit(format!(
            "this broker would hold {after} partitions ({} exist, the request adds {}); its \
             limit rill.broker.partitions.max is {max}",
            growth.partitions_before, growth.adding
        )));
    }
    Ok(())
}

/// Room for `adding` partitions in `space` (of the file system holding `dir`).
pub fn admit_space(space: &DiskSpace, adding: i64, dir: &Path) -> Result<(), TopicError> {
    let adding = u64::try_from(adding).unwrap_or(0);
    let need = adding * PARTITION_DISK_BYTES;
    let reserve = reserve_bytes(space);
    let usable = space.free_bytes.saturating_sub(reserve);
    if need > usable {
        return Err(TopicError::NoSpace(format!(
            "not enough disk for {adding} new partitions in {}: they need {} KiB, {} KiB is \
             free and {} KiB of it is kept for the partitions already there",
            dir.display(),
            need >> 10,
            space.free_bytes >> 10,
            reserve >> 10
        )));
    }
    let need_inodes = adding * PARTITION_INODES;
    if let Some(free) = space.free_inodes.filter(|&free| need_inodes > free) {
        return Err(TopicError::NoSpace(format!(
            "not enough inodes for {adding} new partitions in {}: they need {need_inodes}, \
             {free} are free",
            dir.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_protocol::ErrorCode;

    fn growth(partitions_before: i64, adding: i64) -> Growth {
        Growth {
            partitions_before,
            adding,
        }
    }

    #[test]
    fn the_partition_limit_counts_what_exists_and_what_is_added() {
        assert!(admit_count(100, growth(60, 40)).is_ok());
        let refused = admit_count(100, growth(60, 41)).unwrap_err();
        assert_eq!(refused.kafka_error_code(), ErrorCode::InvalidPartitions);
        let message = refused.to_string();
        assert!(
            message.contains("101 partitions")
                && message.contains("rill.broker.partitions.max is 100")
        );
    }

    #[test]
    fn space_and_inodes_keep_a_reserve() {
        let dir = Path::new("/data");
        let space = DiskSpace {
            free_bytes: 48 << 20,
            total_bytes: 64 << 20,
            free_inodes: Some(16_000),
        };
        let reserve = reserve_bytes(&space);
        assert_eq!(reserve, (64 << 20) / 100);
        let fits = (space.free_bytes - reserve) / PARTITION_DISK_BYTES;
        assert!(admit_space(&space, fits as i64, dir).is_ok());
        let refused = admit_space(&space, fits as i64 + 1, dir).unwrap_err();
        assert_eq!(refused.kafka_error_code(), ErrorCode::KafkaStorageError);
        assert!(
            refused.to_string().starts_with("not enough disk for"),
            "{refused}"
        );
        let few_inodes = DiskSpace {
            free_inodes: Some(10),
            ..space
        };
        let refused = admit_space(&few_inodes, 2, dir).unwrap_err();
        assert!(
            refused.to_string().starts_with("not enough inodes"),
            "{refused}"
        );
        let no_inode_limit = DiskSpace {
            free_inodes: None,
            ..few_inodes
        };
        assert!(admit_space(&no_inode_limit, 2, dir).is_ok());
    }

    #[test]
    fn the_data_directory_is_measured() {
        let dir = tempfile::tempdir().unwrap();
        let space = disk_space(dir.path()).unwrap();
        assert!(space.total_bytes > 0 && space.free_bytes <= space.total_bytes);
        assert!(disk_space(&dir.path().join("missing")).is_err());
    }
}
