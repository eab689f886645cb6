//! A simulated disk with seeded faults, for tests (TigerBeetle/Redpanda style).
//!
//! Model: each file has `current` bytes (what reads see) and `durable` bytes (what survives a
//! crash), plus the changes made since its last sync, oldest first: writes (with a copy of their
//! bytes) and length changes. `sync` (fdatasync) makes a file's data AND its length durable.
//! Directory operations (create, rename, remove) are durable on return, because the real storage
//! fsyncs the directory in each of them; except the two that say they are not,
//! [`Storage::create_dir`] and opening with [`OpenMode::CreateReadWriteUnsynced`]: such a new
//! entry survives a crash only once [`Storage::sync_dir`] of its parent ran, and a crash before
//! that removes it, a directory with everything below it.
//!
//! Faults, all drawn from one seeded PRNG:
//! - **EIO** (or ENOSPC on writes and `allocate`): any write, sync, read, allocate or truncate
//!   may fail (probability `io_error_per_million`). A failed write may still have written any
//!   subset of its blocks. A background write's failure is sticky on its handle and reported by
//!   the next write or sync, as in `io/glommio.rs` (reads do not report it, as there).
//! - **crash** ([`SimStorage::crash`]): power loss. Per file, the length becomes one of the
//!   lengths it had since its last sync (ext4/xfs journal size changes in order, and only fsync
//!   forces them out), and every unsynced write, including one still in flight, independently
//!   survives, vanishes, or is torn: each 4 KiB block of it (not just a prefix of the write) is
//!   kept, dropped, cut at any byte or kept sector-by-sector (512 B), and a torn block may carry a
//!   flipped bit in the bytes it changed. Every open handle dies.
//! - **latency** ([`SimStorage::set_latency_polls_max`]): every operation completes only after a
//!   seeded number of executor polls (it returns `Pending` and wakes itself), and
//!   `write_at_background` really leaves its write in flight, applied only when its time comes. So
//!   a crash can catch a background write mid-air, and a test can drop an engine future between
//!   any two storage steps ([`block_on_polls`]) to crash in the middle of an operation.
//!
//! What the simulator keeps ideal: bytes that were durable stay intact (no latent sector errors,
//! and a torn rewrite of a block leaves its unchanged bytes unchanged: sector-atomic devices),
//! a write never changes a byte to anything but its old or its new value except by the injected
//! bit flip, and every created directory is durable (the real `create_dir_all` fsyncs only the
//! parent of the last component).
//!
//! The simulator asserts the [`BlockFile`] alignment contract, so engine bugs panic here.

use super::{BlockFile, OpenMode, Storage, BLOCK_BYTES};
use bytes::Bytes;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Size of a device sector: the unit a torn block may be kept in.
const SECTOR_BYTES: usize = 512;
const EIO: i32 = 5;
const ENOSPC: i32 = 28;
const EBADF: i32 = 9;

/// Probabilities of injected faults.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultConfig {
    /// Chance per million that a write, sync, read, allocate or truncate fails.
    pub io_error_per_million: u32,
    /// Chance per million that a torn block also flips one bit in the bytes it changed.
    pub bit_flip_per_million: u32,
}

/// Counts of what the simulator did, to prove a fault was exercised and not just survived.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// EIO/ENOSPC injected.
    pub io_errors_injected: u64,
    /// Writes still in flight when a crash came.
    pub writes_in_flight_at_crash: u64,
    /// Files whose length after a crash differed from their length before it.
    pub lengths_changed_by_crash: u64,
    /// Unsynced blocks a crash kept only in part (torn).
    pub blocks_torn_by_crash: u64,
    /// Polls on which an operation was still waiting (latency).
    pub polls_delayed: u64,
    /// Writes issued with `write_at_background`.
    pub background_writes: u64,
    /// Files and directories whose unsynced creation a crash took away.
    pub entries_lost_by_crash: u64,
}

/// A change to a file not yet made durable by a sync.
#[derive(Debug, Clone)]
enum Change {
    Write { pos: usize, data: Rc<[u8]> },
    SetLen(usize),
}

#[derive(Debug, Default)]
struct FileData {
    current: Vec<u8>,
    durable: Vec<u8>,
    /// Changes since the last sync, oldest first.
    unsynced: Vec<Change>,
}

impl FileData {
    /// Writes into `current` (growing the file if needed) and records the change.
    fn write(&mut self, pos: usize, data: Rc<[u8]>) {
        let end = pos + data.len();
        let grows = self.current.len() < end;
        if grows {
            resize_zeroed(&mut self.current, end);
        }
        self.current[pos..end].copy_from_slice(&data);
        self.unsynced.push(Change::Write { pos, data });
        if grows {
            self.unsynced.push(Change::SetLen(end));
        }
    }

