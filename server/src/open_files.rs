//! File descriptors: the process limit (raised to its hard limit at start, as Kafka's
//! documentation tells operators to) and each shard's share of it for partition files.
//!
//! Every connection, partition file and io_uring costs a descriptor. A partition holds at most
//! one open file while it is used (its active segment; a read of old data briefly opens a few
//! more) and none once idle, so the partition files a shard keeps open are bounded by its
//! budget ([`shard_budget`]), enforced by closing the least recently used partitions' files
//! (`partition::file_budget`). A running clean's files (`compaction::shard_cleaner::CLEAN_FILES`)
//! count in the same budget.

/// Descriptors kept out of the partition budgets: connections, io_uring rings, the metadata,
/// group and index files written now and then.
pub const RESERVED_FDS: u64 = 1024;
/// Smallest per-shard budget, whatever the limit says (a shard needs a few files to work at all).
pub const SHARD_FILES_MIN: usize = 16;

/// The RLIMIT_NOFILE soft limit before and after [`raise_to_hard_limit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NofileLimit {
    /// Soft limit found at start.
    pub before: u64,
    /// Soft limit now (the hard limit, unless the kernel refused).
    pub now: u64,
    /// Hard limit.
    pub hard: u64,
}

/// Raises this process's RLIMIT_NOFILE soft limit to its hard limit (capped by the kernel's
/// `fs.nr_open` when the hard limit is unlimited). Errors only if the limit cannot be read.
pub fn raise_to_hard_limit() -> std::io::Result<NofileLimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we pass; it lives across the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let before = limit.rlim_cur;
    let mut target = limit.rlim_max;
    if target == libc::RLIM_INFINITY {
        target = nr_open().unwrap_or(before.max(1 << 20));
    }
    if target > before {
        let raised = libc::rlimit {
            rlim_cur: target,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from the struct we pass; it lives across the call.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit.rlim_cur = target;
        }
    }
    Ok(NofileLimit {
        before,
        now: limit.rlim_cur,
        hard: limit.rlim_max,
    })
}

/// The kernel's per-process ceiling on descriptors (`/proc/sys/fs/nr_open`).
fn nr_open() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The current RLIMIT_NOFILE soft limit.
pub fn current_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we pass; it lives across the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(limit.rlim_cur)
}

/// Partition files one of `shards` shards may keep open: `configured` if set, else three
/// quarters of what the descriptor limit leaves after [`RESERVED_FDS`], split evenly.
pub fn shard_budget(configured: Option<usize>, nofile: u64, shards: usize) -> usize {
    if let Some(files) = configured {
        return files;
    }
    let spare = nofile.saturating_sub(RESERVED_FDS) * 3 / 4;
    let per_shard = spare / shards.max(1) as u64;
    usize::try_from(per_shard)
        .unwrap_or(usize::MAX)
        .max(SHARD_FILES_MIN)
}

/// Descriptors one connection uses: its socket, and the second handle its reader receives on
/// (`crate::net::connection`).
pub const FDS_PER_CONNECTION: u64 = 2;
/// Descriptors kept back from connections too (io_uring rings, the metadata, group and index
/// files written now and then).
const NON_CONNECTION_FDS: u64 = 256;

/// The default `max.connections`: what the descriptor limit leaves beside the partition files'
/// budgets ([`shard_budget`] takes three quarters of what [`RESERVED_FDS`] leaves), less
/// [`NON_CONNECTION_FDS`], at [`FDS_PER_CONNECTION`] each. A broker at its limit then stops
/// accepting (Kafka's `max.connections`) before `accept` or a partition file fails for want
/// of a descriptor.
pub fn connections_default(nofile: u64) -> usize {
    let beside_partitions = nofile.saturating_sub(RESERVED_FDS) / 4 + RESERVED_FDS.min(nofile);
    let fds = beside_partitions.saturating_sub(NON_CONNECTION_FDS);
    usize::try_from(fds / FDS_PER_CONNECTION)
        .unwrap_or(usize::MAX)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_reaches_the_hard_limit_and_is_idempotent() {
        let first = raise_to_hard_limit().unwrap();
        assert!(first.now >= first.before);
        let again = raise_to_hard_limit().unwrap();
        assert_eq!(again.before, again.now, "already raised");
        assert_eq!(current_limit().unwrap(), again.now);
    }

    #[test]
    fn connections_get_what_partition_files_leave() {
        // 20,000: the partition budgets take 14,232, connections (2 fds) the rest but 256.
        assert_eq!(connections_default(20_000), (20_000 - 14_232 - 256) / 2);
        assert_eq!(connections_default(1024), (1024 - 256) / 2);
        assert_eq!(connections_default(0), 1, "never none");
    }

    #[test]
    fn shard_budgets_split_what_the_limit_leaves() {
        assert_eq!(shard_budget(None, 20_000, 2), (20_000 - 1024) * 3 / 4 / 2);
        assert_eq!(
            shard_budget(None, 1024, 4),
            SHARD_FILES_MIN,
            "never below the floor"
        );
        assert_eq!(shard_budget(Some(50), 1 << 20, 2), 50, "configured wins");
    }
}
