//! The real storage: glommio `DmaFile`s (io_uring + O_DIRECT). The only file that knows glommio.
//!
//! Traps handled here:
//! - glommio 0.9 decides once per device and process whether polled reads work, from the first
//!   DMA open. If that open is read-write of an EMPTY file, the probe read "succeeds" with 0 bytes,
//!   the device is marked pollable, and every later `read_at_aligned` fails with EOPNOTSUPP.
//!   [`GlommioStorage`] therefore primes each directory's device by opening a non-empty probe file
//!   read-only before its first real open.
//! - Alignment is [`BLOCK_BYTES`] (4096), not the 512 `DmaFile::alignment()` reports.
//! - Nothing here blocks the shard's thread: a blocking call stalls every partition, group and
//!   connection the core serves. Directory fsyncs go through io_uring (glommio's
//!   `Directory::open` and `sync`); renames and removals through glommio's `io::rename` and
//!   `io::remove`, which run them on the executor's blocking thread, as [`off_thread`] runs the
//!   rest (mkdir -p, readdir, stat, rm -r).

use super::{BlockFile, OpenMode, Storage, WriteBuffer, BLOCK_BYTES};
use bytes::{Bytes, BytesMut};
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use std::cell::RefCell;
use std::collections::HashSet;
use std::io;
use std::path::Path;
use std::rc::Rc;

/// Name of the probe file used to prime glommio's per-device poll detection.
const PROBE_FILE_NAME: &str = ".rill-dma-probe";

/// Largest single disk read of [`GlommioFile::read_owned`]: a larger read is issued as pieces
/// of this size, all at once. glommio takes a read's DMA buffer from the executor's registered
/// `io_memory` (no page pinning per read) when a buddy block of the read's size is free there,
/// else from fresh memory, which the kernel pins page by page on every read (about a tenth of
/// the broker's CPU in a catch-up of 1 MB batches). With the default 2 MiB of io_memory no
/// 2 MiB block is ever free (the allocator keeps its metadata there), but several 256 KiB are.
const READ_PIECE_BYTES: usize = 256 << 10;

/// Storage on the local file system through glommio DMA files. Must be used inside a glommio executor.
#[derive(Debug, Default)]
pub struct GlommioStorage {
    /// Devices (`st_dev`) primed (see the module doc).
    primed: RefCell<HashSet<u64>>,
    /// Write buffers that came back from full-buffer writes, for the next append to reuse.
    buffers: Rc<BufferPool>,
}

impl GlommioStorage {
    /// A storage handle; cheap, holds no files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a non-empty file read-only in `dir` so glommio probes polled reads correctly, once
    /// per device (glommio decides per device; a probe per partition directory cost a file
    /// creation and removal in each of 10,000 partitions at start-up).
    async fn prime(&self, dir: &Path) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let device = off_thread(dir, |dir| Ok(std::fs::metadata(dir)?.dev())).await?;
        if self.primed.borrow().contains(&device) {
            return Ok(());
        }
        let probe = dir.join(PROBE_FILE_NAME);
        off_thread(&probe, |probe| {
            std::fs::write(probe, vec![0u8; BLOCK_BYTES as usize])
        })
        .await?;
        let file = OpenOptions::new()
            .read(true)
            .dma_open(&probe)
            .await
            .map_err(to_io)?;
        file.close().await.map_err(to_io)?;
        glommio::io::remove(&probe).await.map_err(to_io)?;
        self.primed.borrow_mut().insert(device);
        Ok(())
    }
}

/// Converts glommio's error into `std::io::Error`, keeping the OS error code when there is one.
fn to_io(e: glommio::GlommioError<()>) -> io::Error {
    io::Error::from(e)
}

/// fsyncs a directory so that entries created, removed or renamed in it are durable (open and
/// fdatasync through io_uring).
async fn sync_dir(dir: &Path) -> io::Result<()> {
    let directory = glommio::io::Directory::open(dir).await.map_err(to_io)?;
    let synced = directory.sync().await.map_err(to_io);
    directory.close().await.map_err(to_io)?;
    synced
}