    fn set_len(&mut self, len: usize) {
        if len != self.current.len() {
            resize_zeroed(&mut self.current, len);
            self.unsynced.push(Change::SetLen(len));
        }
    }

    /// fdatasync: data and the length needed to read it are durable.
    fn sync(&mut self) {
        self.durable.clone_from(&self.current);
        self.unsynced.clear();
    }
}

/// A write issued to the device and not yet completed.
#[derive(Debug)]
struct InFlight {
    handle: u64,
    path: PathBuf,
    pos: usize,
    data: Rc<[u8]>,
    /// The tick at which it completes.
    due: u64,
    /// The OS error it completes with, if it fails.
    error: Option<i32>,
    /// Whether a failure stays recorded on the handle (background writes) or is reported once.
    sticky: bool,
}

#[derive(Debug)]
struct Disk {
    rng: fastrand::Rng,
    faults: FaultConfig,
    latency_polls_max: u32,
    files: BTreeMap<PathBuf, FileData>,
    dirs: BTreeSet<PathBuf>,
    /// Files and directories created without a sync of their parent directory yet.
    unsynced_entries: BTreeSet<PathBuf>,
    /// Bumped by every crash; handles from an older generation fail.
    generation: u64,
    next_handle: u64,
    /// One per poll of any simulated operation: the simulated passage of time.
    tick: u64,
    in_flight: Vec<InFlight>,
    /// Failed writes per handle: (OS error, sticky).
    write_errors: BTreeMap<u64, (i32, bool)>,
    /// A one-shot failure for the next write issued, which then writes nothing.
    fail_next_write: Option<i32>,
    stats: SimStats,
}

impl Disk {
    /// Moves time one tick on and completes the writes that are due.
    fn advance(&mut self) {
        self.tick += 1;
        self.complete_due();
    }

    /// Completes the writes whose time has come, in the order they were issued.
    fn complete_due(&mut self) {
        let tick = self.tick;
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|w| w.due <= tick);
        self.in_flight = waiting;
        for w in due {
            self.complete(w);
        }
    }

    fn complete(&mut self, w: InFlight) {
        let Some(file) = self.files.get_mut(&w.path) else {
            return; // removed under a write: an engine bug the reads will show
        };
        match w.error {
            None => file.write(w.pos, w.data),
            Some(code) => {
                // A failed write may have written any of its blocks.
                for (i, block) in w.data.chunks(BLOCK_BYTES as usize).enumerate() {
                    if self.rng.bool() {
                        file.write(w.pos + i * BLOCK_BYTES as usize, block.into());
                    }
                }
                self.write_errors.insert(w.handle, (code, w.sticky));
            }
        }
    }

    /// Draws whether the next operation fails, and with which OS error.
    fn draw_error(&mut self, no_space_possible: bool) -> Option<i32> {
        let p = self.faults.io_error_per_million;
        if p == 0 || self.rng.u32(0..1_000_000) >= p {
            return None;
        }
        self.stats.io_errors_injected += 1;
        Some(if no_space_possible && self.rng.bool() {
            ENOSPC
        } else {
            EIO
        })
    }

    /// How many polls the next operation waits: often none, else up to the maximum.
    fn draw_delay(&mut self) -> u32 {
        match self.latency_polls_max {
            0 => 0,
            max if self.rng.bool() => self.rng.u32(1..=max),
            _ => 0,
        }
    }
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
            latency_polls_max: 0,
            files: BTreeMap::new(),
            dirs: BTreeSet::new(),
            unsynced_entries: BTreeSet::new(),
            generation: 0,
            next_handle: 0,
            tick: 0,
            in_flight: Vec::new(),
            write_errors: BTreeMap::new(),
            fail_next_write: None,
            stats: SimStats::default(),
        };
        SimStorage {
            disk: Rc::new(RefCell::new(disk)),
        }
    }

    /// Changes the fault probabilities (e.g. off while recovering).
    pub fn set_faults(&self, faults: FaultConfig) {
        self.disk.borrow_mut().faults = faults;
    }

    /// Makes every operation wait up to `polls_max` executor polls (0: all complete at once, and
    /// `write_at_background` is an ordinary write). Needs an executor that polls again on wake,
    /// like [`block_on`].
    pub fn set_latency_polls_max(&self, polls_max: u32) {
        self.disk.borrow_mut().latency_polls_max = polls_max;
    }

    /// Makes the next write issued (foreground or background) fail with OS error `code`,
    /// writing nothing: for tests that aim one fault at one step.
    pub fn fail_next_write(&self, code: i32) {
        self.disk.borrow_mut().fail_next_write = Some(code);
    }

    /// How many EIOs were injected so far.
    pub fn io_errors_injected(&self) -> u64 {
        self.disk.borrow().stats.io_errors_injected
    }

    /// Counts of faults exercised so far.
    pub fn stats(&self) -> SimStats {
        self.disk.borrow().stats
    }

    /// Whether any write is still in flight (issued, not completed).
    pub fn writes_in_flight(&self) -> usize {
        self.disk.borrow().in_flight.len()
    }

    /// Power loss: each file keeps its durable state plus a random part of what came after (see
    /// the module doc); writes in flight are treated as issued; open handles die.
    pub fn crash(&self) {
        let mut disk = self.disk.borrow_mut();
        let disk = &mut *disk;
        disk.stats.writes_in_flight_at_crash += disk.in_flight.len() as u64;
        for w in std::mem::take(&mut disk.in_flight) {
            if let Some(file) = disk.files.get_mut(&w.path) {
                file.unsynced.push(Change::Write {
                    pos: w.pos,
                    data: w.data,
                });
            }
        }
        disk.write_errors.clear();
        for entry in std::mem::take(&mut disk.unsynced_entries) {
            let lost = disk.files.len() + disk.dirs.len();
            disk.files.retain(|p, _| !p.starts_with(&entry));
            disk.dirs.retain(|p| !p.starts_with(&entry));
            let lost = lost - disk.files.len() - disk.dirs.len();
            disk.stats.entries_lost_by_crash += lost as u64;
        }
        for data in disk.files.values_mut() {
            let before = data.current.len();
            crash_file(&mut disk.rng, &disk.faults, &mut disk.stats, data);
            if data.current.len() != before {
                disk.stats.lengths_changed_by_crash += 1;
            }
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
                resize_zeroed(data, pos + bytes.len());
            }
            data[pos..pos + bytes.len()].copy_from_slice(bytes);
        }
    }

    /// Fails the operation with a drawn error, if one is drawn.
    fn inject_error(&self, no_space_possible: bool) -> io::Result<()> {
        match self.disk.borrow_mut().draw_error(no_space_possible) {
            Some(code) => Err(io::Error::from_raw_os_error(code)),
            None => Ok(()),
        }
    }

    /// Waits a drawn number of polls (latency), moving simulated time on each.
    fn delay(&self) -> Delay {
        let polls = self.disk.borrow_mut().draw_delay();
        Delay {
            storage: self.clone(),
            polls,
        }
    }
}

