//! The per-shard accept loop. Every shard binds the same address (glommio sets SO_REUSEPORT), so
//! the kernel spreads new connections across shards.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use futures::future::{select, Either};
use glommio::net::TcpListener;
use rill_engine::io::Storage;

use super::connection::serve_connection;
use crate::admin::shard::hooks;
use crate::shard::Shard;
use crate::shutdown::ShutdownSignal;

/// How long a stopping shard waits for its connections to finish in-flight requests.
pub const DRAIN_WAIT_MAX: Duration = Duration::from_secs(5);

/// Accept until shutdown, then wait (bounded) for open connections to finish.
pub async fn accept_loop<S: Storage + 'static>(
    listener: TcpListener,
    shard: Rc<Shard<S>>,
    shutdown: Rc<ShutdownSignal>,
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
        open.set(open.get() + 1);
        hooks::connection_accepted();
        let (shard, shutdown, open) = (shard.clone(), shutdown.clone(), open.clone());
        glommio::spawn_local(async move {
            serve_connection(stream, shard, shutdown).await;
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
