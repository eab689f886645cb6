//! [`Router`]: one way for every kind of cross-shard request (partitions, consumer groups, and
//! whatever else is owned by one shard) to reach the shard that owns it, and [`serve`] for the
//! owner's side. Which shard owns what is decided elsewhere ([`super::owner`] for partitions);
//! the router only carries the request there.
//!
//! ```text
//! asking shard                                      owning shard
//! Router::call(owner, local, request)
//!   owner == this shard ── local.serve(request)
//!   otherwise: waiter `id` in this shard's table
//!     ── Call { id, request } ── call mesh ───────▶ serve(): one task per request, at most
//!                                                   `permits` at once ── service.serve(request)
//!   answer task: waiter `id` ◀── Answer { id } ── answer mesh ──┘
//!   (a dropped abandonable call) ── Cancel { id } ─▶ drops that request's task
//! ```
//! # No waker crosses a thread
//! A reply travels back over a glommio shared channel, whose peers notify each other through
//! the executor's own eventfd; the answer task on the asking shard completes a shard-local
//! waiter. Cancellation is a message the other way. So no task's `Waker` is ever stored,
//! woken or dropped on another shard's thread.
//!
//! That matters because glommio 0.9 mishandles a waker dropped on a foreign thread
//! (`task/raw.rs`, `drop_waker`): the foreign thread decrements the task's reference count and,
//! if that reached 0, only then takes a new reference to send the waker home. In that gap the
//! home shard's `JoinHandle::drop` (connection.rs awaits each request's task through one) reads
//! the count without a lock, sees 0 on a completed task and frees it; the foreign thread then
//! revives the freed task and the home shard frees it again ("double free detected in
//! tcache 2"). A `futures` oneshot completed by the owning shard reached exactly that path: its
//! `wake()` clones the waker, queues the clone home and then drops the original on the foreign
//! thread, by which time the home shard may have run the task to completion.
//!
//! # Back-pressure, order, shutdown
//! Many requests are in flight at once. The owner serves each in its own task (a long poll or a
//! JoinGroup must not block the stream), spawned in arrival order, bounded by a permit count per
//! shard: when it is exhausted the owner stops reading and senders wait on the bounded channel.
//! A request the service marks [`Service::abandon_unheard`] is dropped when its asker stops
//! waiting (a `Cancel` queued behind the requests already sent). When an owner's answers channel
//! closes (it is gone), every call still waiting on it answers `unavailable()`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use crate::channel::local::oneshot;
use futures::future::{select, Either};
use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::channels::shared_channel::{ConnectedReceiver, ConnectedSender};
use glommio::sync::Semaphore;

use super::mesh::{ChannelMesh, Links, MeshEnds};
use super::rendezvous::{Abandoned, Rendezvous};
pub use super::service::Service;
use crate::shutdown::ShutdownSignal;

/// Cross-shard requests one shard serves concurrently, per router.
pub const REMOTE_REQUESTS_MAX: u64 = 4096;

/// What an asking shard sends the owning shard.
#[derive(Debug)]
pub enum ToOwner<Req> {
    /// Serve `request`; answer with `id`.
    Call {
        /// The asker's key for the answer (unique per asker and owner).
        id: u64,
        /// What to do.
        request: Req,
    },
    /// The asker stopped waiting for call `id`: drop it if the service lets it go.
    Cancel {
        /// The call's key.
        id: u64,
    },
}

/// The owning shard's answer to call `id`: its reply, or [`Panicked`].
#[derive(Debug)]
pub struct Answer<Rep> {
    id: u64,
    reply: Result<Rep, Panicked>,
}

/// Serving the call panicked on the owning shard (caught there: the owner goes on). The asker
/// resumes the panic in its own task, as if it had served the call itself, so a request gets
/// the same answer (`crate::panic_guard`) whichever shard owns what it asked for.
#[derive(Debug, Clone, Copy)]
pub struct Panicked;

/// The channels of one kind of request between every ordered pair of shards: calls to the
/// owner and answers back (built on the main thread, see [`super::mesh`]).
pub struct RouterMesh<Req: Send, Rep: Send> {
    calls: ChannelMesh<ToOwner<Req>>,
    answers: ChannelMesh<Answer<Rep>>,
}

/// One shard's ends of a [`RouterMesh`], unconnected (`Send`: moved into its executor).
pub struct RouterEnds<Req: Send, Rep: Send> {
    calls: MeshEnds<ToOwner<Req>>,
    answers: MeshEnds<Answer<Rep>>,
}

/// One shard's ends of a [`RouterMesh`], connected.
pub struct RouterLinks<Req: Send, Rep: Send> {
    calls: Links<ToOwner<Req>>,
    answers: Links<Answer<Rep>>,
}

