//! A connection on a TLS listener (SSL): the handshake (bounded by [`HANDSHAKE_TIMEOUT`]; a
//! client that does not speak TLS gets nothing and is closed), the principal from the client
//! certificate, then frames read and answered in order over the TLS stream (rustls through
//! futures-rustls on glommio's socket), with the same per-connection bounds as plaintext:
//! `socket.request.max.bytes`, the shard's `queued.max.request.bytes` reservation before a frame
//! is read, `rill.connection.inflight.requests.max` requests in flight.
//!
//! `connections.max.idle.ms` closes an idle one as on plaintext (the handshake's own bound
//! first). Unlike plaintext (`super::connection`), responses are encrypted, so a Fetch's record
//! chunks go through rustls (copied into TLS records) rather than straight from their buffers.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use futures::future::{select, Either};
use futures::{AsyncReadExt, AsyncWriteExt};
use futures_rustls::TlsAcceptor;
use glommio::channels::local_channel;
use glommio::net::TcpStream;
use rill_engine::io::Storage;
use rill_protocol::frame::SIZE_PREFIX_BYTES;

use super::connection::{close_when_idle, reserve, spawn_request, wait_unmuted, Activity, Pending};
use crate::dispatch::Outcome;
use crate::security::listeners::Listener;
use crate::security::principal::subject_dn;
use crate::security::session::Session;
use crate::security::tls::TlsListener;
use crate::shard::Shard;
use crate::shutdown::ShutdownSignal;

/// How long a client has to finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one connection of a TLS listener until it closes or the shard stops.
pub async fn serve_tls<S: Storage + 'static>(
    stream: TcpStream,
    listener: Arc<Listener>,
    tls: Arc<TlsListener>,
    shard: Rc<Shard<S>>,
    shutdown: Rc<ShutdownSignal>,
) {
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    // The socket's descriptor, for the idle close (the TLS stream owns the socket from here).
    let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
    let acceptor = TlsAcceptor::from(tls.config.current());
    let handshake = Box::pin(acceptor.accept(stream));
    let timeout = Box::pin(glommio::timer::sleep(HANDSHAKE_TIMEOUT));
    let stream = match select(handshake, timeout).await {
        Either::Left((Ok(stream), _)) => stream,
        Either::Left((Err(e), _)) => {
            tracing::debug!(?peer, error = %e, "TLS handshake failed; closing");
            return;
        }
        Either::Right(_) => {
            tracing::debug!(?peer, "TLS handshake timed out; closing");
            return;
        }
    };
    let session = Session::new(listener, peer);
    let certificate = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first());
    if let Some(cert) = certificate {
        let dn = subject_dn(cert.as_ref());
        let Some(principal) = dn.as_deref().and_then(|dn| tls.rules.map(dn)) else {
            tracing::info!(
                ?peer,
                ?dn,
                "no ssl.principal.mapping.rules rule applies to the client certificate; closing"
            );
            return;
        };
        session.set_principal(principal);
    }
    tracing::debug!(?peer, principal = %session.principal(), "TLS connection");
    let session = Rc::new(session);
    let (reader, writer) = stream.split();
    let (queue, responses) = local_channel::new_bounded(shard.config.inflight_requests_max);
    let activity = Activity::new();
    let closing = Rc::new(ShutdownSignal::default());
    if let Some(idle) = shard.config.connections.idle() {
        let watch = close_when_idle(fd, idle, activity.clone(), closing.clone());
        glommio::spawn_local(watch).detach();
    }
    let writer = write_responses(writer, responses, closing.clone(), activity.clone());
    let writer_task = glommio::spawn_local(writer);
    let reading = read_frames(reader, queue, &shard, &session, &activity);
    let stop = async {
        select(Box::pin(shutdown.wait()), Box::pin(closing.wait())).await;
    };
    select(Box::pin(reading), Box::pin(stop)).await;
    writer_task.await;
    tracing::debug!(?peer, "TLS connection closed");
}

type Reader = futures::io::ReadHalf<futures_rustls::server::TlsStream<TcpStream>>;
type Writer = futures::io::WriteHalf<futures_rustls::server::TlsStream<TcpStream>>;

/// Reads frames until the client closes or sends a bad size; each is reserved from the shard's
/// request budget before its body is read, then served as its own task.
async fn read_frames<S: Storage + 'static>(
    mut reader: Reader,
    queue: local_channel::LocalSender<Pending>,
    shard: &Rc<Shard<S>>,
    session: &Rc<Session>,
    activity: &Rc<Activity>,
) {
    let max = shard.config.request_bytes_max;
    loop {
        let mut prefix = [0u8; SIZE_PREFIX_BYTES];
        if reader.read_exact(&mut prefix).await.is_err() {
            return;
        }
        let size = i32::from_be_bytes(prefix);
        let Ok(size) = usize::try_from(size) else {
            tracing::debug!(size, "closing TLS connection: negative frame size");
            return;
        };
        let max = session.frame_bytes_max(max);
        if size > max || size == 0 {
            tracing::debug!(size, max, "closing TLS connection: bad frame size");
            return;
        }
        let hold = reserve(
            &shard.request_bytes,
            (size + SIZE_PREFIX_BYTES) as u64,
            activity,
        )
        .await;
        let mut body = BytesMut::zeroed(size);
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        activity.touch();
        // (This loop is raced against shutdown by its caller: nothing else to stop on here.)
        wait_unmuted(session, &body, activity, &mut futures::future::pending()).await;
        let task = spawn_request(shard, session, body.freeze(), hold, activity);
        if queue.send(task).await.is_err() {
            return;
        }
    }
}

/// Writes each request's response in request order, then closes.
async fn write_responses(
    mut writer: Writer,
    responses: local_channel::LocalReceiver<Pending>,
    closing: Rc<ShutdownSignal>,
    activity: Rc<Activity>,
) {
    while let Some(task) = responses.recv().await {
        let written = match task.await.map(|(outcome, _)| outcome) {
            Some(Outcome::Respond(bytes)) => writer.write_all(&bytes).await,
            Some(Outcome::RespondThenClose(bytes)) => {
                let _ = writer.write_all(&bytes).await;
                let _ = writer.flush().await;
                break;
            }
            Some(Outcome::RespondParts(parts, hold)) => {
                let mut result = Ok(());
                for part in &parts {
                    result = writer.write_all(part).await;
                    if result.is_err() {
                        break;
                    }
                }
                drop(hold);
                result
            }
            Some(Outcome::Silent) => Ok(()),
            Some(Outcome::Close) | None => break,
        };
        if let Err(e) = written.and(writer.flush().await) {
            tracing::debug!(error = %e, "TLS write failed; closing connection");
            break;
        }
        activity.touch();
    }
    closing.fire();
    let _ = writer.close().await;
}
