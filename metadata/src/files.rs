//! The few file operations the metadata log needs, as a trait: the real one on `std::fs` (the
//! metadata quorum runs on its own thread, where a blocking fsync of a few bytes is fine), and a
//! simulated one whose crash loses or tears whatever was not synced.
//!
//! Contract (what [`crate::store`] relies on):
//! - `append` adds bytes at the end; they survive a crash only once `sync` returned;
//! - a crash may keep any prefix of the unsynced appended bytes (a torn tail), nothing else;
//! - `replace` swaps a file's whole content atomically and durably (tmp, fsync, rename, fsync dir);
//! - `truncate` is durable on return.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Durable files by name in one directory.
pub trait MetaFiles {
    /// The whole content of `name`, or `None` if it does not exist.
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>>;
    /// Append to `name` (created if absent); durable only after [`MetaFiles::sync`].
    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()>;
    /// Make everything appended to `name` durable.
    fn sync(&mut self, name: &str) -> io::Result<()>;
    /// Cut `name` to `len` bytes, durably.
    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()>;
    /// Replace `name`'s content with `bytes`, atomically and durably.
    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()>;
}

/// [`MetaFiles`] in a real directory.
#[derive(Debug)]
pub struct FsFiles {
    dir: PathBuf,
    appenders: HashMap<String, File>,
}

impl FsFiles {
    /// Files under `dir`, which is created (durably) if missing.
    pub fn open(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        if let Some(parent) = dir.parent() {
            sync_dir(parent)?;
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            appenders: HashMap::new(),
        })
    }

    fn appender(&mut self, name: &str) -> io::Result<&mut File> {
        if !self.appenders.contains_key(name) {
            let path = self.dir.join(name);
            let existed = path.exists();
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            if !existed {
                sync_dir(&self.dir)?;
            }
            self.appenders.insert(name.to_string(), file);
        }
        Ok(self.appenders.get_mut(name).expect("inserted above"))
    }
}

impl MetaFiles for FsFiles {
    fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match File::open(self.dir.join(name)) {
            Ok(mut file) => {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                Ok(Some(bytes))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.appender(name)?.write_all(bytes)
    }

    fn sync(&mut self, name: &str) -> io::Result<()> {
        self.appender(name)?.sync_data()
    }

    fn truncate(&mut self, name: &str, len: u64) -> io::Result<()> {
        let file = self.appender(name)?;
        file.set_len(len)?;
        file.sync_all()
    }

    fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
        // The old appender points at the file being replaced.
        self.appenders.remove(name);
        let tmp = self.dir.join(format!("{name}.tmp"));
        {
            let mut file = File::create(&tmp)?;
            file.write_all(bytes)?;
            file.sync_all()?;
        }
        std::fs::rename(&tmp, self.dir.join(name))?;
        sync_dir(&self.dir)
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A simulated directory for tests: each file has durable bytes and an unsynced tail.
pub mod sim {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[derive(Debug, Default, Clone)]
    struct SimFile {
        durable: Vec<u8>,
        unsynced: Vec<u8>,
    }

    /// The disk behind one node's [`SimFiles`]; survives the node, loses unsynced bytes in
    /// [`SimDisk::crash`].
    #[derive(Debug, Default, Clone)]
    pub struct SimDisk {
        files: Rc<RefCell<HashMap<String, SimFile>>>,
    }

    impl SimDisk {
        /// An empty disk.
        pub fn new() -> Self {
            Self::default()
        }

        /// Files on this disk (a node's view of it).
        pub fn files(&self) -> SimFiles {
            SimFiles { disk: self.clone() }
        }

        /// Power loss: each file keeps its durable bytes plus a prefix of its unsynced tail, of
        /// a length drawn from `draw` (called with the tail's length, returns `0..=len`).
        pub fn crash(&self, mut draw: impl FnMut(usize) -> usize) {
            for file in self.files.borrow_mut().values_mut() {
                let kept = draw(file.unsynced.len()).min(file.unsynced.len());
                let tail: Vec<u8> = file.unsynced.drain(..).take(kept).collect();
                file.durable.extend(tail);
            }
        }

        /// Bytes of `name` that would survive a crash that keeps nothing unsynced.
        pub fn durable_len(&self, name: &str) -> usize {
            self.files.borrow().get(name).map_or(0, |f| f.durable.len())
        }
    }

    /// [`MetaFiles`] on a [`SimDisk`].
    #[derive(Debug, Clone)]
    pub struct SimFiles {
        disk: SimDisk,
    }

    impl MetaFiles for SimFiles {
        fn read(&mut self, name: &str) -> io::Result<Option<Vec<u8>>> {
            Ok(self.disk.files.borrow().get(name).map(|f| {
                let mut all = f.durable.clone();
                all.extend_from_slice(&f.unsynced);
                all
            }))
        }

        fn append(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
            let mut files = self.disk.files.borrow_mut();
            files
                .entry(name.to_string())
                .or_default()
                .unsynced
                .extend_from_slice(bytes);
            Ok(())
        }

        fn sync(&mut self, name: &str) -> io::Result<()> {
            let mut files = self.disk.files.borrow_mut();
            let file = files.entry(name.to_string()).or_default();
            let tail = std::mem::take(&mut file.unsynced);
            file.durable.extend(tail);
            Ok(())
        }

        fn truncate(&mut self, name: &str, len: u64) -> io::Result<()> {
            let mut files = self.disk.files.borrow_mut();
            let file = files.entry(name.to_string()).or_default();
            let mut all = std::mem::take(&mut file.durable);
            all.extend(std::mem::take(&mut file.unsynced));
            all.truncate(len as usize);
            file.durable = all;
            Ok(())
        }

        fn replace(&mut self, name: &str, bytes: &[u8]) -> io::Result<()> {
            let file = SimFile {
                durable: bytes.to_vec(),
                unsynced: Vec::new(),
            };
            self.disk.files.borrow_mut().insert(name.to_string(), file);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sim::SimDisk;
    use super::*;

    fn exercise(files: &mut impl MetaFiles) {
        assert_eq!(files.read("log").unwrap(), None);
        files.append("log", b"abc").unwrap();
        files.sync("log").unwrap();
        files.append("log", b"def").unwrap();
        assert_eq!(files.read("log").unwrap().unwrap(), b"abcdef");
        files.truncate("log", 4).unwrap();
        assert_eq!(files.read("log").unwrap().unwrap(), b"abcd");
        files.append("log", b"x").unwrap();
        assert_eq!(files.read("log").unwrap().unwrap(), b"abcdx");
        files.replace("log", b"new").unwrap();
        files.append("log", b"!").unwrap();
        assert_eq!(files.read("log").unwrap().unwrap(), b"new!");
    }

    #[test]
    fn fs_and_sim_agree_on_the_contract() {
        let dir = tempfile::tempdir().unwrap();
        exercise(&mut FsFiles::open(&dir.path().join("meta")).unwrap());
        exercise(&mut SimDisk::new().files());
    }

    #[test]
    fn sim_crash_keeps_durable_bytes_and_a_prefix_of_the_rest() {
        let disk = SimDisk::new();
        let mut files = disk.files();
        files.append("log", b"durable").unwrap();
        files.sync("log").unwrap();
        files.append("log", b"tail").unwrap();
        disk.crash(|len| len / 2);
        assert_eq!(files.read("log").unwrap().unwrap(), b"durableta");
        disk.crash(|len| len);
        assert_eq!(disk.durable_len("log"), 9);
    }
}
