//! [`Router`]: one way for every kind of cross-shard request (partitions, consumer groups, and
//! whatever else is owned by one shard) to reach the shard that owns it, and [`serve`] for the
//! owner's side.
//!
//! ```text
//! asking shard                                   owning shard
//! Router::call(owner, local, request)
//!   owner == this shard ── local.serve(request) ─┐
//!   otherwise ── Envelope ── channel mesh ──────▶ serve(): one task per request, at most
//!                                                  `permits` at once ── service.serve(request)
//!   ◀────────────── oneshot reply (wakes the asking task on its own shard) ──┘
//! ```
//! Each request carries its own oneshot, so many are in flight at once. The owner serves each in
//! its own task (a long poll or a JoinGroup must not block the stream), bounded by a permit
//! count per shard: when it is exhausted the owner stops reading and senders wait on the bounded
//! channel (back-pressure instead of unbounded memory). A request the service marks
//! [`Service::abandon_unheard`] is dropped as soon as its asker stops listening.

use std::rc::Rc;

use futures::channel::oneshot;
use futures::future::{select, Either};
use glommio::channels::shared_channel::{ConnectedReceiver, ConnectedSender};
use glommio::sync::Semaphore;

use super::mesh::Links;

/// Cross-shard requests one shard serves concurrently, per router.
pub const REMOTE_REQUESTS_MAX: u64 = 4096;

/// A request on its way to the owning shard, and where its answer goes.
#[derive(Debug)]
pub struct Envelope<Req, Rep> {
    /// What to do.
    pub request: Req,
    /// Completed on the owning shard; wakes the asking task on its own shard.
    pub reply: oneshot::Sender<Rep>,
}

/// The receivers of other shards' requests of one kind, on the shard that serves them.
pub type Inbox<Req, Rep> = Vec<ConnectedReceiver<Envelope<Req, Rep>>>;

/// What the owning shard runs for a request.
#[allow(async_fn_in_trait)] // !Send futures are intended: thread-per-core.
pub trait Service<Req> {
    /// The answer.
    type Reply;
    /// Serves one request on this (the owning) shard.
    async fn serve(&self, request: Req) -> Self::Reply;
    /// Whether a remote request may be dropped once its asker stops waiting (a long poll whose
    /// fetch already answered); other requests always run to completion once received.
    fn abandon_unheard(_request: &Req) -> bool {
        false
    }
}

/// Routes requests of one kind from this shard to the shard that owns each.
pub struct Router<Req: Send, Rep: Send> {
    shard: usize,
    /// `senders[to]`; empty with one shard.
    senders: Vec<Option<ConnectedSender<Envelope<Req, Rep>>>>,
}

impl<Req: Send + 'static, Rep: Send + 'static> Router<Req, Rep> {
    /// The router of a broker with one shard: everything is local.
    pub fn single() -> Self {
        Router {
            shard: 0,
            senders: Vec::new(),
        }
    }

    /// The router over this shard's connected mesh links; returns the receivers to [`serve`].
    pub fn over(links: Links<Envelope<Req, Rep>>) -> (Self, Inbox<Req, Rep>) {
        let receivers = links.receivers.into_iter().map(|(_, r)| r).collect();
        let router = Router {
            shard: links.shard,
            senders: links.senders,
        };
        (router, receivers)
    }

    /// This shard's index.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// Every other shard's index.
    pub fn peers(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.senders.len()).filter(move |s| *s != self.shard)
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
        let Some(Some(sender)) = self.senders.get(owner) else {
            unreachable!("shard {owner} is not in the mesh of shard {}", self.shard)
        };
        let (reply, answer) = oneshot::channel();
        if sender.send(Envelope { request, reply }).await.is_err() {
            return unavailable();
        }
        answer.await.unwrap_or_else(|_| unavailable())
    }
}

/// Serves the requests other shards send through `receivers`, each in its own task, at most
/// `permits` at once (shared by all receivers). Runs until every sender closes.
pub fn serve<Req, Rep, S>(receivers: Inbox<Req, Rep>, service: Rc<S>, permits: Rc<Semaphore>)
where
    Req: Send + 'static,
    Rep: Send + 'static,
    S: Service<Req, Reply = Rep> + 'static,
{
    for receiver in receivers {
        let (service, permits) = (service.clone(), permits.clone());
        glommio::spawn_local(serve_peer(receiver, service, permits)).detach();
    }
}

/// Serves one peer's stream until the peer closes it.
async fn serve_peer<Req, Rep, S>(
    receiver: ConnectedReceiver<Envelope<Req, Rep>>,
    service: Rc<S>,
    permits: Rc<Semaphore>,
) where
    Req: Send + 'static,
    Rep: Send + 'static,
    S: Service<Req, Reply = Rep> + 'static,
{
    while let Some(envelope) = receiver.recv().await {
        let Ok(permit) = permits.acquire_static_permit(1).await else {
            break;
        };
        let service = service.clone();
        glommio::spawn_local(async move {
            serve_one(&*service, envelope).await;
            drop(permit);
        })
        .detach();
    }
}

/// Serves one request and sends the answer, unless the asker stopped listening first to a
/// request the service lets go.
async fn serve_one<Req, Rep, S: Service<Req, Reply = Rep>>(
    service: &S,
    envelope: Envelope<Req, Rep>,
) {
    let Envelope { request, mut reply } = envelope;
    let abandonable = S::abandon_unheard(&request);
    let call = service.serve(request);
    let answer = if abandonable {
        let cancelled = reply.cancellation();
        futures::pin_mut!(call, cancelled);
        match select(call, cancelled).await {
            Either::Left((answer, _)) => Some(answer),
            Either::Right(_) => None,
        }
    } else {
        Some(call.await)
    };
    if let Some(answer) = answer {
        let _ = reply.send(answer);
    }
}
