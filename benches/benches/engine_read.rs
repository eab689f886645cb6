//! Cold-read path, three ways (issue 2): (1) the engine's `BlockFile` read: aligned O_DIRECT
//! read through io_uring into a glommio buffer, copied once into `Bytes` (glommio buffers are
//! `!Send`); (2) O_DIRECT `pread` on the executor's blocking thread into an owned aligned buffer
//! that becomes the `Bytes` (no copy); each with 1 and 4 reads in flight; (3) `pread` from a buffered descriptor on a worker thread off
//! the executor, handed back as `Bytes` (what a sendfile-style path would do).
//!
//! Each read is of `read_bytes` at a random aligned position in a 128 MiB file. "cold" drops the
//! page cache for the range first (`posix_fadvise(DONTNEED)`), so the buffered path pays the disk
//! too; "warm" lets the buffered path hit the page cache (O_DIRECT never uses it).

use aligned_vec::{AVec, ConstAlign};
use criterion::{Criterion, Throughput};
use rill_engine::bytes::Bytes;
use rill_engine::io::glommio::{GlommioFile, GlommioStorage, LocalRuntime};
use rill_engine::io::{BlockFile, OpenMode, Storage};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const FILE_BYTES: u64 = 128 << 20;

fn make_file() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("engine-read-{}.log", std::process::id()));
    let chunk: Vec<u8> = (0..1 << 20).map(|i| (i * 7 + 3) as u8).collect();
    let file = std::fs::File::create(&path).unwrap();
    for i in 0..FILE_BYTES >> 20 {
        file.write_all_at(&chunk, i << 20).unwrap();
    }
    file.sync_all().unwrap();
    path
}

/// A cheap deterministic position sequence (xorshift), aligned to 4096.
fn positions(read_bytes: u64) -> impl FnMut() -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % ((FILE_BYTES - read_bytes) / 4096)) * 4096
    }
}

