//! The engine's [`Storage`] over plain blocking `std::fs`, for the offline tools.
//!
//! The broker reads and writes through glommio (io_uring, O_DIRECT, locked memory). A tool run
//! by an operator on a stopped broker's directory needs none of that, and must also work where
//! O_DIRECT does not (tmpfs, a copy on another file system): so it drives the same engine code
//! (verification, recovery) through this implementation inside `futures::executor::block_on`.
//! Every operation completes before its future first returns, so no future ever waits.
//! Durability matches the engine's contract: `sync` is `fdatasync`, and directory changes are
//! followed by an fsync of the directory.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use bytes::Bytes;
use rill_engine::io::{BlockFile, OpenMode, Storage};

/// Files on the local file system through blocking calls.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdStorage;

/// One open file.
#[derive(Debug)]
pub struct StdFile {
    file: File,
}

/// fsyncs a directory so that entries created, removed or renamed in it are durable.
fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

/// Up to `len` bytes at `pos` (fewer only at the end of the file).
fn read_blocking(file: &File, pos: u64, len: usize) -> io::Result<Bytes> {
    let mut buf = vec![0; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut buf[filled..], pos + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(Bytes::from(buf))
}

impl BlockFile for StdFile {
    type Buffer = Vec<u8>;

    fn alloc_buffer(&self, len: usize) -> Vec<u8> {
        vec![0; len]
    }

    async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        read_blocking(&self.file, pos, len)
    }

    /// Read at once, like every operation here: the future is already complete.
    fn read_owned(
        &self,
        pos: u64,
        len: usize,
    ) -> impl std::future::Future<Output = io::Result<Bytes>> + 'static {
        std::future::ready(read_blocking(&self.file, pos, len))
    }

    async fn settle(&self) -> io::Result<()> {
        Ok(()) // writes complete before they return
    }

    async fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, pos)
    }

    async fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    async fn allocate(&self, len: u64) -> io::Result<()> {
        if self.file.metadata()?.len() < len {
            self.file.set_len(len)?;
        }
        Ok(())
    }

    async fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    async fn size_bytes(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    async fn close(self) -> io::Result<()> {
        Ok(())
    }
}

impl Storage for StdStorage {
    type File = StdFile;

    async fn open(&self, path: &Path, mode: OpenMode) -> io::Result<StdFile> {
        let existed = path.exists();
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateReadWrite | OpenMode::CreateReadWriteUnsynced => {
                options.read(true).write(true).create(true)
            }
        };
        let file = options.open(path)?;
        if !existed && mode != OpenMode::CreateReadWriteUnsynced {
            sync_dir(path)?;
        }
        Ok(StdFile { file })
    }

    async fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)?;
        sync_dir(path)
    }

    async fn create_dir(&self, path: &Path) -> io::Result<()> {
        match std::fs::create_dir(path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            other => other,
        }
    }

    async fn sync_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::File::open(path)?.sync_all()
    }

    async fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        Ok(names)
    }

    async fn exists(&self, path: &Path) -> io::Result<bool> {
        Ok(path.exists())
    }

    async fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)?;
        sync_dir(path)
    }

    async fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)?;
        sync_dir(path)
    }

    async fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)?;
        sync_dir(to)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    #[test]
    fn reads_are_short_only_at_the_end_and_truncate_allocate_resize() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let s = StdStorage;
        let f = block_on(s.open(&path, OpenMode::CreateReadWrite)).unwrap();
        block_on(f.write_at(0, &[7u8; 4096])).unwrap();
        assert_eq!(block_on(f.read_at(0, 8192)).unwrap().len(), 4096);
        block_on(f.allocate(8192)).unwrap();
        block_on(f.allocate(10)).unwrap();
        assert_eq!(block_on(f.size_bytes()).unwrap(), 8192);
        block_on(f.truncate(100)).unwrap();
        assert_eq!(&block_on(f.read_at(0, 4096)).unwrap()[..], &[7u8; 100][..]);
        assert_eq!(
            block_on(s.list_dir(dir.path())).unwrap(),
            vec!["f".to_string()]
        );
    }
}
