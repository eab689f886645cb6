//! A simulated disk with seeded faults, for tests (TigerBeetle/Redpanda style).
//!
//! Model: each file has `current` bytes (what reads see) and `durable` bytes (what survives a
//! crash). Writes land in `current` and are queued as pending; `sync` makes a file's pending
//! writes durable. Length changes (`allocate`, `truncate`) and directory operations are durable at
//! once (a journaling file system's metadata). Faults, all drawn from one seeded PRNG:
//! - **EIO**: any write, sync or read may fail (probability `io_error_per_million`);
//! - **crash** ([`SimStorage::crash`]): every pending write is independently dropped, kept, or
//!   torn at a random byte; a torn write may also carry a flipped bit in the bytes it changed;
//!   every open handle dies.
//!
//! The simulator asserts the [`BlockFile`] alignment contract, so engine bugs panic here.

use super::{BlockFile, OpenMode, Storage, BLOCK_BYTES};
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Probabilities of injected faults.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultConfig {
    /// Chance per million that a write, sync or read returns EIO.
    pub io_error_per_million: u32,
    /// Chance per million that a torn write also flips one bit in the bytes it changed.
    pub bit_flip_per_million: u32,
}

#[derive(Debug, Default)]
struct FileData {
    current: Vec<u8>,
    durable: Vec<u8>,
    /// Unsynced writes, oldest first: (position, length).
    pending: Vec<(u64, usize)>,
}

#[derive(Debug)]
struct Disk {
    rng: fastrand::Rng,
    faults: FaultConfig,
    files: BTreeMap<PathBuf, FileData>,
    dirs: BTreeSet<PathBuf>,
    /// Bumped by every crash; handles from an older generation fail.
    generation: u64,
    io_errors_injected: u64,
}

/// A simulated storage; clones share one disk.
#[derive(Clone, Debug)]
pub struct SimStorage {
    disk: Rc<RefCell<Disk>>,
}

impl SimStorage {
    /// An empty disk whose faults are drawn from `seed`.
    pub fn new(seed: u64, faults: FaultConfig) -> Self {
        let disk = Disk {
            rng: fastrand::Rng::with_seed(seed),
            faults,
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
            generation: 0,
            io_errors_injected: 0,
        };
        SimStorage {
            disk: Rc::new(RefCell::new(disk)),
        }
    }

    /// Changes the fault probabilities (e.g. off while recovering).
    pub fn set_faults(&self, faults: FaultConfig) {
        self.disk.borrow_mut().faults = faults;
    }

    /// How many EIOs were injected so far.
    pub fn io_errors_injected(&self) -> u64 {
        self.disk.borrow().io_errors_injected
    }

    /// Power loss: pending writes are dropped, kept or torn at random; open handles die.
    pub fn crash(&self) {
        let mut disk = self.disk.borrow_mut();
        let Disk {
            rng, files, faults, ..
        } = &mut *disk;
        for data in files.values_mut() {
            crash_file(rng, faults, data);
        }
        disk.generation += 1;
    }

    /// The current bytes of a file (for tests).
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        self.disk
            .borrow()
            .files
            .get(path)
            .map(|f| f.current.clone())
    }

    /// Overwrites bytes of a file durably (for tests that corrupt files on purpose).
    pub fn corrupt(&self, path: &Path, pos: usize, bytes: &[u8]) {
        let mut disk = self.disk.borrow_mut();
        let file = disk.files.get_mut(path).expect("file exists");
        for data in [&mut file.current, &mut file.durable] {
            if data.len() < pos + bytes.len() {
                data.resize(pos + bytes.len(), 0);
            }
            data[pos..pos + bytes.len()].copy_from_slice(bytes);
        }
    }

    fn inject_eio(&self) -> io::Result<()> {
        let mut disk = self.disk.borrow_mut();
        let p = disk.faults.io_error_per_million;
        if p > 0 && disk.rng.u32(0..1_000_000) < p {
            disk.io_errors_injected += 1;
            return Err(io::Error::from_raw_os_error(5));
        }
        Ok(())
    }
}

