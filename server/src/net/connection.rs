//! One client connection: read whole frames (bounded), hand each to its own task, write the
//! responses back in request order.
//!
//! The reader and the writer run concurrently on the same socket (the reader through a second
//! descriptor of it). Decoded-but-unanswered requests sit in a bounded queue
//! (`inflight_requests_max`): when a pipelining client has that many outstanding, the reader
//! stops reading — TCP flow control then pushes back on the client, and memory stays bounded.
//!
//! Memory (`queued.max.request.bytes`): as soon as a frame's size prefix has arrived (and is
//! within `socket.request.max.bytes`), the whole frame's size is reserved from the shard's
//! request budget, before any room is allocated for it; a connection that cannot get it waits
//! there, reading nothing more, as Kafka's memory pool mutes a channel. The reservation is
//! held until the request is answered, so partially received frames count as much as whole
//! ones. The kernel writes received bytes straight into the room (nothing zero-fills it).
//!
//! Idle (`connections.max.idle.ms`): a connection that received and sent nothing for that
//! long, with no request being served, is shut down, which ends its reader and its writer
//! (a writer stuck on a client that stopped reading included).
//!
//! Copies: a request's bytes are received once, into a buffer of the frame's own: its size
//! prefix is received alone, then the rest into room of exactly that size, so no read takes in
//! the next frame's bytes. The frame is handed on whole, shared with nothing, and Produce turns
//! it back into writable memory for its batches without copying them (`handler/produce.rs`).
//! A Fetch response is sent with vectored sends from its parts, record chunks included,
//! without gathering them into a new buffer.

use std::cell::Cell;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};

use futures::future::{select, Either};
use futures::AsyncWriteExt;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::TcpStream;
use glommio::task::JoinHandle;
use rill_engine::io::Storage;
use rill_protocol::frame::{frame_len, SIZE_PREFIX_BYTES};

use super::socket_io;
use crate::admin::bound_hits::Bound;
use crate::admin::shard::hooks;
use crate::dispatch::{dispatch, Outcome};
use crate::memory_budget::{ByteBudget, Hold};
use crate::security::listeners::Listener;
use crate::security::session::Session;
use crate::shard::Shard;
use crate::shutdown::ShutdownSignal;

/// Largest single read into a frame buffer (frames bigger than this arrive over several reads).
const READ_CHUNK_BYTES_MAX: usize = 1 << 20;

/// A request's task: its outcome, and for a Produce when the response was ready.
pub(super) type Pending = JoinHandle<(Outcome, Option<std::time::Instant>)>;

/// What a connection's reader, writer and idle watch share.
pub(super) struct Activity {
    /// When bytes last arrived or left, or a request was last answered.
    last: Cell<Instant>,
    /// Requests being served, plus a frame waiting for memory: the connection is not idle.
    busy: Cell<usize>,
}

impl Activity {
    /// Nothing yet, as of now.
    pub(super) fn new() -> Rc<Self> {
        Rc::new(Activity {
            last: Cell::new(Instant::now()),
            busy: Cell::new(0),
        })
    }

    pub(super) fn touch(&self) {
        self.last.set(Instant::now());
    }

    fn busy(&self, delta: isize) {
        self.busy
            .set(self.busy.get().checked_add_signed(delta).expect("balanced"));
    }
}