/// Runs a blocking file-system call on the executor's blocking thread, so the shard's thread
/// goes on serving while the kernel works (for what io_uring has no operation for).
async fn off_thread<T: Send + 'static>(
    path: &Path,
    call: impl FnOnce(&Path) -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let path = path.to_path_buf();
    glommio::executor()
        .spawn_blocking(move || call(&path))
        .await
}

/// The parent directory of `path`, whose fsync makes `path`'s entry durable.
fn parent_of(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new("."))
}

impl Storage for GlommioStorage {
    type File = GlommioFile;

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<GlommioFile> {
        let dir = parent_of(path);
        self.prime(dir).await?;
        let existed = match mode {
            // An open without create fails on a missing file: nothing to make durable.
            OpenMode::Read | OpenMode::ReadWrite => true,
            OpenMode::CreateReadWrite | OpenMode::CreateReadWriteUnsynced => {
                self.exists(path).await?
            }
        };
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateReadWrite | OpenMode::CreateReadWriteUnsynced => {
                options.read(true).write(true).create(true)
            }
        };
        let file = options.dma_open(path).await.map_err(to_io)?;
        if !existed && mode != OpenMode::CreateReadWriteUnsynced {
            sync_dir(dir).await?;
        }
        Ok(GlommioFile::new(file, self.buffers.clone()))
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        // `true` when it was there already: durable, so no fsync of the parent at every open.
        let existed = off_thread(path, |path| {
            if path.is_dir() {
                return Ok(true);
            }
            std::fs::create_dir_all(path).map(|()| false)
        })
        .await?;
        if !existed {
            if let Some(parent) = path.parent() {
                sync_dir(parent).await?;
            }
        }
        Ok(())
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        off_thread(path, |path| match std::fs::create_dir(path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        })
        .await
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        sync_dir(path).await
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        off_thread(path, |path| {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(path)? {
                let entry = entry?;
                if entry.file_type()?.is_file() && entry.file_name() != PROBE_FILE_NAME {
                    names.push(entry.file_name().to_string_lossy().into_owned());
                }
            }
            Ok(names)
        })
        .await
    }

    async fn exists(&self, path: &Path) -> io::Result<bool> {
        off_thread(path, |path| Ok(path.exists())).await
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        glommio::io::remove(path).await.map_err(to_io)?;
        sync_dir(parent_of(path)).await
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        off_thread(path, |path| std::fs::remove_dir_all(path)).await?;
        sync_dir(parent_of(path)).await
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        glommio::io::rename(from, to).await.map_err(to_io)?;
        sync_dir(parent_of(to)).await
    }
}

/// Write buffers kept for reuse, per storage (so per core). A fresh buffer of a MiB costs
/// page faults and kernel page clearing on first touch - as much as the copy into it - and the
/// append path needs a new one every MiB. Bounded, and shared by all files, so an idle
/// partition holds none.
#[derive(Debug, Default)]
struct BufferPool {
    spare: RefCell<Vec<DmaBuffer>>,
}

impl BufferPool {
    /// Buffers kept at most (the append path has one filling and one in flight per partition).
    const BUFFERS_MAX: usize = 8;

    /// A kept buffer of exactly `len` bytes, if any.
    fn take(&self, len: usize) -> Option<DmaBuffer> {
        let mut spare = self.spare.borrow_mut();
        let i = spare.iter().position(|b| b.len() == len)?;
        Some(spare.swap_remove(i))
    }

    /// Keeps `buf` for reuse unless the pool is full.
    fn give(&self, buf: DmaBuffer) {
        let mut spare = self.spare.borrow_mut();
        if spare.len() < Self::BUFFERS_MAX {
            spare.push(buf);
        }
    }
}

/// One O_DIRECT file, with at most one write in flight in the background (see
/// [`BlockFile::write_at_background`]): every other operation first waits for it.
///
/// Reads go through io_uring into glommio's buffers and are copied once into `Bytes`: those
/// buffers are `!Send` and a Fetch response may be written by another core. The copy-free
/// alternative (O_DIRECT `pread` on the blocking thread into an owned buffer) measured slower;
/// the bench `engine_read` compares both.
#[derive(Debug)]
pub struct GlommioFile {
    file: Rc<DmaFile>,
    /// The background write not yet waited for.
    in_flight: RefCell<Option<glommio::Task<io::Result<()>>>>,
    /// Set once a background write failed; every later write and sync reports it.
    write_failed: RefCell<Option<(io::ErrorKind, Option<i32>)>>,
    /// The storage's pool of reusable write buffers.
    buffers: Rc<BufferPool>,
}

