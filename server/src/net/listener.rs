//! The per-shard accept loop (one per listener). Every shard binds the same address (glommio sets SO_REUSEPORT), so
//! the kernel spreads new connections across shards.
//!
//! Each accepted connection takes a place in the process-wide [`ConnectionQuotas`] before it is
//! served. With `max.connections` reached, the loop holds the connection it accepted and
//! accepts nothing else until a place frees (as Kafka's acceptor blocks in
//! `waitForConnectionSlot`): clients queue in the kernel's backlog meanwhile. A connection from
//! an address at its `max.connections.per.ip` is closed at once.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{select, Either};
use glommio::net::{TcpListener, TcpStream};
use rill_engine::io::Storage;

use super::connection::serve_connection;
use super::quotas::{Admission, ConnectionQuotas, ConnectionSlot};
use crate::admin::bound_hits::Bound;
use crate::admin::shard::hooks;
use crate::security::listeners::Listener;
use crate::shard::Shard;
use crate::shutdown::ShutdownSignal;

/// How long a stopping shard waits for its connections to finish in-flight requests.
pub const DRAIN_WAIT_MAX: Duration = Duration::from_secs(5);

/// How often a loop held by `max.connections` looks for a free place. Polled: the place frees
/// on whichever shard closes a connection, and no shard wakes another's task.
const SLOT_POLL: Duration = Duration::from_millis(5);

/// Accept until shutdown, then wait (bounded) for open connections to finish.
pub async fn accept_loop<S: Storage + 'static>(
    listener: TcpListener,
    served: Arc<Listener>,
    shard: Rc<Shard<S>>,
    shutdown: Rc<ShutdownSignal>,
    quotas: Arc<ConnectionQuotas>,
) {
    let open = Rc::new(Cell::new(0usize));
    loop {
        let accepted = select(Box::pin(listener.accept()), Box::pin(shutdown.wait())).await;
        let stream = match accepted {
            Either::Left((Ok(stream), _)) => stream,
            Either::Left((Err(e), _)) => {
                tracing::warn!(error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
                continue;
            }
            Either::Right(_) => break,
        };
        let Some(slot) = admit(&stream, &quotas, &shutdown).await else {
            continue;
        };
        open.set(open.get() + 1);
        hooks::connection_accepted();
        let (shard, shutdown, open) = (shard.clone(), shutdown.clone(), open.clone());
        let served = served.clone();
        glommio::spawn_local(async move {
            serve_connection(stream, served, shard, shutdown).await;
            drop(slot);
            open.set(open.get() - 1);
            hooks::connection_closed();
        })
        .detach();
    }
    drop(listener);
    let started = std::time::Instant::now();
    while open.get() > 0 && started.elapsed() < DRAIN_WAIT_MAX {
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
}

/// A place for `stream` in the quotas: waits while `max.connections` is reached (`None` if
/// the shard stops meanwhile); `None` (the stream dropped, so closed) when its address is at
/// its own maximum.
async fn admit(
    stream: &TcpStream,
    quotas: &Arc<ConnectionQuotas>,
    shutdown: &ShutdownSignal,
) -> Option<ConnectionSlot> {
    let ip = match stream.peer_addr() {
        Ok(peer) => peer.ip(),
        Err(e) => {
            tracing::debug!(error = %e, "accepted connection has no peer address; closing it");
            return None;
        }
    };
    let mut waited = false;
    loop {
        match quotas.admit(ip) {
            Admission::Admitted(slot) => return Some(slot),
            Admission::AddressFull { limit } => {
                // Debug only: a client retrying in a loop must not flood the log (the metric
                // counts every one).
                tracing::debug!(
                    %ip,
                    limit,
                    "rejected connection: the address already has max.connections.per.ip"
                );
                hooks::bound_hit(Bound::MaxConnectionsPerIp);
                return None;
            }
            Admission::BrokerFull => {
                if !waited {
                    tracing::info!(
                        open = quotas.open(),
                        "max.connections reached: accepting again once a connection closes"
                    );
                    hooks::bound_hit(Bound::MaxConnections);
                    waited = true;
                }
                if !shutdown.sleep(SLOT_POLL).await {
                    return None;
                }
            }
        }
    }
}