/// Applies a crash to one file (see the module doc).
fn crash_file(
    rng: &mut fastrand::Rng,
    faults: &FaultConfig,
    stats: &mut SimStats,
    f: &mut FileData,
) {
    let lengths: Vec<usize> = f
        .unsynced
        .iter()
        .filter_map(|c| match c {
            Change::SetLen(len) => Some(*len),
            Change::Write { .. } => None,
        })
        .collect();
    // Length changes reach the journal in order: some prefix of them survives.
    let kept_lengths = rng.usize(0..=lengths.len());
    let durable_len = f.durable.len();
    let mut image = std::mem::take(&mut f.durable);
    let mut seen_lengths = 0;
    for change in std::mem::take(&mut f.unsynced) {
        match change {
            Change::SetLen(len) => {
                if seen_lengths < kept_lengths {
                    resize_zeroed(&mut image, len);
                }
                seen_lengths += 1;
            }
            Change::Write { pos, data } => crash_write(rng, faults, stats, &mut image, pos, &data),
        }
    }
    let len = match kept_lengths {
        0 => durable_len,
        k => lengths[k - 1],
    };
    resize_zeroed(&mut image, len);
    f.current.clone_from(&image);
    f.durable = image;
}

/// Applies one unsynced write to a crash image: as a whole or block by block, each part kept,
/// dropped or torn.
fn crash_write(
    rng: &mut fastrand::Rng,
    faults: &FaultConfig,
    stats: &mut SimStats,
    image: &mut Vec<u8>,
    pos: usize,
    data: &[u8],
) {
    let shared_fate = rng.bool().then(|| rng.u8(0..3));
    for (i, block) in data.chunks(BLOCK_BYTES as usize).enumerate() {
        let at = pos + i * BLOCK_BYTES as usize;
        match shared_fate.unwrap_or_else(|| rng.u8(0..3)) {
            0 => {}
            1 => {
                if image.len() < at + block.len() {
                    resize_zeroed(image, at + block.len());
                }
                image[at..at + block.len()].copy_from_slice(block);
            }
            _ => {
                stats.blocks_torn_by_crash += 1;
                tear_block(rng, faults, image, at, block);
            }
        }
    }
}

