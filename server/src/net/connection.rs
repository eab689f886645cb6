//! One client connection: read whole frames (bounded), hand each to its own task, write the
//! responses back in request order.
//!
//! The reader and the writer run concurrently on the same socket (the reader through a second
//! descriptor of it). Decoded-but-unanswered requests sit in a bounded queue
//! (`inflight_requests_max`): when a pipelining client has that many outstanding, the reader
//! stops reading — TCP flow control then pushes back on the client, and memory stays bounded.
//! Frame sizes are checked before the buffer grows for them, by at most
//! `READ_CHUNK_BYTES_MAX` at a time, and the kernel writes received bytes straight into that
//! room (nothing zero-fills it first): a lying size prefix reserves room it never writes.
//!
//! Copies: a request's bytes are received once, into a buffer of the frame's own: its size
//! prefix is received alone, then the rest into room of exactly that size, so no read takes in
//! the next frame's bytes. The frame is handed on whole, shared with nothing, and Produce turns
//! it back into writable memory for its batches without copying them (`handler/produce.rs`).
//! A Fetch response is sent with vectored sends from its parts, record chunks included,
//! without gathering them into a new buffer.

use std::os::fd::{AsRawFd, FromRawFd};
use std::rc::Rc;

use bytes::{Buf, Bytes, BytesMut};

use futures::future::{select, Either};
use futures::AsyncWriteExt;
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::TcpStream;
use glommio::task::JoinHandle;
use rill_engine::io::Storage;
use rill_protocol::frame::{frame_len, SIZE_PREFIX_BYTES};

use super::socket_io;
use crate::admin::shard::hooks;
use crate::dispatch::{dispatch, Outcome};
use crate::shard::Shard;
use crate::shutdown::ShutdownSignal;

/// Largest single read into a frame buffer (frames bigger than this arrive over several reads).
const READ_CHUNK_BYTES_MAX: usize = 1 << 20;

/// A request's task: its outcome, and for a Produce when the response was ready.
type Pending = JoinHandle<(Outcome, Option<std::time::Instant>)>;

/// Serve a connection until the client closes it, sends something that must close it, or the
/// shard shuts down (then in-flight requests are finished and answered first).
pub async fn serve_connection<S: Storage + 'static>(
    stream: TcpStream,
    shard: Rc<Shard<S>>,
    shutdown: Rc<ShutdownSignal>,
) {
    let peer = stream.peer_addr().ok();
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
    let writer_task = glommio::spawn_local(write_responses(stream, responses, closing.clone()));
    read_requests(probe, queue, shard, shutdown, closing).await;
    writer_task.await;
    tracing::debug!(?peer, "connection closed");
}

async fn read_requests<S: Storage + 'static>(
    reader: TcpStream,
    queue: LocalSender<Pending>,
    shard: Rc<Shard<S>>,
    shutdown: Rc<ShutdownSignal>,
    closing: Rc<ShutdownSignal>,
) {
    let max = shard.config.request_bytes_max;
    let mut buf = BytesMut::new();
    let stop = async {
        select(Box::pin(shutdown.wait()), Box::pin(closing.wait())).await;
    };
    let mut stop = Box::pin(stop);
    loop {
        // Dispatch every whole frame already buffered.
        let frame_bytes = loop {
            match frame_len(&buf, max) {
                Ok(Some(n)) => {
                    // `buf` never holds more than one frame (see below), so the frame is all
                    // of it: taken whole, it shares its allocation with nothing.
                    assert_eq!(n, buf.len(), "a read stops at the end of its frame");
                    let mut frame = std::mem::take(&mut buf);
                    frame.advance(SIZE_PREFIX_BYTES);
                    let body = frame.freeze();
                    // Frames are at most request_bytes_max, which the budget always exceeds.
                    let permit = shard.inflight_bytes.acquire_static_permit(n as u64).await;
                    let Ok(permit) = permit else { return };
                    let shard = shard.clone();
                    let timer = hooks::request_started(&body);
                    let produce = body.get(..2) == Some(&[0, 0]);
                    let spawned = std::time::Instant::now();
                    let task = glommio::spawn_local(async move {
                        if produce {
                            hooks::shard_stage(hooks::Stage::Queued, spawned.elapsed());
                        }
                        let outcome = dispatch(&*shard, body).await;
                        timer.done();
                        drop(permit);
                        (outcome, produce.then(std::time::Instant::now))
                    });
                    if queue.send(task.detach()).await.is_err() {
                        return;
                    }
                }
                Ok(None) => break declared_frame_bytes(&buf),
                Err(e) => {
                    tracing::debug!(error = %e, "closing connection: bad frame");
                    return;
                }
            }
        };
        // The size prefix alone, then room for exactly the rest of the frame (up to
        // READ_CHUNK_BYTES_MAX at a time): no read goes past the frame's end, and a frame of up
        // to that size arrives without the buffer growing (and copying) on the way. The room is
        // not touched before bytes arrive in it (no zero-filling), so a lying size prefix costs
        // address space, not resident memory.
        let want = match buf.len() {
            got if got < SIZE_PREFIX_BYTES => SIZE_PREFIX_BYTES - got,
            got => (frame_bytes - got).min(READ_CHUNK_BYTES_MAX),
        };
        let read = Box::pin(read_some(&reader, &mut buf, want));
        match select(read, &mut stop).await {
            Either::Left((Ok(n), _)) if n > 0 => {}
            Either::Left(_) | Either::Right(_) => return,
        }
    }
}

/// Writes a response made of parts (a Fetch: metadata pieces and record chunks) with vectored
/// sends straight from the parts' buffers: record bytes are not copied in user space. When the
/// socket is full, glommio waits for it while sending part of the current buffer.
async fn write_parts(writer: &mut TcpStream, parts: Vec<Bytes>) -> std::io::Result<()> {
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
                if let Some(ready) = ready {
                    hooks::shard_stage(hooks::Stage::Written, ready.elapsed());
                }
            }
            Some(Outcome::RespondParts(parts)) => {
                if let Err(e) = write_parts(&mut writer, parts).await {
                    tracing::debug!(error = %e, "write failed; closing connection");
                    break;
                }
            }
            Some(Outcome::Silent) => {}
            Some(Outcome::Close) | None => break,
        }
    }
    closing.fire();
    let _ = writer.close().await;
}