/// Applies a crash to one file: what survives is durable + a random fate per pending write.
fn crash_file(rng: &mut fastrand::Rng, faults: &FaultConfig, data: &mut FileData) {
    let mut survived = std::mem::take(&mut data.durable);
    for &(pos, len) in &data.pending {
        let pos = pos as usize;
        let avail = data.current.len().saturating_sub(pos).min(len);
        let keep = match rng.u8(0..3) {
            0 => 0,
            1 => avail,
            _ => rng.usize(0..=avail),
        };
        let torn = keep < avail;
        let new = &data.current[pos..pos + keep];
        let changed: Vec<usize> = (0..keep)
            .filter(|&i| survived.get(pos + i) != Some(&new[i]))
            .collect();
        if survived.len() < pos + keep {
            survived.resize(pos + keep, 0);
        }
        survived[pos..pos + keep].copy_from_slice(new);
        let flip =
            torn && !changed.is_empty() && rng.u32(0..1_000_000) < faults.bit_flip_per_million;
        if flip {
            let at = pos + changed[rng.usize(0..changed.len())];
            survived[at] ^= 1 << rng.u8(0..8);
        }
    }
    data.pending.clear();
    data.current = survived.clone();
    data.durable = survived;
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

impl Storage for SimStorage {
    type File = SimFile;

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<SimFile> {
        let mut disk = self.disk.borrow_mut();
        if !disk.files.contains_key(path) {
            let parent = path.parent().unwrap_or(Path::new(""));
            if mode != OpenMode::CreateReadWrite || !disk.dirs.contains(parent) {
                return Err(not_found(path));
            }
            disk.files.insert(path.to_path_buf(), FileData::default());
        }
        let generation = disk.generation;
        Ok(SimFile {
            storage: self.clone(),
            path: path.to_path_buf(),
            generation,
            writable: mode != OpenMode::Read,
        })
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut disk = self.disk.borrow_mut();
        for ancestor in path.ancestors() {
            disk.dirs.insert(ancestor.to_path_buf());
        }
        Ok(())
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let disk = self.disk.borrow();
        if !disk.dirs.contains(path) {
            return Err(not_found(path));
        }
        let in_dir = disk.files.keys().filter(|p| p.parent() == Some(path));
        Ok(in_dir
            .filter_map(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .collect())
    }

    async fn exists(&self, path: &Path) -> io::Result<bool> {
        let disk = self.disk.borrow();
        Ok(disk.files.contains_key(path) || disk.dirs.contains(path))
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        let removed = self.disk.borrow_mut().files.remove(path);
        removed.map(|_| ()).ok_or_else(|| not_found(path))
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut disk = self.disk.borrow_mut();
        disk.files.retain(|p, _| !p.starts_with(path));
        disk.dirs.retain(|p| !p.starts_with(path));
        Ok(())
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut disk = self.disk.borrow_mut();
        let data = disk.files.remove(from).ok_or_else(|| not_found(from))?;
        disk.files.insert(to.to_path_buf(), data);
        Ok(())
    }
}

/// A handle to a simulated file; dies at the next crash.
#[derive(Debug)]
pub struct SimFile {
    storage: SimStorage,
    path: PathBuf,
    generation: u64,
    writable: bool,
}

impl SimFile {
    /// Runs `f` on the file's data if this handle is still alive and the file exists.
    fn with_data<T>(&self, f: impl FnOnce(&mut FileData) -> T) -> io::Result<T> {
        let mut disk = self.storage.disk.borrow_mut();
        if disk.generation != self.generation {
            return Err(io::Error::other("handle from before a crash"));
        }
        let data = disk
            .files
            .get_mut(&self.path)
            .ok_or_else(|| not_found(&self.path))?;
        Ok(f(data))
    }

    fn check_writable(&self) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::from_raw_os_error(9));
        }
        Ok(())
    }
}

impl BlockFile for SimFile {
    type Buffer = Vec<u8>;

    /// Filled with a poison byte: callers must not rely on a fresh buffer being zeroed.
    fn alloc_buffer(&self, len: usize) -> Vec<u8> {
        vec![0xA5; len]
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        assert!(pos.is_multiple_of(BLOCK_BYTES), "unaligned read at {pos}");
        self.storage.inject_eio()?;
        self.with_data(|d| {
            let start = (pos as usize).min(d.current.len());
            let end = (start + len).min(d.current.len());
            Bytes::copy_from_slice(&d.current[start..end])
        })
    }

