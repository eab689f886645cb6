//! The object store client, and the bridge from the glommio shards to it.
//!
//! # Threads
//! `object_store` (and the HTTP client under it) runs on tokio. Tokio lives on its own threads
//! ([`REMOTE_WORKER_THREADS`] workers named `rill-remote`), never inside a shard, and no future
//! or waker crosses between the two runtimes:
//!
//! ```text
//!  shard thread (glommio)             tokio blocking thread               tokio worker
//!  ──────────────────────             ─────────────────────               ────────────
//!  permit = requests.acquire()
//!  tokio spawn_blocking(job) ───────▶ (read the local file)
//!                                     handle.block_on(tokio::spawn(req)) ─▶ HTTP request
//!                                     ◀── result (tokio's own waker) ──────
//!                                     slot = Some(result)   (a std Mutex)
//!  poll the slot, sleeping on a
//!  glommio timer between looks
//!  (200 µs doubling to 5 ms) ◀──────
//! ```
//! No waker crosses between the runtimes at all: the tokio side waits with tokio's own wakers,
//! the shard looks at the slot on its own timer, so glommio 0.9's foreign-waker double free
//! (`shared/architecture.md`) cannot happen. Nothing runs on glommio's blocking pool either:
//! a request outliving its shard (a stop while the store retries) finishes into a slot nobody
//! reads, where glommio's pool would panic sending the answer to a dropped executor, and the
//! engine's own off-thread file calls never queue behind the object store. The cost is up to
//! [`POLL_MAX`] of added latency on a request, next to the milliseconds an S3 request takes.
//! A shard runs at most `rill.remote.upload.concurrency` object-store requests at once (a
//! semaphore).
//!
//! # Retries
//! `object_store` retries a request on transient errors (connection failures, 5xx, 429) with
//! exponential backoff up to [`RETRY_TIMEOUT`]; what still fails is the caller's to retry
//! later (the copy loop backs off, `tiered::tier`).

use std::future::Future;
use std::io;
use std::ops::Range;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStoreExt, PutPayload, RetryConfig};

use super::settings::RemoteStorageSettings;

/// Tokio worker threads for the object store (HTTP is I/O-bound; one keeps up with many requests).
pub const REMOTE_WORKER_THREADS: usize = 1;
/// How long `object_store` retries one request before it reports the failure.
pub const RETRY_TIMEOUT: Duration = Duration::from_secs(20);
/// An object larger than this is put as a multipart upload of parts this size, read from the
/// file one part at a time (a copy holds at most one part in memory).
pub const PART_BYTES: usize = 8 << 20;

/// First pause of a shard between two looks at a request's slot.
pub const POLL_FIRST: Duration = Duration::from_micros(200);
/// Longest pause between two looks (the latency a request may gain).
pub const POLL_MAX: Duration = Duration::from_millis(5);

/// What a remote operation failed with.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The object is not there.
    #[error("object not found: {0}")]
    NotFound(String),
    /// The local file to copy is gone (the segment was deleted meanwhile).
    #[error("local file gone: {0}")]
    LocalGone(PathBuf),
    /// Anything else (the store, the network, the local disk).
    #[error("{0}")]
    Other(String),
}

impl From<object_store::Error> for RemoteError {
    fn from(e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { path, .. } => RemoteError::NotFound(path),
            other => RemoteError::Other(other.to_string()),
        }
    }
}

/// The tokio runtime every shard's object-store requests run on (started at first use).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(REMOTE_WORKER_THREADS)
            .thread_name("rill-remote")
            .enable_all()
            .build()
            .expect("the object store's runtime starts")
    })
}

/// The object store as a shard uses it: one per shard, sharing the process's S3 client.
pub struct RemoteStore {
    s3: Arc<AmazonS3>,
    /// This shard's object-store requests in flight (`rill.remote.upload.concurrency`).
    requests: glommio::sync::Semaphore,
}

/// The S3 client the settings describe (shared by every shard: it is `Send + Sync`).
pub fn s3_client(settings: &RemoteStorageSettings) -> Result<Arc<AmazonS3>, String> {
    // reqwest's TLS (rustls, no provider of its own) uses the process's: ring, as the listeners.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = AmazonS3Builder::new()
        .with_bucket_name(&settings.bucket)
        .with_region(&settings.region)
        .with_retry(RetryConfig {
            retry_timeout: RETRY_TIMEOUT,
            ..RetryConfig::default()
        })
        .with_client_options(ClientOptions::new().with_timeout(Duration::from_secs(60)));
    if let Some(endpoint) = &settings.endpoint {
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"));
    }
    if let Some(key) = &settings.access_key_id {
        builder = builder.with_access_key_id(key);
    }
    if let Some(secret) = &settings.secret_access_key {
        builder = builder.with_secret_access_key(secret);
    }
    builder.build().map(Arc::new).map_err(|e| e.to_string())
}

impl RemoteStore {
    /// A shard's handle on `s3`, with at most `requests` requests in flight.
    pub fn new(s3: Arc<AmazonS3>, requests: usize) -> Rc<Self> {
        Rc::new(RemoteStore {
            s3,
            requests: glommio::sync::Semaphore::new(requests as u64),
        })
    }