impl GlommioFile {
    fn new(file: DmaFile, buffers: Rc<BufferPool>) -> Self {
        GlommioFile {
            file: Rc::new(file),
            in_flight: RefCell::new(None),
            write_failed: RefCell::new(None),
            buffers,
        }
    }

    /// Waits for the background write, if any, and records its failure.
    async fn settle(&self) {
        let task = self.in_flight.borrow_mut().take();
        if let Some(task) = task {
            if let Err(e) = task.await {
                tracing::warn!(error = %e, "background write failed");
                *self.write_failed.borrow_mut() = Some((e.kind(), e.raw_os_error()));
            }
        }
    }

    /// Waits for the background write; an error if any background write ever failed.
    async fn settle_writes(&self) -> io::Result<()> {
        self.settle().await;
        // Copied out so no borrow is held; the OS code is kept (ENOSPC maps to StorageFull).
        let failed = *self.write_failed.borrow();
        match failed {
            Some((_, Some(code))) => Err(io::Error::from_raw_os_error(code)),
            Some((kind, None)) => Err(io::Error::new(kind, "an earlier background write failed")),
            None => Ok(()),
        }
    }

    /// Copies `data` into a DMA buffer and returns the write future (owning what it needs).
    fn start_write(
        &self,
        pos: u64,
        data: &[u8],
    ) -> impl std::future::Future<Output = io::Result<()>> + 'static {
        let mut buf = self.file.alloc_dma_buffer(data.len());
        buf.as_bytes_mut().copy_from_slice(data);
        self.start_write_buffer(pos, buf, data.len(), false)
    }

    /// Returns the future writing the first `len` bytes of `buf` at `pos` (no copy).
    /// A lent buffer (`lent`: from [`BlockFile::alloc_buffer`]) written whole goes back to the
    /// pool afterwards; a trimmed one cannot (trimming is permanent) and is freed, as are the
    /// one-off buffers of small-file writes.
    fn start_write_buffer(
        &self,
        pos: u64,
        mut buf: DmaBuffer,
        len: usize,
        lent: bool,
    ) -> impl std::future::Future<Output = io::Result<()>> + 'static {
        assert!(pos.is_multiple_of(BLOCK_BYTES));
        assert!((len as u64).is_multiple_of(BLOCK_BYTES));
        assert!(len <= buf.len());
        let reusable = lent && len == buf.len();
        buf.trim_to_size(len);
        let (file, pool) = (self.file.clone(), self.buffers.clone());
        async move {
            let buf = Rc::new(buf);
            let written = file.write_rc_at(buf.clone(), pos).await;
            if let (true, Ok(buf)) = (reusable, Rc::try_unwrap(buf)) {
                pool.give(buf);
            }
            let written = written.map_err(to_io)?;
            if written != len {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("short write {written}"),
                ));
            }
            Ok(())
        }
    }

    /// Runs `write` in the background (at most one in flight; see the struct doc).
    async fn spawn_write(
        &self,
        write: impl std::future::Future<Output = io::Result<()>> + 'static,
    ) -> io::Result<()> {
        let task = glommio::spawn_local(write);
        *self.in_flight.borrow_mut() = Some(task);
        // Let the write task run and its request reach the kernel before more appends fill
        // the next buffer: yielding only the task would resume this task at once, leaving the
        // request queued in user space until the executor next polls I/O (i.e. when the next
        // buffer is full), which serialises filling and writing. Yielding the task queue sends
        // the executor through its I/O poll (submission) first.
        glommio::executor().yield_task_queue_now().await;
        Ok(())
    }
}

impl WriteBuffer for DmaBuffer {
    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.as_bytes_mut()
    }
}