/// Serve a connection until the client closes it, sends something that must close it, it
/// idles past `connections.max.idle.ms`, or the shard shuts down (then in-flight requests are
/// finished and answered first).
pub async fn serve_connection<S: Storage + 'static>(
    stream: TcpStream,
    listener: Arc<Listener>,
    shard: Rc<Shard<S>>,
    shutdown: Rc<ShutdownSignal>,
) {
    let peer = stream.peer_addr().ok();
    if let Some(tls) = listener.tls.clone() {
        super::tls::serve_tls(stream, listener, tls, shard, shutdown).await;
        return;
    }
    let session = Rc::new(Session::new(listener, peer));
    let _ = stream.set_nodelay(true);
    // The reader receives on the raw descriptor and waits for readability with `peek` on a
    // second handle of the same socket (a `&self` call), so the writer owns the stream whole.
    // SAFETY: `dup` of a descriptor the stream owns and keeps open; the new descriptor is
    // owned by `probe` alone and closed when it drops.
    let dup = unsafe { libc::dup(stream.as_raw_fd()) };
    if dup < 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "dup of a connection failed");
        return;
    }
    // SAFETY: `dup` is a fresh descriptor of a connected TCP socket that nothing else owns.
    let probe = unsafe { TcpStream::from_raw_fd(dup) };
    let (queue, responses) = local_channel::new_bounded(shard.config.inflight_requests_max);
    let closing = Rc::new(ShutdownSignal::default());
    let activity = Rc::new(Activity {
        last: Cell::new(Instant::now()),
        busy: Cell::new(0),
    });
    if let Some(idle) = shard.config.connections.idle() {
        let watch = close_when_idle(stream.as_raw_fd(), idle, activity.clone(), closing.clone());
        glommio::spawn_local(watch).detach();
    }
    let writer = write_responses(stream, responses, closing.clone(), activity.clone());
    let writer_task = glommio::spawn_local(writer);
    read_requests(probe, queue, shard, session, (shutdown, closing), activity).await;
    writer_task.await;
    tracing::debug!(?peer, "connection closed");
}