/// Keeps part of a block: a prefix cut at any byte, or some of its sectors; maybe flips a bit.
fn tear_block(
    rng: &mut fastrand::Rng,
    faults: &FaultConfig,
    image: &mut Vec<u8>,
    at: usize,
    block: &[u8],
) {
    if image.len() < at + block.len() {
        resize_zeroed(image, at + block.len());
    }
    let target = &mut image[at..at + block.len()];
    let old = target.to_vec();
    if rng.bool() {
        let cut = rng.usize(0..block.len());
        target[..cut].copy_from_slice(&block[..cut]);
    } else {
        for (dst, src) in target
            .chunks_mut(SECTOR_BYTES)
            .zip(block.chunks(SECTOR_BYTES))
        {
            if rng.bool() {
                dst.copy_from_slice(src);
            }
        }
    }
    let changed: Vec<usize> = (0..block.len()).filter(|&j| target[j] != old[j]).collect();
    if !changed.is_empty() && rng.u32(0..1_000_000) < faults.bit_flip_per_million {
        let j = changed[rng.usize(0..changed.len())];
        target[j] ^= 1 << rng.u8(0..8);
    }
}

/// `v.resize(len, 0)`, fast in unoptimised test builds too (zeroed allocation plus one copy,
/// not a byte-by-byte loop): the simulator resizes MiB-sized images often.
/// The current bytes `[pos, pos + len)` of a file, cut at its end.
fn sample(data: &FileData, pos: u64, len: usize) -> Bytes {
    let start = (pos as usize).min(data.current.len());
    let end = (start + len).min(data.current.len());
    Bytes::copy_from_slice(&data.current[start..end])
}

fn resize_zeroed(v: &mut Vec<u8>, len: usize) {
    if len <= v.len() {
        v.truncate(len);
    } else {
        let mut grown = vec![0u8; len];
        grown[..v.len()].copy_from_slice(v);
        *v = grown;
    }
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found", path.display()),
    )
}

/// Waits `polls` polls, moving simulated time on each (and at least once).
struct Delay {
    storage: SimStorage,
    polls: u32,
}