/// Appends what `bytes` still lacks of its `len` from one read piece of `asked` bytes; false
/// once the piece is short (the end of the file), so the caller reads no further piece.
fn keep_piece(bytes: &mut BytesMut, len: usize, piece: &[u8], asked: usize) -> bool {
    let want = (len - bytes.len()).min(piece.len());
    bytes.extend_from_slice(&piece[..want]);
    piece.len() == asked
}

impl BlockFile for GlommioFile {
    type Buffer = DmaBuffer;

    fn alloc_buffer(&self, len: usize) -> DmaBuffer {
        assert!((len as u64).is_multiple_of(BLOCK_BYTES));
        self.buffers
            .take(len)
            .unwrap_or_else(|| self.file.alloc_dma_buffer(len))
    }

    async fn write_buffer_at(&self, pos: u64, buf: DmaBuffer, len: usize) -> io::Result<()> {
        self.settle_writes().await?;
        self.start_write_buffer(pos, buf, len, true).await
    }

    async fn write_buffer_background(
        &self,
        pos: u64,
        buf: DmaBuffer,
        len: usize,
    ) -> io::Result<()> {
        self.settle_writes().await?;
        self.spawn_write(self.start_write_buffer(pos, buf, len, true))
            .await
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        // A failed background write must fail reads too: they would find bytes that never
        // arrived and call a healthy log corrupt.
        self.settle_writes().await?;
        self.read_owned(pos, len).await
    }

    fn read_owned(
        &self,
        pos: u64,
        len: usize,
    ) -> impl std::future::Future<Output = io::Result<Bytes>> + 'static {
        assert!(pos.is_multiple_of(BLOCK_BYTES));
        let file = self.file.clone();
        async move {
            let aligned_len = super::align_up(len as u64) as usize;
            // All pieces are issued together by the first poll (join_all polls each once).
            let pieces = (0..aligned_len).step_by(READ_PIECE_BYTES).map(|at| {
                let piece = READ_PIECE_BYTES.min(aligned_len - at);
                file.read_at_aligned(pos + at as u64, piece)
            });
            let pieces = futures::future::join_all(pieces).await;
            let mut bytes = BytesMut::with_capacity(len);
            for piece in pieces {
                if !keep_piece(&mut bytes, len, &piece.map_err(to_io)?, READ_PIECE_BYTES) {
                    break;
                }
            }
            Ok(bytes.freeze())
        }
    }

    fn read_owned_paced(
        &self,
        pos: u64,
        len: usize,
        gate: Rc<super::gate::FlushGate>,
    ) -> impl std::future::Future<Output = io::Result<Bytes>> + 'static {
        assert!(pos.is_multiple_of(BLOCK_BYTES));
        let file = self.file.clone();
        async move {
            let aligned_len = super::align_up(len as u64) as usize;
            let (mut bytes, mut at) = (BytesMut::with_capacity(len), 0);
            while at < aligned_len {
                let turn = gate.read_turn().await;
                // The gate sizes each piece (what a flush may find ahead of it), within the
                // size io_memory serves without pinning pages.
                let asked = turn
                    .piece_bytes()
                    .min(READ_PIECE_BYTES)
                    .min(aligned_len - at);
                let piece = file
                    .read_at_aligned(pos + at as u64, asked)
                    .await
                    .map_err(to_io)?;
                drop(turn);
                if !keep_piece(&mut bytes, len, &piece, asked) {
                    break;
                }
                at += asked;
            }
            Ok(bytes.freeze())
        }
    }

    fn run_detached(&self, task: futures::future::LocalBoxFuture<'static, ()>) {
        glommio::spawn_local(task).detach();
    }

    async fn settle(&self) -> io::Result<()> {
        self.settle_writes().await
    }

    async fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.settle_writes().await?;
        self.start_write(pos, data).await
    }

    async fn write_at_background(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.settle_writes().await?;
        self.spawn_write(self.start_write(pos, data)).await
    }

    async fn sync(&self) -> io::Result<()> {
        self.settle_writes().await?;
        self.file.fdatasync().await.map_err(to_io)
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        self.settle().await;
        self.file.pre_allocate(len, false).await.map_err(to_io)
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.settle().await;
        self.file.truncate(len).await.map_err(to_io)
    }

    async fn size_bytes(&self) -> io::Result<u64> {
        self.settle().await;
        self.file.file_size().await.map_err(to_io)
    }

    async fn close(self) -> io::Result<()> {
        self.settle().await;
        self.file.close_rc().await.map_err(to_io)?;
        Ok(())
    }
}

