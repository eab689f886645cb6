//! Small whole-file reads and atomic replacement (indexes, snapshots, checkpoints) over a
//! [`Storage`]: write `<name>.tmp` padded to a block, trim to the exact length, sync, rename.

use crate::io::{align_up, BlockFile, OpenMode, Storage};
use bytes::Bytes;
use std::io;
use std::path::Path;

/// Suffix of files being replaced; leftovers are deleted on open.
pub const TMP_SUFFIX: &str = ".tmp";

/// Atomically replaces `dir/name` with `bytes` (durable on return).
pub async fn write_atomic<S: Storage>(
    storage: &S,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> io::Result<()> {
    let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
    let file = storage.open(&tmp, OpenMode::CreateReadWrite).await?;
    file.truncate(0).await?;
    if !bytes.is_empty() {
        let mut padded = bytes.to_vec();
        padded.resize(align_up(bytes.len() as u64) as usize, 0);
        file.write_at(0, &padded).await?;
    }
    file.truncate(bytes.len() as u64).await?;
    file.sync().await?;
    file.close().await?;
    storage.rename(&tmp, &dir.join(name)).await
}

/// The whole content of a file, `None` if it does not exist.
pub async fn read_whole<S: Storage>(storage: &S, path: &Path) -> io::Result<Option<Bytes>> {
    if !storage.exists(path).await? {
        return Ok(None);
    }
    let file = storage.open(path, OpenMode::Read).await?;
    let len = file.size_bytes().await? as usize;
    let bytes = if len == 0 {
        Bytes::new()
    } else {
        file.read_at(0, len).await?
    };
    file.close().await?;
    if bytes.len() != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "short read of a small file",
        ));
    }
    Ok(Some(bytes))
}

/// Log start checkpoint bytes: `[i64 offset BE][u32 crc32c BE of the offset bytes]`.
pub fn encode_log_start(offset: i64) -> Vec<u8> {
    let mut out = offset.to_be_bytes().to_vec();
    out.extend_from_slice(&crc32c::crc32c(&out).to_be_bytes());
    out
}

/// Parses a log start checkpoint; `None` if damaged.
pub fn decode_log_start(bytes: &[u8]) -> Option<i64> {
    let (value, crc) = (bytes.get(..8)?, bytes.get(8..12)?);
    let ok = crc32c::crc32c(value).to_be_bytes() == crc;
    ok.then(|| i64::from_be_bytes(value.try_into().expect("8 bytes")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::sim::{block_on, FaultConfig, SimStorage};

    #[test]
    fn atomic_write_then_read() {
        let s = SimStorage::new(1, FaultConfig::default());
        let dir = Path::new("/d");
        block_on(s.create_dir_all(dir)).unwrap();
        block_on(write_atomic(&s, dir, "f", b"hello")).unwrap();
        assert_eq!(
            block_on(read_whole(&s, &dir.join("f"))).unwrap().unwrap(),
            Bytes::from_static(b"hello")
        );
        block_on(write_atomic(&s, dir, "f", b"")).unwrap();
        assert_eq!(
            block_on(read_whole(&s, &dir.join("f")))
                .unwrap()
                .unwrap()
                .len(),
            0
        );
        assert!(block_on(read_whole(&s, &dir.join("missing")))
            .unwrap()
            .is_none());
    }

    #[test]
    fn log_start_checkpoint() {
        let b = encode_log_start(42);
        assert_eq!(decode_log_start(&b), Some(42));
        let mut bad = b.clone();
        bad[3] ^= 1;
        assert_eq!(decode_log_start(&bad), None);
    }
}
