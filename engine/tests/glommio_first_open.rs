//! Pins glommio 0.9's per-device poll probe trap: if the first DMA open in a process is a
//! read-write open of an EMPTY file, glommio marks the device pollable and every later
//! `read_at_aligned` fails with EOPNOTSUPP. `GlommioStorage` primes the device with a non-empty
//! read-only open first. This test must be alone in its binary: it needs a fresh process.

use glommio::{LocalExecutorBuilder, Placement};
use rill_engine::io::glommio::GlommioStorage;
use rill_engine::io::{BlockFile, OpenMode, Storage};

#[test]
fn first_open_of_an_empty_file_read_write_still_reads() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join("empty.log");
    let handle = LocalExecutorBuilder::new(Placement::Unbound)
        .io_memory(1 << 20)
        .spawn(move || async move {
            let storage = GlommioStorage::new();
            let file = storage
                .open(&path, OpenMode::CreateReadWrite)
                .await
                .unwrap();
            file.write_at(0, &[0xab; 4096]).await.unwrap();
            file.sync().await.unwrap();
            let bytes = file
                .read_at(0, 4096)
                .await
                .expect("aligned read after an empty read-write first open");
            assert_eq!(bytes.len(), 4096);
            assert!(bytes.iter().all(|&b| b == 0xab));
            file.close().await.unwrap();
        });
    handle.unwrap().join().unwrap();
}
