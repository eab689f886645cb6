//! The real storage: glommio `DmaFile`s (io_uring + O_DIRECT). The only file that knows glommio.
//!
//! Traps handled here:
//! - glommio 0.9 decides once per device and process whether polled reads work, from the first
//!   DMA open. If that open is read-write of an EMPTY file, the probe read "succeeds" with 0 bytes,
//!   the device is marked pollable, and every later `read_at_aligned` fails with EOPNOTSUPP.
//!   [`GlommioStorage`] therefore primes each directory's device by opening a non-empty probe file
//!   read-only before its first real open.
//! - Alignment is [`BLOCK_BYTES`] (4096), not the 512 `DmaFile::alignment()` reports.
//! - Directory-level operations (mkdir, readdir, remove, rename) are rare (open, roll, retention)
//!   and use std::fs plus an explicit directory fsync.

use super::{BlockFile, OpenMode, Storage, BLOCK_BYTES};
use bytes::Bytes;
use glommio::io::{DmaFile, OpenOptions};
use std::cell::RefCell;
use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Name of the probe file used to prime glommio's per-device poll detection.
const PROBE_FILE_NAME: &str = ".rill-dma-probe";

/// Storage on the local file system through glommio DMA files. Must be used inside a glommio executor.
#[derive(Debug, Default)]
pub struct GlommioStorage {
    /// Directories whose device has been primed (see the module doc).
    primed: RefCell<HashSet<PathBuf>>,
}

impl GlommioStorage {
    /// A storage handle; cheap, holds no files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens a non-empty file read-only in `dir` so glommio probes polled reads correctly.
    async fn prime(&self, dir: &Path) -> io::Result<()> {
        if self.primed.borrow().contains(dir) {
            return Ok(());
        }
        let probe = dir.join(PROBE_FILE_NAME);
        std::fs::write(&probe, vec![0u8; BLOCK_BYTES as usize])?;
        let file = OpenOptions::new()
            .read(true)
            .dma_open(&probe)
            .await
            .map_err(to_io)?;
        file.close().await.map_err(to_io)?;
        std::fs::remove_file(&probe)?;
        self.primed.borrow_mut().insert(dir.to_path_buf());
        Ok(())
    }
}

/// Converts glommio's error into `std::io::Error`, keeping the OS error code when there is one.
fn to_io(e: glommio::GlommioError<()>) -> io::Error {
    io::Error::from(e)
}

/// fsyncs a directory so that entries created, removed or renamed in it are durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

impl Storage for GlommioStorage {
    type File = GlommioFile;

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<GlommioFile> {
        let dir = path.parent().unwrap_or(Path::new("."));
        self.prime(dir).await?;
        let existed = path.exists();
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateReadWrite => options.read(true).write(true).create(true),
        };
        let file = options.dma_open(path).await.map_err(to_io)?;
        if !existed {
            sync_dir(dir)?;
        }
        Ok(GlommioFile::new(file))
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)?;
        if let Some(parent) = path.parent() {
            sync_dir(parent)?;
        }
        Ok(())
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(names.into_iter().filter(|n| n != PROBE_FILE_NAME).collect())
    }

    async fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(path.exists())
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)?;
        sync_dir(path.parent().unwrap_or(Path::new(".")))
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)?;
        sync_dir(path.parent().unwrap_or(Path::new(".")))
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)?;
        sync_dir(to.parent().unwrap_or(Path::new(".")))
    }
}

/// One O_DIRECT file, with at most one write in flight in the background (see
/// [`BlockFile::write_at_background`]): every other operation first waits for it.
#[derive(Debug)]
pub struct GlommioFile {
    file: Rc<DmaFile>,
    /// The background write not yet waited for.
    in_flight: RefCell<Option<glommio::Task<io::Result<()>>>>,
    /// Set once a background write failed; every later write and sync reports it.
    write_failed: RefCell<Option<(io::ErrorKind, Option<i32>)>>,
}

impl GlommioFile {
    fn new(file: DmaFile) -> Self {
        GlommioFile {
            file: Rc::new(file),
            in_flight: RefCell::new(None),
            write_failed: RefCell::new(None),
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
        assert!(pos.is_multiple_of(BLOCK_BYTES));
        assert!((data.len() as u64).is_multiple_of(BLOCK_BYTES));
        let mut buf = self.file.alloc_dma_buffer(data.len());
        buf.as_bytes_mut().copy_from_slice(data);
        let (file, len) = (self.file.clone(), data.len());
        async move {
            let written = file.write_at(buf, pos).await.map_err(to_io)?;
            if written != len {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("short write {written}"),
                ));
            }
            Ok(())
        }
    }
}

impl BlockFile for GlommioFile {
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        assert!(pos.is_multiple_of(BLOCK_BYTES));
        self.settle().await;
        let aligned_len = super::align_up(len as u64) as usize;
        let result = self
            .file
            .read_at_aligned(pos, aligned_len)
            .await
            .map_err(to_io)?;
        let n = result.len().min(len);
        // One copy out of the DMA buffer: glommio buffers are !Send and `Bytes` needs a Send owner.
        Ok(Bytes::copy_from_slice(&result[..n]))
    }

    async fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.settle_writes().await?;
        self.start_write(pos, data).await
    }

    async fn write_at_background(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.settle_writes().await?;
        let task = glommio::spawn_local(self.start_write(pos, data));
        *self.in_flight.borrow_mut() = Some(task);
        // Let the write task run now so its request reaches io_uring before more appends.
        glommio::executor().yield_now().await;
        Ok(())
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