impl Future for Delay {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut disk = self.storage.disk.borrow_mut();
        if disk.latency_polls_max > 0 {
            disk.advance();
        }
        if self.polls == 0 {
            return Poll::Ready(());
        }
        disk.stats.polls_delayed += 1;
        drop(disk);
        self.polls -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Waits until a handle has no write in flight.
struct Settle {
    storage: SimStorage,
    handle: u64,
}

impl Future for Settle {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut disk = self.storage.disk.borrow_mut();
        disk.complete_due();
        if !disk.in_flight.iter().any(|w| w.handle == self.handle) {
            return Poll::Ready(());
        }
        disk.advance();
        disk.stats.polls_delayed += 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Returns `Pending` once, so the caller's executor runs something else first.
async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut yielded, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await;
}

impl Storage for SimStorage {
    type File = SimFile;

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<SimFile> {
        self.delay().await;
        let handle = {
            let mut disk = self.disk.borrow_mut();
            if !disk.files.contains_key(path) {
                let parent = path.parent().unwrap_or(Path::new(""));
                let creates = matches!(
                    mode,
                    OpenMode::CreateReadWrite | OpenMode::CreateReadWriteUnsynced
                );
                if !creates || !disk.dirs.contains(parent) {
                    return Err(not_found(path));
                }
                // A new entry: the real storage fsyncs the directory before returning, unless
                // asked not to.
                disk.files.insert(path.to_path_buf(), FileData::default());
                if mode == OpenMode::CreateReadWriteUnsynced {
                    disk.unsynced_entries.insert(path.to_path_buf());
                }
            }
            disk.next_handle += 1;
            disk.next_handle
        };
        let generation = self.disk.borrow().generation;
        self.delay().await;
        Ok(SimFile {
            storage: self.clone(),
            path: path.to_path_buf(),
            generation,
            handle,
            writable: mode != OpenMode::Read,
        })
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.delay().await;
        {
            let mut disk = self.disk.borrow_mut();
            for ancestor in path.ancestors() {
                disk.dirs.insert(ancestor.to_path_buf());
            }
        }
        self.delay().await;
        Ok(())
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        self.delay().await;
        let mut disk = self.disk.borrow_mut();
        if disk.dirs.contains(path) {
            return Ok(());
        }
        let parent = path.parent().unwrap_or(Path::new(""));
        if !disk.dirs.contains(parent) {
            return Err(not_found(parent));
        }
        disk.dirs.insert(path.to_path_buf());
        disk.unsynced_entries.insert(path.to_path_buf());
        Ok(())
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.delay().await;
        {
            let mut disk = self.disk.borrow_mut();
            if !disk.dirs.contains(path) {
                return Err(not_found(path));
            }
            disk.unsynced_entries.retain(|p| p.parent() != Some(path));
        }
        self.delay().await;
        Ok(())
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.delay().await;
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
        self.delay().await;
        let disk = self.disk.borrow();
        Ok(disk.files.contains_key(path) || disk.dirs.contains(path))
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.delay().await;
        let removed = {
            let mut disk = self.disk.borrow_mut();
            disk.unsynced_entries.remove(path);
            disk.files.remove(path)
        };
        removed.ok_or_else(|| not_found(path))?;
        self.delay().await; // the directory fsync: a crash now keeps the removal
        Ok(())
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.delay().await;
        {
            let mut disk = self.disk.borrow_mut();
            disk.files.retain(|p, _| !p.starts_with(path));
            disk.dirs.retain(|p| !p.starts_with(path));
            disk.unsynced_entries.retain(|p| !p.starts_with(path));
        }
        self.delay().await;
        Ok(())
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.delay().await;
        {
            let mut disk = self.disk.borrow_mut();
            let data = disk.files.remove(from).ok_or_else(|| not_found(from))?;
            // The rename is durable: the file lives on under its new name (its directory may
            // still be unsynced, which its own entry says).
            disk.unsynced_entries.remove(from);
            disk.files.insert(to.to_path_buf(), data);
        }
        self.delay().await;
        Ok(())
    }
}

/// A handle to a simulated file; dies at the next crash. Like the real one, it has at most one
/// write of its own in flight and finishes it before any other operation on itself.
#[derive(Debug)]
pub struct SimFile {
    storage: SimStorage,
    path: PathBuf,
    generation: u64,
    /// Identifies this handle's writes in flight and its recorded write failure.
    handle: u64,
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
            return Err(io::Error::from_raw_os_error(EBADF));
        }
        Ok(())
    }

    fn check_alive(&self) -> io::Result<()> {
        self.with_data(|_| ())
    }

    /// Another handle to the same open file, sharing its writes in flight and failures.
    fn duplicate(&self) -> SimFile {
        SimFile {
            storage: self.storage.clone(),
            path: self.path.clone(),
            generation: self.generation,
            handle: self.handle,
            writable: self.writable,
        }
    }

    /// Panics if a write of this handle still in flight overlaps `[pos, pos + len)`.
    fn assert_no_write_in_flight_over(&self, pos: u64, len: usize) {
        let disk = self.storage.disk.borrow();
        let (start, end) = (pos as usize, pos as usize + len);
        for w in disk.in_flight.iter().filter(|w| w.handle == self.handle) {
            assert!(
                w.pos + w.data.len() <= start || end <= w.pos,
                "read_owned of [{start}, {end}) under a write in flight at [{}, {})",
                w.pos,
                w.pos + w.data.len()
            );
        }
    }

    /// Waits for this handle's write in flight, if any.
    async fn settle(&self) {
        Settle {
            storage: self.storage.clone(),
            handle: self.handle,
        }
        .await;
    }

    /// Waits for this handle's write in flight; an error if a background write ever failed
    /// (sticky), the last foreground write failed, or a crash came first.
    async fn settle_writes(&self) -> io::Result<()> {
        self.settle().await;
        // A crash while waiting took the write with it: never report it done.
        self.check_alive()?;
        let mut disk = self.storage.disk.borrow_mut();
        match disk.write_errors.get(&self.handle).copied() {
            Some((code, sticky)) => {
                if !sticky {
                    disk.write_errors.remove(&self.handle);
                }
                Err(io::Error::from_raw_os_error(code))
            }
            None => Ok(()),
        }
    }

    /// Issues a write to the device; it completes after a drawn delay.
    fn issue(&self, pos: u64, data: &[u8], sticky: bool) -> io::Result<()> {
        assert!(pos.is_multiple_of(BLOCK_BYTES), "unaligned write at {pos}");
        assert!(
            (data.len() as u64).is_multiple_of(BLOCK_BYTES),
            "unaligned write length {}",
            data.len()
        );
        self.check_writable()?;
        self.check_alive()?;
        let mut disk = self.storage.disk.borrow_mut();
        if let Some(code) = disk.fail_next_write.take() {
            disk.write_errors.insert(self.handle, (code, sticky));
            return Ok(());
        }
        let error = disk.draw_error(true);
        disk.stats.background_writes += u64::from(sticky);
        let due = disk.tick + u64::from(disk.draw_delay());
        disk.in_flight.push(InFlight {
            handle: self.handle,
            path: self.path.clone(),
            pos: pos as usize,
            data: data.into(),
            due,
            error,
            sticky,
        });
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
        self.settle_writes().await?;
        self.storage.delay().await;
        self.storage.inject_error(false)?;
        self.with_data(|d| sample(d, pos, len))
    }

    /// Checks the caller's promise as it goes: no write of this handle is in flight over the
    /// range when the read is issued, and the bytes it returns are still the ones that were
    /// there then (a write that raced it would show as a difference).
    fn read_owned(
        &self,
        pos: u64,
        len: usize,
    ) -> impl Future<Output = io::Result<Bytes>> + 'static {
        assert!(pos.is_multiple_of(BLOCK_BYTES), "unaligned read at {pos}");
        let file = self.duplicate();
        async move {
            file.assert_no_write_in_flight_over(pos, len);
            let issued = file.with_data(|d| sample(d, pos, len))?;
            file.storage.delay().await;
            file.storage.inject_error(false)?;
            let done = file.with_data(|d| sample(d, pos, len))?;
            assert!(
                issued == done,
                "a write touched [{pos}, {}) under a read_owned in flight",
                pos + len as u64
            );
            Ok(done)
        }
    }

    async fn settle(&self) -> io::Result<()> {
        self.settle_writes().await
    }

    async fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.settle_writes().await?;
        self.issue(pos, data, false)?;
        self.settle_writes().await
    }

    async fn write_at_background(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.settle_writes().await?;
        self.issue(pos, data, true)?;
        if self.storage.disk.borrow().latency_polls_max == 0 {
            self.settle().await; // no latency: done at once, a failure still reported later
        } else {
            yield_once().await;
        }
        Ok(())
    }

    async fn sync(&self) -> io::Result<()> {
        self.settle_writes().await?;
        self.storage.delay().await;
        self.storage.inject_error(false)?;
        self.with_data(FileData::sync)
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.settle().await;
        self.storage.delay().await;
        self.storage.inject_error(true)?;
        self.with_data(|d| {
            if d.current.len() < len as usize {
                d.set_len(len as usize);
            }
        })
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.check_writable()?;
        self.settle().await;
        self.storage.delay().await;
        self.storage.inject_error(false)?;
        self.with_data(|d| d.set_len(len as usize))
    }

    async fn size_bytes(&self) -> io::Result<u64> {
        self.settle().await;
        self.storage.delay().await;
        self.with_data(|d| d.current.len() as u64)
    }

    async fn close(self) -> io::Result<()> {
        self.settle().await;
        Ok(())
    }
}