impl<Req: Send, Rep: Send> RouterLinks<Req, Rep> {
    /// This shard's index.
    pub fn shard(&self) -> usize {
        self.calls.shard
    }
}

impl<Req: Send + 'static, Rep: Send + 'static> RouterMesh<Req, Rep> {
    /// Bounded channels (`capacity` messages each) both ways between every pair of `shards`.
    pub fn new(shards: usize, capacity: usize) -> Self {
        RouterMesh {
            calls: ChannelMesh::new(shards, capacity),
            answers: ChannelMesh::new(shards, capacity),
        }
    }

    /// Shard `shard`'s ends; each shard's are taken once.
    pub fn take(&mut self, shard: usize) -> RouterEnds<Req, Rep> {
        RouterEnds {
            calls: self.calls.take(shard),
            answers: self.answers.take(shard),
        }
    }
}

impl<Req: Send + 'static, Rep: Send + 'static> RouterEnds<Req, Rep> {
    /// Connects both directions (blocking the thread: see [`MeshEnds::connect`]).
    pub fn connect(self, rendezvous: &Rendezvous) -> Result<RouterLinks<Req, Rep>, Abandoned> {
        Ok(RouterLinks {
            calls: self.calls.connect(rendezvous)?,
            answers: self.answers.connect(rendezvous)?,
        })
    }
}

/// On the owning shard: each peer's calls, and where their answers go.
pub type Inbox<Req, Rep> = Vec<(
    ConnectedReceiver<ToOwner<Req>>,
    ConnectedSender<Answer<Rep>>,
)>;

/// The calls this shard waits on at one owner, by id (shard-local).
struct Waiters<Rep> {
    next_id: Cell<u64>,
    waiting: RefCell<HashMap<u64, oneshot::Sender<Result<Rep, Panicked>>>>,
    /// The owner's answers channel closed: nothing more will be answered.
    gone: Cell<bool>,
}

impl<Rep> Waiters<Rep> {
    fn new() -> Self {
        Waiters {
            next_id: Cell::new(0),
            waiting: RefCell::new(HashMap::new()),
            gone: Cell::new(false),
        }
    }

    /// A fresh id and where its answer will arrive.
    fn register(&self) -> (u64, oneshot::Receiver<Result<Rep, Panicked>>) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let (sender, receiver) = oneshot::channel();
        let previous = self.waiting.borrow_mut().insert(id, sender);
        debug_assert!(previous.is_none(), "call ids are unique");
        (id, receiver)
    }

    /// Hands `reply` to call `id`'s waiter, if it still waits.
    fn answer(&self, id: u64, reply: Result<Rep, Panicked>) {
        let waiter = self.waiting.borrow_mut().remove(&id);
        if let Some(waiter) = waiter {
            let _ = waiter.send(reply);
        }
    }

    /// The owner is gone: every waiter, now and later, gets `unavailable()`.
    fn owner_gone(&self) {
        self.gone.set(true);
        let waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        drop(waiting); // each waiter's receiver resolves as cancelled
    }
}

/// This shard's side of one owning peer.
struct Peer<Req: Send, Rep: Send> {
    calls: Rc<ConnectedSender<ToOwner<Req>>>,
    waiters: Rc<Waiters<Rep>>,
    /// Ids of abandoned calls, forwarded as `Cancel` by a task (a drop cannot wait for room).
    cancels: LocalSender<u64>,
}

/// Routes requests of one kind from this shard to the shard that owns each.
pub struct Router<Req: Send, Rep: Send> {
    shard: usize,
    /// `peers[owner]`; empty with one shard.
    peers: Vec<Option<Peer<Req, Rep>>>,
}

impl<Req: Send + 'static, Rep: Send + 'static> Router<Req, Rep> {
    /// The router of a broker with one shard: everything is local.
    pub fn single() -> Self {
        Router {
            shard: 0,
            peers: Vec::new(),
        }
    }

    /// The router over this shard's connected links (on its executor: it spawns, per peer, the
    /// task that takes in answers and the one that forwards cancels); returns the inbox of
    /// other shards' calls to [`serve`].
    pub fn over(links: RouterLinks<Req, Rep>) -> (Self, Inbox<Req, Rep>) {
        let RouterLinks { calls, answers } = links;
        assert_eq!(calls.shard, answers.shard);
        let shard = calls.shard;
        let mut answer_senders = answers.senders;
        let mut answer_receivers: Vec<_> = answers.receivers.into_iter().map(Some).collect();
        let peers = calls
            .senders
            .into_iter()
            .enumerate()
            .map(|(owner, sender)| {
                let sender = Rc::new(sender?);
                let waiters = Rc::new(Waiters::new());
                let (from, receiver) = answer_receivers
                    .iter_mut()
                    .find(|r| r.as_ref().is_some_and(|(from, _)| *from == owner))
                    .and_then(Option::take)
                    .expect("an answers channel from every peer");
                debug_assert_eq!(from, owner);
                glommio::spawn_local(take_answers(receiver, waiters.clone())).detach();
                let (cancels, pending) = local_channel::new_unbounded();
                glommio::spawn_local(forward_cancels(pending, sender.clone())).detach();
                Some(Peer {
                    calls: sender,
                    waiters,
                    cancels,
                })
            })
            .collect();
        let inbox = calls
            .receivers
            .into_iter()
            .map(|(from, receiver)| {
                let answers = answer_senders[from]
                    .take()
                    .expect("an answers channel to every peer");
                (receiver, answers)
            })
            .collect();
        (Router { shard, peers }, inbox)
    }

