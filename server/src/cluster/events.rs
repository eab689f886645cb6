//! The messages the cluster's threads take: what reaches the broker's controller agent
//! ([`AgentEvent`], and where its answer goes, [`Reply`]) and a voter's quorum loop
//! ([`QuorumEvent`]). Below the agent and the loop, so that the cluster view and the transport,
//! which send them, need neither.

use rill_metadata::request::{ControllerRequest, ControllerResponse};
use rill_metadata::types::NodeId;
use rill_metadata::RaftMessage;

use super::transport::Replier;
use crate::channel::polled::oneshot;

/// Where an answer goes.
pub enum Reply {
    /// To a handler, which polls for it (its task's waker never reaches the agent's thread).
    Future(oneshot::Sender<ControllerResponse>),
    /// To a function, run on the agent's thread (must not block).
    Callback(Box<dyn FnOnce(ControllerResponse) + Send>),
}

/// What reaches the agent.
pub enum AgentEvent {
    /// A handler's request.
    Submit {
        /// The request.
        request: ControllerRequest,
        /// Where the answer goes.
        reply: Reply,
    },
    /// An answer read from connection `conn`.
    Response {
        /// Which connection.
        conn: u64,
        /// The request's id.
        id: u64,
        /// The answer.
        response: ControllerResponse,
    },
    /// Connection `conn` broke.
    Closed {
        /// Which connection.
        conn: u64,
    },
}

/// What reaches the quorum loop.
pub enum QuorumEvent {
    /// A raft message from another voter.
    Raft(RaftMessage),
    /// A broker's request.
    Request {
        /// The request.
        request: ControllerRequest,
        /// Where to answer.
        reply: Replier,
    },
    /// A voter could not be reached.
    Unreachable(NodeId),
}
