//! Who a connection is and what it arrived on: listeners with Kafka's security protocols
//! ([`listeners`]) and the per-connection [`session::Session`] the handlers are handed. What is
//! protected and what is not: `SECURITY.md`.

pub mod controller_tls;
pub mod jaas;
pub mod listeners;
pub mod oauthbearer;
pub mod peer_client;
pub mod principal;
pub mod sasl;
pub mod scram;
pub mod scram_client;
pub mod session;
pub mod tls;
pub mod tls_reload;

/// A listener's security protocol (`listener.security.protocol.map`), by Kafka's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// No TLS, no SASL.
    Plaintext,
    /// TLS (a client certificate when `ssl.client.auth` asks for one).
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, as Kafka names them.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// The protocol Kafka calls `name` (case-insensitive).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Kafka's name of it.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether its connections speak TLS.
    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether its connections authenticate with SASL.
    pub fn sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// A security setting that cannot be used, named by its property (`crate::config` turns it
/// into its `ConfigError::BadValue`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad value {value:?} for {key}: {reason}")]
pub struct BadSetting {
    /// The property.
    pub key: String,
    /// Its value as given.
    pub value: String,
    /// Why it cannot be used.
    pub reason: String,
}

/// A [`BadSetting`].
pub fn bad(key: &str, value: &str, reason: impl Into<String>) -> BadSetting {
    BadSetting {
        key: key.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}
