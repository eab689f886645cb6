//! Graceful stop: SIGTERM/SIGINT set a process-wide flag; each shard notices it and fires its
//! own [`ShutdownSignal`], which stops its accept loop and its connections' readers.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::channel::local::oneshot;
use futures::future::{select, Either};

/// A one-shot, shard-local broadcast: `fire` once, every `wait` (before or after) resolves.
#[derive(Debug, Default)]
pub struct ShutdownSignal {
    fired: Cell<bool>,
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
}

impl ShutdownSignal {
    /// Fire the signal; idempotent.
    pub fn fire(&self) {
        self.fired.set(true);
        for waiter in std::mem::take(&mut *self.waiters.borrow_mut()) {
            let _ = waiter.send(());
        }
    }

    /// Whether it has fired.
    pub fn is_fired(&self) -> bool {
        self.fired.get()
    }

    /// Resolves once fired.
    pub async fn wait(&self) {
        if self.fired.get() {
            return;
        }
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = self.waiters.borrow_mut();
            waiters.retain(|w| !w.is_canceled());
            waiters.push(sender);
        }
        let _ = receiver.await;
    }

    /// Sleeps `period` unless the signal fires first: `true` after a full sleep, `false` once
    /// fired (the polling loops' one step).
    pub async fn sleep(&self, period: std::time::Duration) -> bool {
        let tick = select(
            Box::pin(glommio::timer::sleep(period)),
            Box::pin(self.wait()),
        )
        .await;
        matches!(tick, Either::Left(_))
    }
}

/// Install SIGTERM/SIGINT handlers; the returned flag turns true on the first signal. A second
/// signal exits at once (an operator who presses ^C twice means it).
pub fn install_signal_handlers() -> std::io::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let flag = Arc::new(AtomicBool::new(false));
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    let set = flag.clone();
    std::thread::Builder::new()
        .name("rill-signals".into())
        .spawn(move || {
            for signal in signals.forever() {
                if set.swap(true, Ordering::SeqCst) {
                    tracing::warn!(signal, "second signal: exiting without a clean shutdown");
                    std::process::exit(130);
                }
                tracing::info!(
                    signal,
                    "shutting down: finishing in-flight requests, closing logs"
                );
            }
        })?;
    Ok(flag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_after_fire_returns() {
        let s = ShutdownSignal::default();
        s.fire();
        futures::executor::block_on(s.wait());
        assert!(s.is_fired());
    }
}