/// Runs a future that waits on nothing but the simulator to completion on the current thread.
pub fn block_on<F: Future>(future: F) -> F::Output {
    block_on_polls(future, 10_000_000).expect("simulated future did not complete")
}

/// Polls `future` at most `polls_max` times; `None` if it did not complete by then (the caller
/// drops it, e.g. to crash in the middle of an operation).
pub fn block_on_polls<F: Future>(future: F, polls_max: u64) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..polls_max {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return Some(v);
        }
    }
    None
}

/// A clock the test moves by hand.
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: std::cell::Cell<crate::types::TimestampMs>,
}

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: crate::types::TimestampMs) -> Self {
        ManualClock {
            now_ms: std::cell::Cell::new(now_ms),
        }
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: i64) {
        assert!(ms >= 0);
        let now = self.now_ms.get();
        self.now_ms.set(crate::types::TimestampMs(now.0 + ms));
    }
}

impl super::Clock for ManualClock {
    fn now(&self) -> crate::types::TimestampMs {
        self.now_ms.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(s: &SimStorage, name: &str) -> SimFile {
        block_on(s.create_dir_all(Path::new("/d"))).unwrap();
        block_on(s.open(&Path::new("/d").join(name), OpenMode::CreateReadWrite)).unwrap()
    }

    fn faulty(seed: u64, io_error_per_million: u32) -> SimStorage {
        let faults = FaultConfig {
            io_error_per_million,
            bit_flip_per_million: 0,
        };
        SimStorage::new(seed, faults)
    }

    #[test]
    fn synced_bytes_survive_crash_unsynced_may_not() {
        let mut lengths = BTreeSet::new();
        for seed in 0..50 {
            let s = SimStorage::new(seed, FaultConfig::default());
            let f = file(&s, "a");
            block_on(f.write_at(0, &[1u8; 4096])).unwrap();
            block_on(f.sync()).unwrap();
            block_on(f.write_at(4096, &[2u8; 4096])).unwrap();
            s.crash();
            let bytes = s.file_bytes(Path::new("/d/a")).unwrap();
            assert!(bytes[..4096].iter().all(|&b| b == 1));
            assert!(bytes[4096..].iter().all(|&b| b == 2 || b == 0));
            lengths.insert(bytes.len());
            assert!(block_on(f.sync()).is_err(), "old handle must die");
        }
        assert_eq!(lengths, BTreeSet::from([4096, 8192]));
    }

    #[test]
    fn length_changes_are_durable_only_after_sync() {
        let mut seen = BTreeSet::new();
        for seed in 0..50 {
            let s = SimStorage::new(seed, FaultConfig::default());
            let f = file(&s, "len");
            block_on(f.write_at(0, &[3u8; 8192])).unwrap();
            block_on(f.sync()).unwrap();
            block_on(f.truncate(4096)).unwrap();
            block_on(f.allocate(1 << 16)).unwrap();
            s.crash();
            let bytes = s.file_bytes(Path::new("/d/len")).unwrap();
            // In order: the synced 8192, then 4096, then 65536 (its tail zeros).
            match bytes.len() {
                8192 => assert!(bytes.iter().all(|&b| b == 3)),
                4096 => assert!(bytes.iter().all(|&b| b == 3)),
                65536 => assert!(
                    bytes[..4096].iter().all(|&b| b == 3) && bytes[4096..].iter().all(|&b| b == 0)
                ),
                n => panic!("length {n} never existed"),
            }
            seen.insert(bytes.len());
            let f = block_on(s.open(Path::new("/d/len"), OpenMode::ReadWrite)).unwrap();
            block_on(f.allocate(1 << 16)).unwrap();
            block_on(f.sync()).unwrap();
            s.crash();
            assert_eq!(s.file_bytes(Path::new("/d/len")).unwrap().len(), 1 << 16);
        }
        assert_eq!(seen, BTreeSet::from([4096, 8192, 65536]));
    }

    #[test]
    fn crash_keeps_any_subset_of_blocks_and_tears_inside_them() {
        let (mut hole_before_kept, mut torn_inside) = (false, false);
        for seed in 0..200 {
            let s = SimStorage::new(seed, FaultConfig::default());
            let f = file(&s, "sub");
            block_on(f.allocate(4 * 4096)).unwrap();
            block_on(f.sync()).unwrap();
            block_on(f.write_at(0, &[9u8; 4 * 4096])).unwrap();
            s.crash();
            let bytes = s.file_bytes(Path::new("/d/sub")).unwrap();
            assert!(bytes.iter().all(|&b| b == 0 || b == 9));
            let full: Vec<bool> = bytes
                .chunks(4096)
                .map(|c| c.iter().all(|&b| b == 9))
                .collect();
            hole_before_kept |= (0..4).any(|i| !full[i] && full[i + 1..].iter().any(|&k| k));
            torn_inside |= bytes.chunks(4096).any(|c| c.contains(&0) && c.contains(&9));
        }
        assert!(hole_before_kept && torn_inside);
    }

    #[test]
    fn background_write_is_in_flight_until_settled_and_may_die_in_a_crash() {
        let mut lost_in_flight = 0;
        for seed in 0..50 {
            let s = SimStorage::new(seed, FaultConfig::default());
            s.set_latency_polls_max(20);
            let f = file(&s, "bg");
            block_on(f.write_at_background(0, &[5u8; 4096])).unwrap();
            if s.writes_in_flight() > 0 {
                // Another handle does not wait for it; this one does (reads see completed writes).
                let other = block_on(s.open(Path::new("/d/bg"), OpenMode::Read)).unwrap();
                let _ = block_on(other.read_at(0, 4096)).unwrap();
                if s.writes_in_flight() > 0 && seed % 2 == 0 {
                    s.crash();
                    lost_in_flight += 1;
                    assert!(s.stats().writes_in_flight_at_crash > 0);
                    let bytes = s.file_bytes(Path::new("/d/bg")).unwrap();
                    assert!(bytes.iter().all(|&b| b == 0 || b == 5));
                    continue;
                }
            }
            assert_eq!(&block_on(f.read_at(0, 4096)).unwrap()[..], &[5u8; 4096][..]);
            block_on(f.sync()).unwrap();
            s.crash();
            assert_eq!(s.file_bytes(Path::new("/d/bg")).unwrap(), vec![5u8; 4096]);
        }
        assert!(lost_in_flight > 0);
    }

    #[test]
    fn write_caught_in_flight_by_a_crash_never_reports_success() {
        let mut caught = 0;
        for seed in 0..20 {
            let s = SimStorage::new(seed, FaultConfig::default());
            s.set_latency_polls_max(1000);
            let f = file(&s, "mid");
            let mut write = pin!(f.write_at(0, &[4u8; 4096]));
            let mut cx = Context::from_waker(Waker::noop());
            let mut ready = write.as_mut().poll(&mut cx);
            if ready.is_pending() {
                s.crash();
                ready = write.as_mut().poll(&mut cx);
                assert!(matches!(ready, Poll::Ready(Err(_))), "seed {seed}");
                caught += 1;
            }
        }
        assert!(caught > 0);
    }

    #[test]
    fn background_write_failure_is_sticky() {
        let s = faulty(3, 0);
        s.set_latency_polls_max(5);
        let f = file(&s, "sticky");
        s.set_faults(FaultConfig {
            io_error_per_million: 1_000_000,
            bit_flip_per_million: 0,
        });
        block_on(f.write_at_background(0, &[1u8; 4096])).unwrap();
        s.set_faults(FaultConfig::default());
        assert!(
            block_on(f.read_at(0, 4096)).is_err(),
            "reads report it too: they would see bytes that never arrived"
        );
        let failed = block_on(f.sync()).unwrap_err();
        assert!(matches!(failed.raw_os_error(), Some(EIO | ENOSPC)));
        assert!(block_on(f.write_at(0, &[1u8; 4096])).is_err());
        assert!(block_on(f.sync()).is_err(), "still failing");
    }

    #[test]
    fn foreground_write_failure_is_reported_once() {
        let s = faulty(4, 1_000_000);
        let f = file(&s, "fg");
        assert!(block_on(f.write_at(0, &[1u8; 4096])).is_err());
        s.set_faults(FaultConfig::default());
        block_on(f.write_at(0, &[1u8; 4096])).unwrap();
        block_on(f.sync()).unwrap();
    }

    #[test]
    fn latency_makes_operations_take_polls() {
        let s = SimStorage::new(9, FaultConfig::default());
        s.set_latency_polls_max(50);
        let f = file(&s, "slow");
        let writes = async {
            for i in 0..20 {
                f.write_at(i * 4096, &[1u8; 4096]).await.unwrap();
            }
        };
        assert!(block_on_polls(writes, 3).is_none(), "dropped mid-way");
        assert!(s.stats().polls_delayed > 0);
    }

    #[test]
    fn eio_is_injected_by_seed() {
        let s = faulty(7, 500_000);
        let f = file(&s, "b");
        let errors = (0..100)
            .filter(|_| block_on(f.write_at(0, &[0u8; 4096])).is_err())
            .count();
        assert!(errors > 10 && errors < 90);
        assert_eq!(s.io_errors_injected() as usize, errors);
    }

    #[test]
    fn unsynced_entries_vanish_in_a_crash_until_their_directory_is_synced() {
        let s = SimStorage::new(1, FaultConfig::default());
        block_on(s.create_dir_all(Path::new("/d"))).unwrap();
        block_on(s.create_dir(Path::new("/d/p"))).unwrap();
        let f = block_on(s.open(Path::new("/d/p/a"), OpenMode::CreateReadWriteUnsynced)).unwrap();
        block_on(f.write_at(0, &[1u8; 4096])).unwrap();
        block_on(f.sync()).unwrap();
        s.crash();
        assert!(
            !block_on(s.exists(Path::new("/d/p"))).unwrap(),
            "its directory was never synced"
        );
        assert_eq!(s.stats().entries_lost_by_crash, 2);
        block_on(s.create_dir(Path::new("/d/p"))).unwrap();
        let f = block_on(s.open(Path::new("/d/p/a"), OpenMode::CreateReadWriteUnsynced)).unwrap();
        block_on(s.sync_dir(Path::new("/d"))).unwrap();
        block_on(f.write_at(0, &[2u8; 4096])).unwrap();
        block_on(f.sync()).unwrap();
        s.crash();
        assert!(
            block_on(s.exists(Path::new("/d/p"))).unwrap(),
            "its directory was synced"
        );
        assert!(
            s.file_bytes(Path::new("/d/p/a")).is_none(),
            "the file's own entry was not"
        );
        let f = block_on(s.open(Path::new("/d/p/a"), OpenMode::CreateReadWriteUnsynced)).unwrap();
        block_on(s.sync_dir(Path::new("/d/p"))).unwrap();
        block_on(f.write_at(0, &[3u8; 4096])).unwrap();
        block_on(f.sync()).unwrap();
        s.crash();
        assert_eq!(s.file_bytes(Path::new("/d/p/a")).unwrap(), vec![3u8; 4096]);
    }

    #[test]
    #[should_panic(expected = "unaligned write")]
    fn unaligned_write_is_an_engine_bug() {
        let s = SimStorage::new(1, FaultConfig::default());
        let _ = block_on(file(&s, "c").write_at(0, &[0u8; 100]));
    }
}
