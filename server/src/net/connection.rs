//! One client connection: read whole frames (bounded), hand each to its own task, write the
//! responses back in request order.
//!
//! The reader and the writer run concurrently over the split socket. Decoded-but-unanswered
//! requests sit in a bounded queue (`inflight_requests_max`): when a pipelining client has that
//! many outstanding, the reader stops reading — TCP flow control then pushes back on the client,
//! and memory stays bounded. Frame sizes are checked before any allocation beyond what has
//! actually arrived (a lying size prefix costs nothing until its bytes come).

use std::rc::Rc;

use bytes::{Bytes, BytesMut};
use futures::future::{select, Either};
use futures::io::{ReadHalf, WriteHalf};
use futures::{AsyncReadExt, AsyncWriteExt};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::net::TcpStream;
use glommio::task::JoinHandle;
use rill_engine::io::Storage;
use rill_protocol::frame::{frame_len, SIZE_PREFIX_BYTES};

use crate::dispatch::{dispatch, Outcome};
use crate::shard::Shard;
use crate::shutdown::ShutdownSignal;

/// Bytes read per socket read while no frame size is known yet.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Largest single read into a frame buffer (frames bigger than this arrive over several reads).
const READ_CHUNK_BYTES_MAX: usize = 1 << 20;

type Pending = JoinHandle<Outcome>;

/// Serve a connection until the client closes it, sends something that must close it, or the
/// shard shuts down (then in-flight requests are finished and answered first).
pub async fn serve_connection<S: Storage + 'static>(
    stream: TcpStream,
    shard: Rc<Shard<S>>,
    shutdown: Rc<ShutdownSignal>,
) {
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let (reader, writer) = stream.split();
    let (queue, responses) = local_channel::new_bounded(shard.config.inflight_requests_max);
    let closing = Rc::new(ShutdownSignal::default());
    let writer_task = glommio::spawn_local(write_responses(writer, responses, closing.clone()));
    read_requests(reader, queue, shard, shutdown, closing).await;
    writer_task.await;
    tracing::debug!(?peer, "connection closed");
}

async fn read_requests<S: Storage + 'static>(
    mut reader: ReadHalf<TcpStream>,
    queue: LocalSender<Pending>,
    shard: Rc<Shard<S>>,
    shutdown: Rc<ShutdownSignal>,
    closing: Rc<ShutdownSignal>,
) {
    let max = shard.config.request_bytes_max;
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let stop = async {
        select(Box::pin(shutdown.wait()), Box::pin(closing.wait())).await;
    };
    let mut stop = Box::pin(stop);
    loop {
        // Dispatch every whole frame already buffered.
        let frame_bytes = loop {
            match frame_len(&buf, max) {
                Ok(Some(n)) => {
                    let frame = buf.split_to(n).freeze();
                    let body = frame.slice(SIZE_PREFIX_BYTES..);
                    // Frames are at most request_bytes_max, which the budget always exceeds.
                    let permit = shard.inflight_bytes.acquire_static_permit(n as u64).await;
                    let Ok(permit) = permit else { return };
                    let shard = shard.clone();
                    let task = glommio::spawn_local(async move {
                        let outcome = dispatch(&*shard, body).await;
                        drop(permit);
                        outcome
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
        // Grow the buffer at most by what has already arrived (doubling): `read_some` zero-fills
        // what it reads into, so sizing it by the declared frame alone would let a lying size
        // prefix pin up to READ_CHUNK_BYTES_MAX of resident memory per connection.
        let want = frame_bytes
            .saturating_sub(buf.len())
            .min(buf.len())
            .clamp(READ_CHUNK_BYTES, READ_CHUNK_BYTES_MAX);
        let read = Box::pin(read_some(&mut reader, &mut buf, want));
        match select(read, &mut stop).await {
            Either::Left((Ok(n), _)) if n > 0 => {}
            Either::Left(_) | Either::Right(_) => return,
        }
    }
}

/// Parts smaller than this are gathered into one buffer before sending (few syscalls); larger
/// ones (record chunks) go to the socket straight from the engine's buffers, uncopied. glommio's
/// socket has no vectored send, so this is the zero-copy path.
const GATHER_BYTES_MAX: usize = 16 * 1024;

async fn write_parts(writer: &mut WriteHalf<TcpStream>, parts: Vec<Bytes>) -> std::io::Result<()> {
    let mut gathered = BytesMut::new();
    for part in parts {
        if part.len() < GATHER_BYTES_MAX {
            gathered.extend_from_slice(&part);
            continue;
        }
        if !gathered.is_empty() {
            writer.write_all(&gathered).await?;
            gathered.clear();
        }
        writer.write_all(&part).await?;
    }
    if !gathered.is_empty() {
        writer.write_all(&gathered).await?;
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

async fn read_some(
    reader: &mut ReadHalf<TcpStream>,
    buf: &mut BytesMut,
    want: usize,
) -> std::io::Result<usize> {
    let start = buf.len();
    buf.resize(start + want, 0);
    let result = reader.read(&mut buf[start..]).await;
    buf.truncate(start + *result.as_ref().unwrap_or(&0));
    result
}

async fn write_responses(
    mut writer: WriteHalf<TcpStream>,
    responses: LocalReceiver<Pending>,
    closing: Rc<ShutdownSignal>,
) {
    while let Some(task) = responses.recv().await {
        match task.await {
            Some(Outcome::Respond(bytes)) => {
                if let Err(e) = writer.write_all(&bytes).await {
                    tracing::debug!(error = %e, "write failed; closing connection");
                    break;
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