/// Shuts the connection down once it has been idle for `idle` (nothing received or sent, no
/// request being served); ends when the writer is done (`closing`).
pub(super) async fn close_when_idle(
    fd: RawFd,
    idle: Duration,
    activity: Rc<Activity>,
    closing: Rc<ShutdownSignal>,
) {
    loop {
        let quiet = activity.last.get().elapsed();
        if quiet >= idle && activity.busy.get() == 0 {
            break;
        }
        // Busy past the deadline: look again a whole period later.
        let wait = idle.saturating_sub(quiet);
        let wait = if wait.is_zero() { idle } else { wait };
        if !closing.sleep(wait.max(Duration::from_millis(1))).await {
            return;
        }
    }
    // The writer fires `closing` before it closes `fd`, and nothing ran since we looked.
    if closing.is_fired() {
        return;
    }
    tracing::debug!(idle_ms = idle.as_millis() as u64, "closing idle connection");
    hooks::bound_hit(Bound::ConnectionsMaxIdle);
    // SAFETY: `fd` is the writer's socket, open until it fires `closing` (checked above on
    // this same thread); shutdown changes the socket's state and frees nothing.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

async fn read_requests<S: Storage + 'static>(
    reader: TcpStream,
    queue: LocalSender<Pending>,
    shard: Rc<Shard<S>>,
    session: Rc<Session>,
    (shutdown, closing): (Rc<ShutdownSignal>, Rc<ShutdownSignal>),
    activity: Rc<Activity>,
) {
    let max = shard.config.request_bytes_max;
    let mut buf = BytesMut::new();
    // The current frame's reservation (taken once its size prefix is in).
    let mut reserved: Option<Hold> = None;
    let stop = async {
        select(Box::pin(shutdown.wait()), Box::pin(closing.wait())).await;
    };
    let mut stop = Box::pin(stop);
    loop {
        // Before a SASL connection authenticates, its frames are bounded tighter.
        match frame_len(&buf, session.frame_bytes_max(max)) {
            Ok(Some(n)) => {
                // `buf` never holds more than one frame (see below), so the frame is all
                // of it: taken whole, it shares its allocation with nothing.
                assert_eq!(n, buf.len(), "a read stops at the end of its frame");
                let mut frame = std::mem::take(&mut buf);
                frame.advance(SIZE_PREFIX_BYTES);
                let hold = reserved.take().expect("reserved when its prefix arrived");
                if !wait_unmuted(&session, &frame, &activity, &mut stop).await {
                    return;
                }
                let task = spawn_request(&shard, &session, frame.freeze(), hold, &activity);
                if queue.send(task).await.is_err() {
                    return;
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(error = %e, "closing connection: bad frame");
                return;
            }
        }
        let frame_bytes = declared_frame_bytes(&buf);
        if reserved.is_none() && frame_bytes > 0 {
            // The size prefix is in and valid: reserve the frame before making room for it.
            let reserve = reserve(&shard.request_bytes, frame_bytes as u64, &activity);
            match select(Box::pin(reserve), &mut stop).await {
                Either::Left((hold, _)) => reserved = Some(hold),
                Either::Right(_) => return,
            }
            buf.reserve(frame_bytes - buf.len());
        }
        // The size prefix alone, then room for exactly the rest of the frame (read up to
        // READ_CHUNK_BYTES_MAX at a time): no read goes past the frame's end, and the frame
        // arrives without the buffer growing (and copying) on the way. The room is not
        // touched before bytes arrive in it (no zero-filling).
        let want = match buf.len() {
            got if got < SIZE_PREFIX_BYTES => SIZE_PREFIX_BYTES - got,
            got => (frame_bytes - got).min(READ_CHUNK_BYTES_MAX),
        };
        let read = Box::pin(read_some(&reader, &mut buf, want));
        match select(read, &mut stop).await {
            Either::Left((Ok(n), _)) if n > 0 => activity.touch(),
            Either::Left(_) | Either::Right(_) => return,
        }
    }
}

/// Before serving `frame` (its body, size prefix skipped): while the connection is throttled
/// (a client quota: Kafka mutes the channel until the throttle time is over), waits; and on a
/// connection a quota applies to, a Produce or Fetch first waits for the one before it to be
/// answered, so that its throttle holds this one back. `false` if `stop` came first.
pub(super) async fn wait_unmuted(
    session: &Session,
    frame: &[u8],
    activity: &Activity,
    stop: &mut (impl std::future::Future<Output = ()> + Unpin),
) -> bool {
    let counted = matches!(frame.get(..2), Some([0, 0] | [0, 1]));
    let serialize = counted && session.quota_limited();
    activity.busy(1);
    let mut woke = true;
    while woke && serialize && session.quota_pending() > 0 {
        let poll = glommio::timer::sleep(QUOTA_POLL);
        woke = matches!(select(Box::pin(poll), &mut *stop).await, Either::Left(_));
    }
    if let Some(until) = session.muted_at(Instant::now()).filter(|_| woke) {
        let sleep = glommio::timer::sleep(until.saturating_duration_since(Instant::now()));
        woke = matches!(select(Box::pin(sleep), stop).await, Either::Left(_));
    }
    activity.busy(-1);
    if woke && counted {
        session.quota_request(true);
    }
    woke
}

/// How often a quota-limited connection looks whether its previous Produce or Fetch is answered.
const QUOTA_POLL: Duration = Duration::from_millis(1);

/// `bytes` of `budget`, waiting (and counting the wait) if they do not fit now.
pub(super) async fn reserve(budget: &ByteBudget, bytes: u64, activity: &Activity) -> Hold {
    if let Some(hold) = budget.try_reserve(bytes) {
        return hold;
    }
    hooks::bound_hit(Bound::QueuedRequestBytes);
    activity.busy(1);
    let hold = budget.reserve(bytes).await;
    activity.busy(-1);
    hold
}

/// Runs one request frame's task; its reservation is given back once it is answered.
pub(super) fn spawn_request<S: Storage + 'static>(
    shard: &Rc<Shard<S>>,
    session: &Rc<Session>,
    body: Bytes,
    hold: Hold,
    activity: &Rc<Activity>,
) -> Pending {
    let (shard, session, activity) = (shard.clone(), session.clone(), activity.clone());
    let timer = hooks::request_started(&body);
    let produce = body.get(..2) == Some(&[0, 0]);
    let spawned = std::time::Instant::now();
    activity.busy(1);
    let task = glommio::spawn_local(async move {
        if produce {
            hooks::shard_stage(hooks::Stage::Queued, spawned.elapsed());
        }
        let outcome = dispatch(&*shard, body, &session).await;
        timer.done();
        drop(hold);
        activity.busy(-1);
        activity.touch();
        (outcome, produce.then(std::time::Instant::now))
    });
    task.detach()
}

