//! [`Service`]: what a shard that owns something (partitions, groups, transactional ids) runs
//! for each request the router brings it. The owners implement it; the router
//! ([`super::router`]) only carries requests to them.

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