    /// This shard's index.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Every other shard's index.
    pub fn peers(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.peers.len()).filter(move |s| *s != self.shard)
    }

    /// Runs `request` on shard `owner`: here through `local`, elsewhere through the mesh.
    /// `unavailable` answers when the owner is gone (shutting down).
    pub async fn call<S: Service<Req, Reply = Rep>>(
        &self,
        owner: usize,
        local: &S,
        request: Req,
        unavailable: impl FnOnce() -> Rep,
    ) -> Rep {
        if owner == self.shard {
            return local.serve(request).await;
        }
        let Some(Some(peer)) = self.peers.get(owner) else {
            unreachable!("shard {owner} is not in the mesh of shard {}", self.shard)
        };
        if peer.waiters.gone.get() {
            return unavailable();
        }
        let abandonable = S::abandon_unheard(&request);
        let (id, answer) = peer.waiters.register();
        let mut waiting = Waiting {
            peer,
            id,
            cancel_on_drop: false,
        };
        if peer
            .calls
            .send(ToOwner::Call { id, request })
            .await
            .is_err()
        {
            return unavailable();
        }
        waiting.cancel_on_drop = abandonable;
        let reply = answer.await;
        waiting.cancel_on_drop = false;
        match reply {
            Ok(Ok(reply)) => reply,
            Ok(Err(Panicked)) => std::panic::resume_unwind(Box::new(format!(
                "shard {owner} panicked serving a call from shard {} (logged there)",
                self.shard
            ))),
            Err(_) => unavailable(),
        }
    }
}

/// A call in flight: dropped before its answer (the caller stopped waiting), it forgets its
/// waiter and, for an abandonable request already sent, tells the owner.
struct Waiting<'a, Req: Send, Rep: Send> {
    peer: &'a Peer<Req, Rep>,
    id: u64,
    cancel_on_drop: bool,
}

impl<Req: Send, Rep: Send> Drop for Waiting<'_, Req, Rep> {
    fn drop(&mut self) {
        self.peer.waiters.waiting.borrow_mut().remove(&self.id);
        if self.cancel_on_drop {
            // Unbounded and local: fails only when the forwarding task is gone (shutdown).
            let _ = self.peer.cancels.try_send(self.id);
        }
    }
}

/// Takes one owner's answers to their waiters until the owner closes the channel.
async fn take_answers<Rep: Send + 'static>(
    answers: ConnectedReceiver<Answer<Rep>>,
    waiters: Rc<Waiters<Rep>>,
) {
    while let Some(Answer { id, reply }) = answers.recv().await {
        waiters.answer(id, reply);
    }
    waiters.owner_gone();
}

/// Sends `Cancel`s for abandoned calls, behind the calls already queued to the owner.
async fn forward_cancels<Req: Send + 'static>(
    pending: LocalReceiver<u64>,
    calls: Rc<ConnectedSender<ToOwner<Req>>>,
) {
    while let Some(id) = pending.recv().await {
        if calls.send(ToOwner::Cancel { id }).await.is_err() {
            return;
        }
    }
}

/// The serving side of one router on its shard (see [`serve`]).
pub struct Serving {
    leaving: Rc<ShutdownSignal>,
    /// Serving tasks still alive: one per peer stream and one per call being served.
    live: Rc<Cell<usize>>,
}

impl Serving {
    /// Stops serving, for a shard about to leave: the calls being served are dropped and every
    /// asker's calls to this shard answer `unavailable()` (the answer channels close). Returns
    /// once every serving task has ended. An executor that leaves does not drop its pending
    /// tasks (glommio 0.9), so without this an asker would wait on them forever.
    pub async fn stop(&self) {
        self.leaving.fire();
        while self.live.get() > 0 {
            glommio::timer::sleep(STOP_POLL).await;
        }
    }
}

/// How often [`Serving::stop`] looks whether the serving tasks have ended.
const STOP_POLL: Duration = Duration::from_millis(1);

/// Counts a live serving task until dropped.
struct Live(Rc<Cell<usize>>);