/// Writes a response made of parts (a Fetch: metadata pieces and record chunks) with vectored
/// sends straight from the parts' buffers: record bytes are not copied in user space. When the
/// socket is full, glommio waits for it while sending part of the current buffer.
async fn write_parts(
    writer: &mut TcpStream,
    parts: Vec<Bytes>,
    activity: &Activity,
) -> std::io::Result<()> {
    let fd = writer.as_raw_fd();
    let total: usize = parts.iter().map(Bytes::len).sum();
    // `first` is the first part not wholly sent; `before` the bytes of the parts before it.
    let (mut sent, mut first, mut before) = (0usize, 0usize, 0usize);
    while sent < total {
        let call = std::time::Instant::now();
        let vectored = socket_io::send_vectored(fd, &parts[first..], sent - before)?;
        hooks::shard_stage(hooks::Stage::FetchSendCall, call.elapsed());
        sent += match vectored {
            Some(n) => n,
            None => match writer.write(&parts[first][sent - before..]).await? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n => n,
            },
        };
        activity.touch();
        while first < parts.len() && before + parts[first].len() <= sent {
            before += parts[first].len();
            first += 1;
        }
    }
    Ok(())
}

/// The size the buffered prefix announces (0 if not even 4 bytes are there yet).
fn declared_frame_bytes(buf: &[u8]) -> usize {
    match buf.get(..SIZE_PREFIX_BYTES) {
        Some(prefix) => {
            let size = i32::from_be_bytes(prefix.try_into().expect("4 bytes"));
            (size.max(0) as usize).saturating_add(SIZE_PREFIX_BYTES)
        }
        None => 0,
    }
}

/// Receives at most `want` bytes onto the end of `buf` (into its spare capacity, not
/// zero-filled first); 0 at end of stream.
async fn read_some(reader: &TcpStream, buf: &mut BytesMut, want: usize) -> std::io::Result<usize> {
    loop {
        if let Some(n) = socket_io::recv_into(reader.as_raw_fd(), buf, want)? {
            return Ok(n);
        }
        // Nothing there: wait until something is (peek consumes nothing; 0 is end of stream).
        if reader.peek(&mut [0u8; 1]).await? == 0 {
            return Ok(0);
        }
    }
}

async fn write_responses(
    mut writer: TcpStream,
    responses: LocalReceiver<Pending>,
    closing: Rc<ShutdownSignal>,
    activity: Rc<Activity>,
) {
    while let Some(task) = responses.recv().await {
        let (outcome, ready) = match task.await {
            Some((outcome, ready)) => (Some(outcome), ready),
            None => (None, None),
        };
        match outcome {
            Some(Outcome::Respond(bytes)) => {
                if let Err(e) = writer.write_all(&bytes).await {
                    tracing::debug!(error = %e, "write failed; closing connection");
                    break;
                }
                activity.touch();
                if let Some(ready) = ready {
                    hooks::shard_stage(hooks::Stage::Written, ready.elapsed());
                }
            }
            Some(Outcome::RespondParts(parts, hold)) => {
                let written = write_parts(&mut writer, parts, &activity).await;
                // The record bytes it held are gone with the parts: the Fetch budget gets
                // them back.
                drop(hold);
                if let Err(e) = written {
                    tracing::debug!(error = %e, "write failed; closing connection");
                    break;
                }
            }
            Some(Outcome::RespondThenClose(bytes)) => {
                let _ = writer.write_all(&bytes).await;
                break;
            }
            Some(Outcome::Silent) => {}
            Some(Outcome::Close) | None => break,
        }
    }
    closing.fire();
    let _ = writer.close().await;
}
