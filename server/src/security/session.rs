//! One connection's security state, handed to every handler with its request
//! (`crate::handler::RequestContext::session`): the listener it arrived on, its peer, who it
//! proved to be, and on a SASL listener where its exchange is.
//!
//! The connection's requests run as tasks of one shard thread, so the mutable parts are
//! `RefCell`s, each borrowed for one statement and never across an `.await`.

use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use rill_protocol::kafka_protocol::messages::ApiKey;

use super::listeners::Listener;
use super::sasl::{Reauth, SaslState};
use super::SecurityProtocol;
use crate::request_order::RequestOrder;

/// What a connection is, as far as security goes.
#[derive(Debug)]
pub struct Session {
    /// The listener it arrived on.
    pub listener: Arc<Listener>,
    /// Its peer's address, if the socket still knew it.
    pub peer: Option<SocketAddr>,
    /// Who it proved to be (Kafka's `User:` principal name): its SASL user once authenticated,
    /// else its client certificate's subject mapped by `ssl.principal.mapping.rules`, else
    /// [`super::principal::ANONYMOUS`].
    principal: RefCell<String>,
    /// Its SASL exchange (SASL listeners only).
    sasl: RefCell<SaslState>,
    /// Its authentication's mechanism, expiry and re-authentication (KIP-368).
    reauth: RefCell<Reauth>,
    /// The order of its transactional Produce requests, which their verified appends keep
    /// (`handler/produce_txn.rs`).
    pub produce_order: RequestOrder,
    /// Until when it is throttled (a client quota exceeded): its connection reads and serves
    /// nothing more before then (Kafka mutes the channel, KIP-219).
    muted_until: Cell<Option<Instant>>,
    /// A client quota applies to its Produce or Fetch requests: those are then served one at a
    /// time, as Kafka serves every channel, so that a throttle stops the next one.
    quota_limited: Cell<bool>,
    /// Its Produce and Fetch requests received and not yet answered.
    quota_pending: Cell<u32>,
}

impl Session {
    /// A connection accepted on `listener` from `peer`.
    pub fn new(listener: Arc<Listener>, peer: Option<SocketAddr>) -> Self {
        Session {
            listener,
            peer,
            principal: RefCell::new(super::principal::ANONYMOUS.to_string()),
            sasl: RefCell::new(SaslState::default()),
            reauth: RefCell::new(Reauth::default()),
            produce_order: RequestOrder::default(),
            muted_until: Cell::new(None),
            quota_limited: Cell::new(false),
            quota_pending: Cell::new(0),
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
            sasl: None,
        };
        Session::new(Arc::new(listener), None)
    }

    /// A connection on a SASL_PLAINTEXT listener offering PLAIN (user `alice`, password `pw`),
    /// SCRAM-SHA-256 and OAUTHBEARER: what unit tests authenticate on.
    #[cfg(test)]
    pub fn sasl_for_tests() -> Self {
        let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_alice=\"pw\";";
        let get = |p: &str| match p {
            "sasl.enabled.mechanisms" => Some("PLAIN,SCRAM-SHA-256,OAUTHBEARER".to_string()),
            "plain.sasl.jaas.config" => Some(jaas.to_string()),
            _ => None,
        };
        let sasl = super::sasl::resolve("SASL_PLAINTEXT", &get).expect("valid SASL settings");
        let listener = Listener {
            name: "SASL_PLAINTEXT".to_string(),
            protocol: SecurityProtocol::SaslPlaintext,
            bind: SocketAddr::from(([127, 0, 0, 1], 9093)),
            advertise_host: "127.0.0.1".to_string(),
            advertise_port: 9093,
            inter_broker: false,
            tls: None,
            sasl: Some(Arc::new(sasl)),
        };
        Session::new(Arc::new(listener), None)
    }

    /// Its principal's name.
    pub fn principal(&self) -> String {
        self.principal.borrow().clone()
    }

    /// Sets its principal (a client certificate's, or the SASL user's).
    pub fn set_principal(&self, principal: String) {
        *self.principal.borrow_mut() = principal;
    }

    /// Runs `f` on its SASL state (one borrow, nothing awaited inside).
    pub fn with_sasl<T>(&self, f: impl FnOnce(&mut SaslState) -> T) -> T {
        f(&mut self.sasl.borrow_mut())
    }

    /// Throttles it until `until` (or later, if it already is).
    pub fn mute_until(&self, until: Instant) {
        let later = self.muted_until.get().map_or(until, |at| at.max(until));
        self.muted_until.set(Some(later));
    }

    /// Until when it is throttled, if it is at `now`.
    pub fn muted_at(&self, now: Instant) -> Option<Instant> {
        self.muted_until.get().filter(|until| *until > now)
    }

    /// Marks it as one a client quota applies to.
    pub fn set_quota_limited(&self) {
        self.quota_limited.set(true);
    }

    /// Whether a client quota applies to it.
    pub fn quota_limited(&self) -> bool {
        self.quota_limited.get()
    }

    /// A Produce or Fetch of it was received (`true`) or answered (`false`).
    pub fn quota_request(&self, received: bool) {
        let n = self.quota_pending.get();
        self.quota_pending
            .set(if received { n + 1 } else { n.saturating_sub(1) });
    }

    /// Its Produce and Fetch requests not yet answered.
    pub fn quota_pending(&self) -> u32 {
        self.quota_pending.get()
    }

    /// Runs `f` on its re-authentication state (borrowed for that call only).
    pub fn with_reauth<T>(&self, f: impl FnOnce(&mut Reauth) -> T) -> T {
        f(&mut self.reauth.borrow_mut())
    }

    /// Whether its authentication expired by `now` (`connections.max.reauth.ms`) and it has
    /// not authenticated again: then only a re-authentication is served, as Kafka's broker
    /// closes such a connection on any other request.
    pub fn authentication_expired(&self, now: Instant) -> bool {
        self.reauth.borrow().expires.is_some_and(|at| now >= at)
    }

    /// Whether it must still authenticate: a SASL listener's connection whose exchange is not
    /// complete.
    pub fn unauthenticated(&self) -> bool {
        self.listener.protocol.sasl() && !matches!(*self.sasl.borrow(), SaslState::Complete)
    }

    /// The largest frame it may send now: `max`, or before a SASL connection authenticates
    /// also at most Kafka's `sasl.server.max.receive.size` default
    /// ([`rill_types::limits::SASL_RECEIVE_BYTES_MAX`]); a larger one closes it.
    pub fn frame_bytes_max(&self, max: usize) -> usize {
        match self.unauthenticated() {
            true => max.min(rill_types::limits::SASL_RECEIVE_BYTES_MAX),
            false => max,
        }
    }

    /// Whether a request of `api` may be served now. Before a SASL connection authenticates,
    /// Kafka takes ApiVersions and SaslHandshake, then SaslAuthenticate once a mechanism is
    /// chosen, and closes the connection on anything else.
    pub fn admits(&self, api: Option<ApiKey>) -> bool {
        if !self.listener.protocol.sasl() {
            return true;
        }
        matches!(
            (&*self.sasl.borrow(), api),
            (SaslState::Complete, _)
                | (
                    SaslState::Handshake,
                    Some(ApiKey::ApiVersions | ApiKey::SaslHandshake)
                )
                | (
                    SaslState::Authenticate(_)
                        | SaslState::ScramFinal(_)
                        | SaslState::OAuthChallenged(_),
                    Some(ApiKey::SaslAuthenticate)
                )
        )
    }
}