/// A single-thread glommio executor driven from the calling thread, for tests, benches and tools
/// that need the real storage without owning a runtime setup of their own.
pub struct LocalRuntime {
    executor: glommio::LocalExecutor,
}

impl LocalRuntime {
    /// An executor with `io_memory_bytes` of registered DMA memory (keep it small: the memlock
    /// limit is per process).
    pub fn new(io_memory_bytes: usize) -> io::Result<Self> {
        let builder = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(io_memory_bytes);
        let executor = builder.make().map_err(io::Error::from)?;
        Ok(LocalRuntime { executor })
    }

    /// Runs `future` to completion on this thread.
    pub fn block_on<T>(&self, future: impl std::future::Future<Output = T> + 'static) -> T {
        self.executor.run(future)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::gate::FlushGate;

    /// The directory operations, now off the shard's thread, do what std::fs did: create (nested,
    /// and again), list only files and never the probe, rename, remove, and report existence.
    #[test]
    fn directory_operations_create_list_rename_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let runtime = LocalRuntime::new(1 << 20).unwrap();
        runtime.block_on(async move {
            let storage = GlommioStorage::new();
            let nested = root.join("a/b");
            storage.create_dir_all(&nested).await.unwrap();
            storage.create_dir_all(&nested).await.unwrap();
            storage.create_dir(&nested.join("c")).await.unwrap();
            storage.create_dir(&nested.join("c")).await.unwrap();
            assert!(storage.exists(&nested.join("c")).await.unwrap());
            let file = storage
                .open(&nested.join("x.log"), OpenMode::CreateReadWrite)
                .await
                .unwrap();
            file.close().await.unwrap();
            assert_eq!(storage.list_dir(&nested).await.unwrap(), vec!["x.log"]);
            storage
                .rename(&nested.join("x.log"), &nested.join("y.log"))
                .await
                .unwrap();
            assert!(!storage.exists(&nested.join("x.log")).await.unwrap());
            assert_eq!(storage.list_dir(&nested).await.unwrap(), vec!["y.log"]);
            storage.remove_file(&nested.join("y.log")).await.unwrap();
            assert!(storage.list_dir(&nested).await.unwrap().is_empty());
            let missing = storage.open(&nested.join("gone"), OpenMode::Read).await;
            assert!(missing.is_err());
            assert!(storage.list_dir(&root.join("none")).await.is_err());
            storage.remove_dir_all(&root.join("a")).await.unwrap();
            assert!(!storage.exists(&root.join("a")).await.unwrap());
        });
    }

    /// A paced read is issued in pieces of at most the gate's piece size, one turn each, and
    /// returns exactly the bytes of one unpaced read (an odd length, to the end of the file).
    #[test]
    fn a_paced_read_reads_pieces_of_at_most_the_gate_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let data: Vec<u8> = (0..(1 << 20) + 5000).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let runtime = LocalRuntime::new(1 << 20).unwrap();
        runtime.block_on(async move {
            let storage = GlommioStorage::new();
            let file = storage.open(&path, OpenMode::Read).await.unwrap();
            for (piece, pos) in [(64 << 10, 0), (4096, 8192), (256 << 10, 4096)] {
                let gate = Rc::new(FlushGate::default());
                gate.set_piece_bytes(piece);
                let len = data.len() - pos;
                let paced = file
                    .read_owned_paced(pos as u64, len, gate.clone())
                    .await
                    .unwrap();
                assert_eq!(&paced[..], &data[pos..], "piece {piece}");
                let aligned = crate::io::align_up(len as u64) as usize;
                assert_eq!(
                    gate.turns() as usize,
                    aligned.div_ceil(piece),
                    "piece {piece}"
                );
                let whole = file.read_owned(pos as u64, len).await.unwrap();
                assert_eq!(paced, whole);
            }
            file.close().await.unwrap();
        });
    }
}