    async fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        assert!(pos.is_multiple_of(BLOCK_BYTES), "unaligned write at {pos}");
        assert!(
            (data.len() as u64).is_multiple_of(BLOCK_BYTES),
            "unaligned write length {}",
            data.len()
        );
        self.check_writable()?;
        self.storage.inject_eio()?;
        self.with_data(|d| {
            let (pos, end) = (pos as usize, pos as usize + data.len());
            if d.current.len() < end {
                d.current.resize(end, 0);
            }
            d.current[pos..end].copy_from_slice(data);
            d.pending.push((pos as u64, data.len()));
        })
    }

    async fn sync(&self) -> io::Result<()> {
        self.storage.inject_eio()?;
        self.with_data(|d| {
            for (pos, len) in d.pending.drain(..) {
                let (pos, end) = (pos as usize, (pos as usize + len).min(d.current.len()));
                if d.durable.len() < end {
                    d.durable.resize(end, 0);
                }
                if pos < end {
                    d.durable[pos..end].copy_from_slice(&d.current[pos..end]);
                }
            }
            d.durable.resize(d.current.len(), 0);
        })
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.with_data(|d| {
            for data in [&mut d.current, &mut d.durable] {
                if (data.len() as u64) < len {
                    data.resize(len as usize, 0);
                }
            }
        })
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.with_data(|d| {
            d.current.resize(len as usize, 0);
            d.durable.resize(len as usize, 0);
        })
    }

    async fn size_bytes(&self) -> io::Result<u64> {
        self.with_data(|d| d.current.len() as u64)
    }

    async fn close(self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs a future that never waits on anything but the simulator (all sim futures are ready at
/// once) to completion on the current thread.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
    }
    panic!("simulated future did not complete");
}

/// A clock the test moves by hand.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: std::cell::Cell<i64>,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        ManualClock {
            now_ms: std::cell::Cell::new(now_ms),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: i64) {
        assert!(ms >= 0);
        self.now_ms.set(self.now_ms.get() + ms);
    }
}

impl super::Clock for ManualClock {
    fn now(&self) -> crate::types::TimestampMs {
        crate::types::TimestampMs(self.now_ms.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(s: &SimStorage, name: &str) -> SimFile {
        block_on(s.create_dir_all(Path::new("/d"))).unwrap();
        block_on(s.open(&Path::new("/d").join(name), OpenMode::CreateReadWrite)).unwrap()
    }

    #[test]
    fn synced_bytes_survive_crash_unsynced_may_not() {
        let s = SimStorage::new(1, FaultConfig::default());
        let f = file(&s, "a");
        block_on(f.write_at(0, &[1u8; 4096])).unwrap();
        block_on(f.sync()).unwrap();
        block_on(f.write_at(4096, &[2u8; 4096])).unwrap();
        s.crash();
        let bytes = s.file_bytes(Path::new("/d/a")).unwrap();
        assert!(bytes[..4096].iter().all(|&b| b == 1));
        assert!(bytes[4096..].iter().all(|&b| b == 2));
        assert!(block_on(f.sync()).is_err(), "old handle must die");
    }

    #[test]
    fn eio_is_injected_by_seed() {
        let s = SimStorage::new(
            7,
            FaultConfig {
                io_error_per_million: 500_000,
                bit_flip_per_million: 0,
            },
        );
        let f = file(&s, "b");
        let errors = (0..100)
            .filter(|_| block_on(f.write_at(0, &[0u8; 4096])).is_err())
            .count();
        assert!(errors > 10 && errors < 90);
        assert_eq!(s.io_errors_injected() as usize, errors);
    }

    #[test]
    #[should_panic(expected = "unaligned write")]
    fn unaligned_write_is_an_engine_bug() {
        let s = SimStorage::new(1, FaultConfig::default());
        let _ = block_on(file(&s, "c").write_at(0, &[0u8; 100]));
    }
}