    /// Runs `job` on a tokio blocking thread with `block` (a tokio `block_on`) to drive
    /// object-store futures, and waits for its result by polling (see the module doc).
    async fn off_shard<T, J>(&self, job: J) -> Result<T, RemoteError>
    where
        T: Send + 'static,
        J: FnOnce(Arc<AmazonS3>, &Blocker) -> Result<T, RemoteError> + Send + 'static,
    {
        let _permit = self.requests.acquire_permit(1).await;
        let s3 = self.s3.clone();
        let slot: Slot<T> = Arc::new(Mutex::new(None));
        let filled = slot.clone();
        let handle = runtime().handle().clone();
        drop(runtime().spawn_blocking(move || {
            let blocker = Blocker(handle);
            let ran = std::panic::catch_unwind(AssertUnwindSafe(|| job(s3, &blocker)));
            let result =
                ran.unwrap_or_else(|_| Err(RemoteError::Other("a request panicked".into())));
            *filled.lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
        }));
        let mut pause = POLL_FIRST;
        loop {
            if let Some(result) = slot.lock().unwrap_or_else(PoisonError::into_inner).take() {
                return result;
            }
            glommio::timer::sleep(pause).await;
            pause = (pause * 2).min(POLL_MAX);
        }
    }

    /// Puts the local file `path` as `key`; returns its size. A file larger than
    /// [`PART_BYTES`] goes up in parts.
    pub async fn put_file(&self, key: String, path: PathBuf) -> Result<u64, RemoteError> {
        self.off_shard(move |s3, block| put_file_blocking(&s3, block, &key, &path))
            .await
    }

    /// Bytes `range` of object `key`.
    pub async fn get_range(&self, key: String, range: Range<u64>) -> Result<Bytes, RemoteError> {
        self.off_shard(move |s3, block| {
            let location = ObjectPath::from(key.as_str());
            Ok(block.on(async move { s3.get_range(&location, range).await })?)
        })
        .await
    }

    /// The whole of object `key` (a small one: an index).
    pub async fn get(&self, key: String) -> Result<Bytes, RemoteError> {
        self.off_shard(move |s3, block| {
            let location = ObjectPath::from(key.as_str());
            Ok(block.on(async move { s3.get(&location).await?.bytes().await })?)
        })
        .await
    }

    /// Deletes object `key` (a missing object is no error: the delete already happened).
    pub async fn delete(&self, key: String) -> Result<(), RemoteError> {
        self.off_shard(move |s3, block| {
            let location = ObjectPath::from(key.as_str());
            match block.on(async move { s3.delete(&location).await }) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e.into()),
            }
        })
        .await
    }

    /// Every key under `prefix`, with its size (`rill check`, tests).
    pub async fn list(&self, prefix: String) -> Result<Vec<(String, u64)>, RemoteError> {
        self.off_shard(move |s3, block| list_with(&s3, block, &prefix))
            .await
    }
}

/// Every key under `prefix` with its size, from a thread that is no shard's (`rill check`).
pub fn list_blocking(s3: &Arc<AmazonS3>, prefix: &str) -> Result<Vec<(String, u64)>, RemoteError> {
    list_with(s3, &Blocker(runtime().handle().clone()), prefix)
}

fn list_with(
    s3: &Arc<AmazonS3>,
    block: &Blocker,
    prefix: &str,
) -> Result<Vec<(String, u64)>, RemoteError> {
    use futures::TryStreamExt;
    use object_store::ObjectStore;
    let (s3, prefix) = (s3.clone(), ObjectPath::from(prefix));
    let listed = block.on(async move { s3.list(Some(&prefix)).try_collect::<Vec<_>>().await })?;
    Ok(listed
        .into_iter()
        .map(|m| (m.location.to_string(), m.size))
        .collect())
}

/// Where a request's result waits for its shard to look.
type Slot<T> = Arc<Mutex<Option<Result<T, RemoteError>>>>;

/// Drives a tokio future to its end from a (non-tokio) blocking thread.
struct Blocker(tokio::runtime::Handle);

impl Blocker {
    /// Spawns `future` on the runtime and waits for it on this thread (tokio's waker only).
    fn on<T: Send + 'static>(&self, future: impl Future<Output = T> + Send + 'static) -> T {
        let task = self.0.spawn(future);
        match self.0.block_on(task) {
            Ok(value) => value,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

/// [`RemoteStore::put_file`] on the blocking thread: read, put (in parts if large).
fn put_file_blocking(
    s3: &Arc<AmazonS3>,
    block: &Blocker,
    key: &str,
    path: &std::path::Path,
) -> Result<u64, RemoteError> {
    use std::io::Read;
    let local = |e: io::Error| match e.kind() {
        io::ErrorKind::NotFound => RemoteError::LocalGone(path.to_path_buf()),
        _ => RemoteError::Other(format!("{}: {e}", path.display())),
    };
    let mut file = std::fs::File::open(path).map_err(local)?;
    let size = file.metadata().map_err(local)?.len();
    let location = ObjectPath::from(key);
    if size as usize <= PART_BYTES {
        let mut bytes = Vec::with_capacity(size as usize);
        file.read_to_end(&mut bytes).map_err(local)?;
        let s3 = s3.clone();
        let payload = PutPayload::from(bytes);
        block.on(async move { s3.put(&location, payload).await })?;
        return Ok(size);
    }
    let s3c = s3.clone();
    let loc = location.clone();
    let mut upload = block.on(async move { s3c.put_multipart(&loc).await })?;
    let mut sent = 0u64;
    while sent < size {
        let mut part = vec![0u8; PART_BYTES.min((size - sent) as usize)];
        if let Err(e) = file.read_exact(&mut part) {
            let _ = block.on(async move { upload.abort().await });
            return Err(local(e));
        }
        sent += part.len() as u64;
        let put = upload.put_part(PutPayload::from(part));
        if let Err(e) = block.on(put) {
            let _ = block.on(async move { upload.abort().await });
            return Err(e.into());
        }
    }
    block.on(async move { upload.complete().await })?;
    Ok(size)
}
