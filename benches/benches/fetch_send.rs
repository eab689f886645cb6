//! Segment bytes to a socket, four ways (issue 11, "zero-copy send"): what a catch-up Fetch of
//! cold data costs on this machine, per GB sent over loopback TCP to a reader that drains it.
//!
//! 1. `odirect+copy+sendmsg`: O_DIRECT reads of 1 MiB (page cache untouched, as the engine's
//!    extents), each copied once into an owned buffer and sent with `sendmsg` (Rill's read-ahead
//!    path: the copy is the one glommio's `!Send` DMA buffers force).
//! 2. `sendfile, cold`: `sendfile(2)` from a buffered descriptor, page cache dropped first (what a
//!    sendfile path meets after O_DIRECT appends, which never fill the page cache); run on a
//!    thread, as it would have to be off the executor (a cache miss blocks in the kernel).
//! 3. `sendfile, warm`: the same with the file already in the page cache (Kafka's best case).
//! 4. `io_uring splice, cold`: file -> pipe -> socket as splice operations on a ring of its
//!    own (the `io-uring` crate), page cache dropped first.
//!
//! Each prints MB/s and the sender thread's CPU seconds per GB (`CLOCK_THREAD_CPUTIME_ID`;
//! the kernel's copy into the socket is in it, the reader's copy out is not).
//! Run: `cargo bench -p rill-bench --bench fetch_send` (writes a 512 MiB file under target/).

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::time::Instant;

/// File size under `cargo bench`; `cargo test --all-targets` runs a smoke pass of 8 MiB.
const FILE_BYTES_BENCH: usize = 512 << 20;
const CHUNK_BYTES: usize = 1 << 20;

fn make_file(file_bytes: usize) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("fetch-send-{}.log", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .unwrap();
    let mut chunk = aligned(CHUNK_BYTES);
    for (i, b) in chunk.iter_mut().enumerate() {
        *b = (i * 7 + 3) as u8;
    }
    for i in 0..file_bytes / CHUNK_BYTES {
        file.write_all_at(&chunk, (i * CHUNK_BYTES) as u64).unwrap();
    }
    file.sync_all().unwrap();
    path
}

fn aligned(len: usize) -> aligned_vec::AVec<u8, aligned_vec::ConstAlign<4096>> {
    aligned_vec::AVec::from_iter(4096, std::iter::repeat_n(0u8, len))
}

fn drop_cache(file: &std::fs::File) {
    // SAFETY: a valid open descriptor; fadvise only drops clean cached pages.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// A connected loopback pair whose far end is drained by a thread until it closes.
fn socket_pair() -> (TcpStream, std::thread::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (mut receiver, _) = listener.accept().unwrap();
    let drain = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0;
        loop {
            match receiver.read(&mut buf) {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n,
            }
        }
    });
    (sender, drain)
}

fn run(name: &str, file_bytes: usize, send: impl FnOnce(&TcpStream)) {
    let (socket, drain) = socket_pair();
    let (start, cpu) = (Instant::now(), thread_cpu_s());
    send(&socket);
    let cpu = thread_cpu_s() - cpu;
    drop(socket);
    let received = drain.join().unwrap();
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(received, file_bytes, "{name}: every byte arrived");
    let gb = file_bytes as f64 / 1e9;
    println!("| {name} | {:.0} | {:.2} |", gb * 1e3 / seconds, cpu / gb);
}

fn odirect_copy_send(path: &PathBuf, file_bytes: usize, socket: &TcpStream) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap();
    let mut dma = aligned(CHUNK_BYTES);
    for i in 0..file_bytes / CHUNK_BYTES {
        file.read_exact_at(&mut dma, (i * CHUNK_BYTES) as u64)
            .unwrap();
        let owned = dma.to_vec(); // the one copy: DMA buffer -> Bytes
        send_all(socket, &owned);
    }
}

fn send_all(socket: &TcpStream, mut data: &[u8]) {
    while !data.is_empty() {
        // SAFETY: a valid socket and a readable slice.
        let n = unsafe {
            libc::send(
                socket.as_raw_fd(),
                data.as_ptr() as *const libc::c_void,
                data.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        assert!(n > 0, "send failed");
        data = &data[n as usize..];
    }
}

fn sendfile_all(path: &PathBuf, file_bytes: usize, socket: &TcpStream, cold: bool) {
    let file = std::fs::File::open(path).unwrap();
    if cold {
        drop_cache(&file);
    } else {
        let mut sink = vec![0u8; CHUNK_BYTES];
        for i in 0..file_bytes / CHUNK_BYTES {
            file.read_exact_at(&mut sink, (i * CHUNK_BYTES) as u64)
                .unwrap();
        }
    }
    let mut offset: libc::off_t = 0;
    while (offset as usize) < file_bytes {
        let want = (file_bytes - offset as usize).min(CHUNK_BYTES);
        // SAFETY: valid descriptors; the kernel advances `offset`.
        let n = unsafe { libc::sendfile(socket.as_raw_fd(), file.as_raw_fd(), &mut offset, want) };
        assert!(n > 0, "sendfile failed");
    }
}

fn splice_all(path: &PathBuf, file_bytes: usize, socket: &TcpStream) {
    use io_uring::{opcode, squeue, types, IoUring};
    let file = std::fs::File::open(path).unwrap();
    drop_cache(&file);
    let mut pipe = [0i32; 2];
    // SAFETY: pipe writes two descriptors into the array.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    // SAFETY: F_SETPIPE_SZ on the pipe we just made.
    unsafe { libc::fcntl(pipe[1], libc::F_SETPIPE_SZ, CHUNK_BYTES as libc::c_int) };
    let mut ring = IoUring::new(8).unwrap();
    let mut one = |entry: squeue::Entry| -> usize {
        // SAFETY: the descriptors outlive the operation, which completes before we return.
        unsafe { ring.submission().push(&entry).unwrap() };
        ring.submit_and_wait(1).unwrap();
        let result = ring.completion().next().unwrap().result();
        assert!(result > 0, "splice failed: {result}");
        result as usize
    };
    let (file_fd, sock_fd) = (types::Fd(file.as_raw_fd()), types::Fd(socket.as_raw_fd()));
    let mut offset = 0usize;
    while offset < file_bytes {
        let want = (file_bytes - offset).min(CHUNK_BYTES) as u32;
        let got =
            one(opcode::Splice::new(file_fd, offset as i64, types::Fd(pipe[1]), -1, want).build());
        let mut drained = 0;
        while drained < got {
            let left = (got - drained) as u32;
            drained += one(opcode::Splice::new(types::Fd(pipe[0]), -1, sock_fd, -1, left).build());
        }
        offset += got;
    }
    // SAFETY: closing the pipe descriptors we own.
    unsafe {
        libc::close(pipe[0]);
        libc::close(pipe[1]);
    }
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let n = if bench { FILE_BYTES_BENCH } else { 8 << 20 };
    let path = make_file(n);
    println!(
        "| {} MiB file -> loopback TCP | MB/s | sender CPU s/GB |\n|---|---:|---:|",
        n >> 20
    );
    for _ in 0..if bench { 2 } else { 1 } {
        run("O_DIRECT 1 MiB + copy + send", n, |s| {
            odirect_copy_send(&path, n, s)
        });
        run("sendfile, page cache dropped", n, |s| {
            sendfile_all(&path, n, s, true)
        });
        run("sendfile, page cache warm", n, |s| {
            sendfile_all(&path, n, s, false)
        });
        run("io_uring splice, page cache dropped", n, |s| {
            splice_all(&path, n, s)
        });
    }
    let _ = std::fs::remove_file(&path);
}
