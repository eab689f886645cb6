//! The engine's view of storage: a directory-ish [`Storage`] handing out [`BlockFile`]s, and a [`Clock`].
//!
//! The engine owns no runtime. Everything it needs from the OS goes through these traits so that
//! tests can swap in [`sim::SimStorage`] (seeded faults) and production uses [`glommio::GlommioStorage`]
//! (io_uring + O_DIRECT) from the one file at the edge.
//!
//! Contract of a [`BlockFile`] (what the engine relies on, what the simulator enforces):
//! - writes start at a multiple of [`BLOCK_BYTES`] and are a whole number of blocks long;
//! - reads start at a multiple of [`BLOCK_BYTES`]; they may return fewer bytes at end of file;
//! - bytes written are readable at once but durable only after [`BlockFile::sync`];
//! - `allocate`/`truncate` change the file length at once; the new length is durable after the
//!   next [`BlockFile::sync`] (fdatasync carries size changes);
//! - a failed background write is reported by every later write, sync and read (sticky);
//! - [`BlockFile::read_owned`] does not wait for writes: its caller reads only bytes that no write
//!   in flight or to come touches (the simulator checks this).
//!
//! Futures are `!Send` by design (thread-per-core): the traits use `async fn`.

pub mod gate;
pub mod glommio;
pub mod sim;

use crate::types::TimestampMs;
use bytes::Bytes;
use futures::future::LocalBoxFuture;
use std::future::Future;
use std::io;
use std::path::Path;
use std::rc::Rc;

/// Alignment of every disk write and read: the device's physical block size (not the 512 that
/// `DmaFile::alignment()` reports).
pub const BLOCK_BYTES: u64 = 4096;

/// Rounds `v` down to a multiple of [`BLOCK_BYTES`].
pub fn align_down(v: u64) -> u64 {
    v - v % BLOCK_BYTES
}

/// Rounds `v` up to a multiple of [`BLOCK_BYTES`].
pub fn align_up(v: u64) -> u64 {
    align_down(v + BLOCK_BYTES - 1)
}

/// How to open a file.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Existing file, read only.
    Read,
    /// Existing file, read and write.
    ReadWrite,
    /// Create if missing, read and write.
    CreateReadWrite,
    /// Create if missing, read and write; a new file's directory entry is durable only after
    /// [`Storage::sync_dir`] of its directory (a crash before that may take the file away).
    CreateReadWriteUnsynced,
}

