//! The channels between shards, one [`ChannelMesh`] per kind of message: built on the main
//! thread, then connected by each shard at start-up without waiting for any wake-up.
//!
//! # Why not glommio's `MeshBuilder`
//! About one start in a few hundred used to hang: one shard parked in `io_uring_enter` for good,
//! the other spinning. The cause is in glommio 0.9's executor, not in the mesh logic:
//!
//! 1. `MeshBuilder::join` connects both ends of every channel with `SharedSender::connect` /
//!    `SharedReceiver::connect`. A connect stores its executor's id in the channel and then
//!    waits until the peer's end has stored its own. That wait is a poll loop, not a
//!    notification: the pending connect re-registers a "connection waker" that the reactor
//!    wakes on every turn; the peer's connect never signals the waiting executor.
//! 2. The executor loop (`LocalExecutor::run`) parks whenever `run_task_queues` returns `false`.
//!    But `run_task_queues` also returns `false` when the preemption flag is already raised as
//!    it starts (`need_preempt()`: the preempt timer fired, e.g. while the thread was descheduled
//!    on a busy machine), without running the tasks that are runnable. The next
//!    `spin_poll_io` finds no new event (the connection wakers were drained the turn before),
//!    so the executor parks with the connect task runnable and nothing left to wake it.
//!
//! Traced with an instrumented copy of glommio in a loop of 2-executor joins: "connection
//! waker drained → `run_task_queues`: preempt pending, ran nothing, 1 runnable queue →
//! `spin_poll_io` false → about to sleep, 0 events"; the peer then spins in its own connect,
//! waiting for the parked one. Any wait that relies on a wake-up can hit step 2; only the
//! connect handshake has no later event that would end it.
//!
//! # What Rill does instead
//! The channels are made on the main thread ([`ChannelMesh::new`]), and each shard takes its
//! ends ([`MeshEnds`]). [`MeshEnds::connect`] never waits for a wake-up: it polls each end's
//! connect once (which stores this shard's id), blocks the thread in a [`Rendezvous`] until
//! every shard has done the same, then polls each connect again, which now completes at once
//! because every peer id is stored. A second rendezvous keeps any shard from going on (and
//! possibly failing and exiting) before all are connected.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::task::noop_waker_ref;
use glommio::channels::shared_channel::{
    self, ConnectedReceiver, ConnectedSender, SharedReceiver, SharedSender,
};

use super::rendezvous::{Abandoned, Rendezvous};

/// Channels between every ordered pair of shards for messages of type `T`.
pub struct ChannelMesh<T: Send> {
    ends: Vec<Option<MeshEnds<T>>>,
}

/// One shard's ends of a mesh, unconnected (`Send`: moved into the shard's executor).
pub struct MeshEnds<T: Send> {
    shard: usize,
    /// `senders[to]`: to shard `to` (`None` for this shard itself).
    senders: Vec<Option<SharedSender<T>>>,
    /// `receivers[from]`: from shard `from` (`None` for this shard itself).
    receivers: Vec<Option<SharedReceiver<T>>>,
}

/// One shard's ends of a mesh, connected.
pub struct Links<T: Send> {
    /// This shard's index.
    pub shard: usize,
    /// `senders[to]`: to shard `to` (`None` for this shard itself).
    pub senders: Vec<Option<ConnectedSender<T>>>,
    /// `(from, receiver)` for every other shard.
    pub receivers: Vec<(usize, ConnectedReceiver<T>)>,
}

impl<T: Send + 'static> ChannelMesh<T> {
    /// Bounded channels (`capacity` messages each) between every ordered pair of `shards`.
    pub fn new(shards: usize, capacity: usize) -> Self {
        assert!(shards > 0 && capacity > 0);
        let mut senders: Vec<Vec<Option<SharedSender<T>>>> = Vec::with_capacity(shards);
        let mut receivers: Vec<Vec<Option<SharedReceiver<T>>>> = (0..shards)
            .map(|_| (0..shards).map(|_| None).collect())
            .collect();
        for from in 0..shards {
            let mut row = Vec::with_capacity(shards);
            for (to, column) in receivers.iter_mut().enumerate() {
                if from == to {
                    row.push(None);
                    continue;
                }
                let (sender, receiver) = shared_channel::new_bounded(capacity);
                row.push(Some(sender));
                column[from] = Some(receiver);
            }
            senders.push(row);
        }
        let ends = senders
            .into_iter()
            .zip(receivers)
            .enumerate()
            .map(|(shard, (senders, receivers))| {
                Some(MeshEnds {
                    shard,
                    senders,
                    receivers,
                })
            })
            .collect();
        ChannelMesh { ends }
    }

    /// Shard `shard`'s ends; each shard's are taken once.
    pub fn take(&mut self, shard: usize) -> MeshEnds<T> {
        self.ends[shard]
            .take()
            .expect("a shard takes its ends once")
    }
}

/// A connect future of one end, or what it resolved to.
enum Connecting<F: Future> {
    Pending(Pin<Box<F>>),
    Done(F::Output),
}

impl<F: Future> Connecting<F> {
    fn start(future: F) -> Self {
        let mut future = Box::pin(future);
        match poll_once(future.as_mut()) {
            Poll::Ready(end) => Connecting::Done(end),
            Poll::Pending => Connecting::Pending(future),
        }
    }

    /// The connected end; its peer stored its id before the rendezvous, so one more poll
    /// completes it.
    fn finish(self) -> F::Output {
        match self {
            Connecting::Done(end) => end,
            Connecting::Pending(mut future) => match poll_once(future.as_mut()) {
                Poll::Ready(end) => end,
                Poll::Pending => unreachable!("a peer past the rendezvous has connected"),
            },
        }
    }
}

/// Polls `future` once, with a waker that does nothing (nobody needs waking: see the module doc).
fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(noop_waker_ref()))
}

impl<T: Send + 'static> MeshEnds<T> {
    /// This shard's index.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Connects every end (see the module doc). Every shard calls this, on its executor, with
    /// the same `rendezvous`; it blocks the thread until all have. `Abandoned` if start-up ends.
    pub fn connect(self, rendezvous: &Rendezvous) -> Result<Links<T>, Abandoned> {
        let senders: Vec<_> = self
            .senders
            .into_iter()
            .map(|end| end.map(|end| Connecting::start(end.connect())))
            .collect();
        let receivers: Vec<_> = self
            .receivers
            .into_iter()
            .enumerate()
            .filter_map(|(from, end)| Some((from, Connecting::start(end?.connect()))))
            .collect();
        rendezvous.wait()?; // every end of every shard has stored its executor's id
        let links = Links {
            shard: self.shard,
            senders: senders
                .into_iter()
                .map(|end| end.map(Connecting::finish))
                .collect(),
            receivers: receivers
                .into_iter()
                .map(|(from, end)| (from, end.finish()))
                .collect(),
        };
        rendezvous.wait()?; // nobody goes on (and perhaps exits) before all are connected
        Ok(links)
    }
}
