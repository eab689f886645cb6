//! One connection's security state, handed to every handler with its request
//! (`crate::handler::RequestContext::session`): the listener it arrived on, and its peer.

use std::net::SocketAddr;
use std::sync::Arc;

use super::listeners::Listener;
use super::SecurityProtocol;

/// What a connection is, as far as security goes.
#[derive(Debug)]
pub struct Session {
    /// The listener it arrived on.
    pub listener: Arc<Listener>,
    /// Its peer's address, if the socket still knew it.
    pub peer: Option<SocketAddr>,
    /// Who it proved to be (Kafka's `User:` principal name): its client certificate's subject
    /// mapped by `ssl.principal.mapping.rules`, else [`super::principal::ANONYMOUS`].
    pub principal: String,
}

impl Session {
    /// A connection accepted on `listener` from `peer`.
    pub fn new(listener: Arc<Listener>, peer: Option<SocketAddr>) -> Self {
        Session {
            listener,
            peer,
            principal: super::principal::ANONYMOUS.to_string(),
        }
    }

    /// A connection on the default listener (PLAINTEXT 127.0.0.1:9092, also inter-broker):
    /// what in-process callers without a socket (tests, fuzz targets) serve requests as.
    pub fn plaintext_default() -> Self {
        let listener = Listener {
            name: "PLAINTEXT".to_string(),
            protocol: SecurityProtocol::Plaintext,
            bind: SocketAddr::from(([127, 0, 0, 1], 9092)),
            advertise_host: "127.0.0.1".to_string(),
            advertise_port: 9092,
            inter_broker: true,
            tls: None,
        };
        Session::new(Arc::new(listener), None)
    }
}