/// An aligned buffer lent by a [`BlockFile`]: the append path fills it in place and gives it
/// back to be written, so record bytes are copied once (request -> DMA buffer), not twice.
pub trait WriteBuffer {
    /// The whole buffer.
    fn bytes(&self) -> &[u8];
    /// The whole buffer, writable.
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl WriteBuffer for Vec<u8> {
    fn bytes(&self) -> &[u8] {
        self
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }
}

/// A file read and written in aligned blocks, positionally (O_DIRECT semantics).
#[allow(async_fn_in_trait)] // !Send futures are intended: one core owns each file.
pub trait BlockFile {
    /// The buffer type [`Self::alloc_buffer`] lends (DMA memory for the real disk).
    type Buffer: WriteBuffer;
    /// A buffer of `len` bytes (a multiple of [`BLOCK_BYTES`]) suitable for
    /// [`Self::write_buffer_at`]; its content is unspecified.
    fn alloc_buffer(&self, len: usize) -> Self::Buffer;
    /// Writes the first `len` bytes of `buf` at `pos` (both multiples of [`BLOCK_BYTES`]),
    /// consuming the buffer so the real disk can hand it to the kernel without a copy.
    async fn write_buffer_at(&self, pos: u64, buf: Self::Buffer, len: usize) -> io::Result<()> {
        self.write_at(pos, &buf.bytes()[..len]).await
    }
    /// [`Self::write_buffer_at`] in the background, with the rules of
    /// [`Self::write_at_background`].
    async fn write_buffer_background(
        &self,
        pos: u64,
        buf: Self::Buffer,
        len: usize,
    ) -> io::Result<()> {
        self.write_at_background(pos, &buf.bytes()[..len]).await
    }
    /// Reads up to `len` bytes at `pos` (both aligned); shorter only at end of file.
    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes>;
    /// [`Self::read_at`] as a future that owns what it needs, so it can stay in flight while
    /// its caller goes on (read-ahead); the read is issued by its first poll. It does not wait
    /// for background writes: the caller guarantees that no write in flight or to come touches
    /// `[pos, pos + len)` (bytes of a sealed segment, or below the active segment's settled
    /// tail block, see [`Self::settle`]).
    fn read_owned(&self, pos: u64, len: usize)
        -> impl Future<Output = io::Result<Bytes>> + 'static;
    /// [`Self::read_owned`] paced behind the core's durable flushes: its pieces are read one
    /// per turn of `gate` (see [`gate::FlushGate`]), so a flush waits behind at most one piece
    /// of the core's paced reads. A turn is held while a piece is in flight: whoever polls
    /// the read first must drive it to its end. Default: the whole read, issued once a turn
    /// comes (not held across it: a simulated load may stay in flight until a reader awaits).
    fn read_owned_paced(
        &self,
        pos: u64,
        len: usize,
        gate: Rc<gate::FlushGate>,
    ) -> impl Future<Output = io::Result<Bytes>> + 'static {
        let read = self.read_owned(pos, len);
        async move {
            drop(gate.read_turn().await);
            read.await
        }
    }
    /// Drives `task` to its end on this core with nobody awaiting it, so a read-ahead load
    /// finishes (copied, verified, ready in the read cache) when its bytes arrive, not when
    /// the next read asks for them. Default: `task` is dropped, and the load runs when a reader
    /// first awaits it.
    fn run_detached(&self, task: LocalBoxFuture<'static, ()>) {
        drop(task);
    }
    /// Waits until no background write is in flight; an error if one ever failed (sticky).
    async fn settle(&self) -> io::Result<()>;
    /// Writes `data` at `pos`; `pos` and `data.len()` are multiples of [`BLOCK_BYTES`].
    async fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()>;
    /// Starts writing `data` at `pos` (same alignment rules as [`Self::write_at`]) and may return
    /// before the write completes, so the caller can fill its next buffer meanwhile (double
    /// buffering). The file finishes it before any later operation on itself; a failure is
    /// reported by the next write, sync or read and every one after (sticky), so a sync never
    /// claims durability over a lost write. Default: an ordinary [`Self::write_at`].
    async fn write_at_background(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.write_at(pos, data).await
    }
    /// Makes every completed write durable (`fdatasync`).
    async fn sync(&self) -> io::Result<()>;
    /// Grows the file to at least `len` bytes of zeros (fallocate, size changes).
    async fn allocate(&self, len: u64) -> io::Result<()>;
    /// Sets the file length to exactly `len`.
    async fn truncate(&self, len: u64) -> io::Result<()>;
    /// The current file length.
    async fn size_bytes(&self) -> io::Result<u64>;
    /// Closes the file.
    async fn close(self) -> io::Result<()>;
}

/// A place to keep files: one data directory tree.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait Storage {
    /// The file handle type.
    type File: BlockFile;
    /// Opens (or creates) a file.
    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Self::File>;
    /// Creates a directory and its parents; durable on return.
    async fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Creates the directory `path` if missing (its parent must exist). Not durable: the new
    /// entry survives a crash only after [`Self::sync_dir`] of the parent; until then a crash
    /// may take it away with everything below it.
    async fn create_dir(&self, path: &Path) -> io::Result<()>;
    /// Makes every entry created, renamed or removed in directory `path` durable (an fsync of
    /// the directory).
    async fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Names of the entries in a directory (files only), unsorted.
    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Whether a path exists.
    async fn exists(&self, path: &Path) -> io::Result<bool>;
    /// Removes a file; durable on return.
    async fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes a directory and everything below it; durable on return.
    async fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Renames a file atomically; durable on return.
    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
}

/// A source of wall-clock time, injected so tests control it.
pub trait Clock {
    /// Now, in milliseconds since the epoch.
    fn now(&self) -> TimestampMs;
}

/// The real wall clock.
#[derive(Copy, Clone, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // the one place the engine reads the wall clock
    fn now(&self) -> TimestampMs {
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        TimestampMs(since.map(|d| d.as_millis() as i64).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment_helpers() {
        assert_eq!(align_down(0), 0);
        assert_eq!(align_down(4095), 0);
        assert_eq!(align_down(4096), 4096);
        assert_eq!(align_up(1), 4096);
        assert_eq!(align_up(4096), 4096);
        assert_eq!(align_up(0), 0);
    }
}
