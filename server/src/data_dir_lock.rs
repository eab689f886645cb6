//! One broker per data directory: an exclusive advisory lock (`flock`) on
//! `<data-dir>/.rill-meta/lock`, held for the life of the process. A second `rill` pointed at the
//! same directory fails at startup instead of interleaving writes into the same segments.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Holds the lock until dropped (the kernel also releases it when the process dies).
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Take the lock or explain who holds it.
    pub fn acquire(data_dir: &Path) -> std::io::Result<DataDirLock> {
        let dir = data_dir.join(".rill-meta");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        // SAFETY: flock on a valid, open descriptor owned by `file`; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(std::io::Error::new(
                e.kind(),
                format!(
                    "{} is locked by another rill process ({e})",
                    data_dir.display()
                ),
            ));
        }
        Ok(DataDirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_the_same_dir_fails_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        assert!(DataDirLock::acquire(dir.path()).is_err());
        drop(first);
        assert!(DataDirLock::acquire(dir.path()).is_ok());
    }
}