fn drop_cache(file: &std::fs::File) {
    // SAFETY: a valid open descriptor; fadvise only drops clean cached pages.
    unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// A worker thread that preads from a buffered descriptor and sends the bytes back.
struct BufferedReader {
    requests: mpsc::Sender<(u64, usize, bool)>,
    replies: mpsc::Receiver<Bytes>,
}

impl BufferedReader {
    fn new(path: PathBuf) -> Self {
        let (requests, rx) = mpsc::channel::<(u64, usize, bool)>();
        let (tx, replies) = mpsc::channel();
        std::thread::spawn(move || {
            let file = std::fs::File::open(path).unwrap();
            for (pos, len, cold) in rx {
                if cold {
                    drop_cache(&file);
                }
                let mut buf = vec![0u8; len];
                file.read_exact_at(&mut buf, pos).unwrap();
                if tx.send(Bytes::from(buf)).is_err() {
                    break;
                }
            }
        });
        BufferedReader { requests, replies }
    }

    fn read(&self, pos: u64, len: usize, cold: bool) -> Bytes {
        self.requests.send((pos, len, cold)).unwrap();
        self.replies.recv().unwrap()
    }
}

/// Buffer of a copy-free read: aligned for O_DIRECT, owned and `Send`, so it becomes the
/// `Bytes` handed to the socket (possibly on another core) as it is.
type ReadBuffer = AVec<u8, ConstAlign<4096>>;

/// The copy-free alternative to the engine's read: `pread` of an O_DIRECT descriptor on
/// glommio's blocking thread into an owned aligned buffer that becomes the `Bytes`.
async fn pread_owned(file: &Arc<std::fs::File>, pos: u64, len: usize) -> std::io::Result<Bytes> {
    let file = file.clone();
    let buf = glommio::executor()
        .spawn_blocking(move || pread_direct(&file, pos, len))
        .await?;
    Ok(Bytes::from_owner(buf))
}

/// Reads up to `len` bytes (a multiple of 4096) at `pos` from an O_DIRECT descriptor into a
/// fresh aligned buffer; shorter only at end of file. Blocking.
fn pread_direct(file: &std::fs::File, pos: u64, len: usize) -> std::io::Result<ReadBuffer> {
    let mut buf = ReadBuffer::with_capacity(4096, len);
    while buf.len() < len {
        let filled = buf.len();
        let offset = libc::off_t::try_from(pos + filled as u64)
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        // SAFETY: `buf` owns `len` bytes of capacity; pread writes at most `len - filled` bytes
        // starting `filled` bytes in, all inside that capacity; the descriptor is open (`file`).
        let n = unsafe {
            libc::pread(
                file.as_raw_fd(),
                buf.as_mut_ptr().add(filled).cast(),
                len - filled,
                offset,
            )
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let n = n as usize;
        // SAFETY: pread initialised `n` more bytes after the `filled` already initialised.
        unsafe { buf.set_len(filled + n) };
        if n == 0 || !n.is_multiple_of(4096) {
            break; // end of file (an O_DIRECT read ends short only there)
        }
    }
    Ok(buf)
}

/// Reads at `positions` with `in_flight` reads outstanding, either way: through the engine's
/// file (io_uring + one copy), or with `direct` = O_DIRECT pread into an owned buffer.
async fn dma_reads(
    file: Rc<GlommioFile>,
    direct: Option<Arc<std::fs::File>>,
    positions: Vec<u64>,
    read_bytes: usize,
    in_flight: usize,
) {
    let per_lane = positions.len().div_ceil(in_flight).max(1);
    let lanes = positions.chunks(per_lane).map(|lane| {
        let (file, direct) = (file.clone(), direct.clone());
        async move {
            for &p in lane {
                let bytes = match &direct {
                    Some(direct) => pread_owned(direct, p, read_bytes).await,
                    None => file.read_at(p, read_bytes).await,
                };
                assert_eq!(bytes.unwrap().len(), read_bytes);
            }
        }
    });
    futures_util::future::join_all(lanes).await;
}

fn bench_reads(c: &mut Criterion, rt: &LocalRuntime, path: &PathBuf) {
    let mut group = c.benchmark_group("engine_cold_read");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(500));
    let storage = Rc::new(GlommioStorage::new());
    let dma_path = path.clone();
    let dma = Rc::new(rt.block_on({
        let storage = storage.clone();
        async move { storage.open(&dma_path, OpenMode::Read).await.unwrap() }
    }));
    let direct = Arc::new(
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .unwrap(),
    );
    let buffered = BufferedReader::new(path.clone());
    let cache_dropper = std::fs::File::open(path).unwrap();
    for read_bytes in [64usize << 10, 1 << 20] {
        group.throughput(Throughput::Bytes(read_bytes as u64));
        let kib = read_bytes >> 10;
        let mut next = positions(read_bytes as u64);
        for in_flight in [1usize, 4] {
            for zero_copy in [false, true] {
                let way = if zero_copy {
                    "o_direct_pread_blocking_thread_owned"
                } else {
                    "o_direct_io_uring_copied"
                };
                group.bench_function(format!("{way}_{kib}KiB_x{in_flight}"), |b| {
                    b.iter_custom(|n| {
                        let pos: Vec<u64> = (0..n).map(|_| next()).collect();
                        let start = Instant::now();
                        let direct = zero_copy.then(|| direct.clone());
                        rt.block_on(dma_reads(dma.clone(), direct, pos, read_bytes, in_flight));
                        start.elapsed()
                    })
                });
            }
        }
        for cold in [true, false] {
            let name = if cold { "cold" } else { "warm" };
            group.bench_function(format!("buffered_pread_thread_{name}_{kib}KiB"), |b| {
                b.iter_custom(|n| {
                    let start = Instant::now();
                    for _ in 0..n {
                        let bytes = buffered.read(next(), read_bytes, cold);
                        assert_eq!(bytes.len(), read_bytes);
                    }
                    start.elapsed()
                })
            });
        }
    }
    group.finish();
    drop_cache(&cache_dropper);
}

fn main() {
    let rt = LocalRuntime::new(2 << 20).expect("glommio executor");
    let path = make_file();
    let mut criterion = Criterion::default().configure_from_args();
    bench_reads(&mut criterion, &rt, &path);
    criterion.final_summary();
    let _ = std::fs::remove_file(&path);
}