impl Live {
    fn new(live: &Rc<Cell<usize>>) -> Self {
        live.set(live.get() + 1);
        Live(live.clone())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Serves the calls other shards send through `inbox`, each in its own task, at most `permits`
/// at once (shared by all peers), until the peers close their streams or [`Serving::stop`].
pub fn serve<Req, Rep, S>(inbox: Inbox<Req, Rep>, service: Rc<S>, permits: Rc<Semaphore>) -> Serving
where
    Req: Send + 'static,
    Rep: Send + 'static,
    S: Service<Req, Reply = Rep> + 'static,
{
    let serving = Serving {
        leaving: Rc::default(),
        live: Rc::default(),
    };
    for (calls, answers) in inbox {
        let peer = ServedPeer {
            answers: Rc::new(answers),
            service: service.clone(),
            permits: permits.clone(),
            running: Rc::default(),
            live: serving.live.clone(),
        };
        let live = Live::new(&serving.live);
        let leaving = serving.leaving.clone();
        glommio::spawn_local(async move {
            serve_peer(calls, &peer, &leaving).await;
            // Dropping the handles cancels every call still being served.
            let running = std::mem::take(&mut *peer.running.borrow_mut());
            drop(running);
            drop(live);
        })
        .detach();
    }
    serving
}

/// A call being served: dropping `_cancel` drops the call; `abandonable` if a `Cancel` may.
struct Running {
    _cancel: oneshot::Sender<()>,
    abandonable: bool,
}

/// What serving one peer's calls shares between its tasks.
struct ServedPeer<Rep: Send, S> {
    answers: Rc<ConnectedSender<Answer<Rep>>>,
    service: Rc<S>,
    permits: Rc<Semaphore>,
    /// The calls being served, by id.
    running: Rc<RefCell<HashMap<u64, Running>>>,
    live: Rc<Cell<usize>>,
}

/// Serves one peer's calls until the peer closes the stream or the shard leaves. A `Cancel`
/// waits behind the calls before it, also while permits are exhausted; an abandoned long poll
/// then ends at its own deadline at the latest.
async fn serve_peer<Req, Rep, S>(
    calls: ConnectedReceiver<ToOwner<Req>>,
    peer: &ServedPeer<Rep, S>,
    leaving: &ShutdownSignal,
) where
    Req: Send + 'static,
    Rep: Send + 'static,
    S: Service<Req, Reply = Rep> + 'static,
{
    let leaving = std::pin::pin!(leaving.wait());
    let mut leaving = leaving;
    loop {
        let message = match select(std::pin::pin!(calls.recv()), &mut leaving).await {
            Either::Left((Some(message), _)) => message,
            Either::Left((None, _)) | Either::Right(_) => return,
        };
        let (id, request) = match message {
            ToOwner::Call { id, request } => (id, request),
            ToOwner::Cancel { id } => {
                // An unknown id was answered already.
                let mut running = peer.running.borrow_mut();
                if running.get(&id).is_some_and(|r| r.abandonable) {
                    running.remove(&id); // drops the call
                }
                continue;
            }
        };
        let permit = std::pin::pin!(peer.permits.acquire_static_permit(1));
        let permit = match select(permit, &mut leaving).await {
            Either::Left((Ok(permit), _)) => permit,
            Either::Left((Err(_), _)) | Either::Right(_) => return,
        };
        let (cancel, cancelled) = oneshot::channel();
        let abandonable = S::abandon_unheard(&request);
        let previous = (peer.running.borrow_mut()).insert(
            id,
            Running {
                _cancel: cancel,
                abandonable,
            },
        );
        debug_assert!(previous.is_none(), "call ids are unique per asker");
        let live = Live::new(&peer.live);
        let (service, answers, running) = (
            peer.service.clone(),
            peer.answers.clone(),
            peer.running.clone(),
        );
        glommio::spawn_local(async move {
            let serve = async {
                let reply = serve_caught(&*service, request).await;
                // Fails only when the asker is gone.
                let _ = answers.send(Answer { id, reply }).await;
            };
            let _ = select(std::pin::pin!(serve), cancelled).await;
            running.borrow_mut().remove(&id);
            drop((permit, answers, live));
        })
        .detach();
    }
}

/// Serves one call from another shard; a panic is caught and logged here (this shard goes
/// on: see `crate::panic_guard` for why that is sound) and answered [`Panicked`].
async fn serve_caught<Req, S: Service<Req>>(
    service: &S,
    request: Req,
) -> Result<S::Reply, Panicked> {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(service.serve(request))
        .catch_unwind()
        .await
    {
        Ok(reply) => Ok(reply),
        Err(panic) => {
            let message = crate::panic_guard::message(&*panic);
            tracing::error!(
                panic = message,
                "serving another shard's call panicked; answered as a panic"
            );
            Err(Panicked)
        }
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
