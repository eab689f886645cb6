//! The controller listener's security: PLAINTEXT (Kafka's default for a controller listener
//! not in `listener.security.protocol.map`) or SSL, read with that listener's `ssl.*`
//! properties (`listener.name.<controller>.ssl.*`, else broker-wide) as Kafka reads them. Voters
//! serve it and every node (voters to each other, brokers to the quorum) connects with it;
//! `ssl.client.auth=required` makes the quorum take only peers holding a certificate its trust
//! store signs. SASL on the controller listener is not served: the start stops.

use std::sync::Arc;

use rustls::{ClientConfig, ServerConfig};

use super::{bad, BadSetting, SecurityProtocol};

/// The TLS settings of a controller listener mapped to SSL.
#[derive(Debug, Clone)]
pub struct ControllerTls {
    /// What the controller listener serves with (on voters).
    pub server: Arc<ServerConfig>,
    /// What this node connects to controllers with.
    pub client: Arc<ClientConfig>,
    /// Whether controllers ask for a client certificate and refuse a connection without one.
    pub clients_authenticated: bool,
}

/// The settings of the controller listener `name` over `protocol` (`None`: plaintext);
/// `get(property)` reads its `listener.name.<name>.<property>`, else the broker-wide one.
pub fn resolve(
    name: &str,
    protocol: SecurityProtocol,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ControllerTls>, BadSetting> {
    match protocol {
        SecurityProtocol::Plaintext => Ok(None),
        SecurityProtocol::Ssl => {
            let server = super::tls::resolve(name, get)?;
            let client = super::peer_client::tls_client(name, get)?;
            let auth = get("ssl.client.auth").unwrap_or_default();
            Ok(Some(ControllerTls {
                server: server.config.current(),
                client: Arc::new(client),
                clients_authenticated: auth.trim().eq_ignore_ascii_case("required"),
            }))
        }
        other => Err(bad(
            "listener.security.protocol.map",
            &format!("{name}:{}", other.name()),
            "the controller listener serves PLAINTEXT or SSL (with ssl.client.auth=required, \
             certificates authenticate voters and brokers)",
        )),
    }
}
