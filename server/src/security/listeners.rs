//! Kafka's listener properties, resolved into the listeners this broker serves:
//!
//! | property                          | what it says                                          | default |
//! |-----------------------------------|-------------------------------------------------------|---------|
//! | `listeners`                       | `NAME://host:port,...` (an empty host binds every interface) | `PLAINTEXT://127.0.0.1:9092` |
//! | `advertised.listeners`            | what Metadata tells clients, by listener name          | each listener's own address |
//! | `listener.security.protocol.map`  | `NAME:PROTOCOL,...`                                    | each protocol's name maps to itself; controller listeners to PLAINTEXT |
//! | `inter.broker.listener.name`      | the listener brokers reach each other on               | the one named by `security.inter.broker.protocol` |
//! | `security.inter.broker.protocol`  | (or) its protocol, the listener of that name           | PLAINTEXT |
//! | `listener.name.<name>.<property>` | `<property>` for that listener only (lower-case name)  | the broker-wide `<property>` |
//!
//! As Kafka, the start stops with an error naming the property on: a listener name without a
//! protocol, two listeners with one name or one port, both inter-broker properties set, an
//! inter-broker listener that is not among `listeners`, an unknown protocol name.
//! Controller listeners (`controller.listener.names`) belong to the quorum
//! (`crate::config::cluster`) and are not served here.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

use super::{bad, BadSetting, SecurityProtocol};

/// Kafka's default `security.inter.broker.protocol`.
pub const INTER_BROKER_PROTOCOL_DEFAULT: SecurityProtocol = SecurityProtocol::Plaintext;

/// One listener clients (and brokers) connect to.
#[derive(Debug, Clone)]
pub struct Listener {
    /// Its name, upper-case (`PLAINTEXT`, `SASL_SSL`, `REPLICATION`, ...).
    pub name: String,
    /// Its security protocol.
    pub protocol: SecurityProtocol,
    /// The address every shard binds (SO_REUSEPORT).
    pub bind: SocketAddr,
    /// The host Metadata gives for it.
    pub advertise_host: String,
    /// The port Metadata gives for it.
    pub advertise_port: u16,
    /// Whether it is the inter-broker listener (the only one replica Fetches are taken on).
    pub inter_broker: bool,
    /// Its TLS settings (SSL and SASL_SSL listeners).
    pub tls: Option<Arc<super::tls::TlsListener>>,
    /// Its SASL settings (SASL_PLAINTEXT and SASL_SSL listeners).
    pub sasl: Option<Arc<super::sasl::SaslListener>>,
}

/// Every listener this broker serves, the first client listener first.
#[derive(Debug, Clone)]
pub struct Listeners {
    /// In `listeners` order, controller listeners left out.
    pub all: Vec<Arc<Listener>>,
    /// How this broker reaches the other brokers' inter-broker listener.
    pub peer_client: Arc<super::peer_client::PeerClient>,
    /// The controller listener's TLS (the first of `controller.listener.names`, mapped to SSL).
    pub controller_tls: Option<Arc<super::controller_tls::ControllerTls>>,
}

impl Listeners {
    /// One PLAINTEXT listener on `bind`, advertised as `host:port`, that is also the
    /// inter-broker listener (the defaults, and what a config without `listeners` gets).
    pub fn plaintext(bind: SocketAddr, host: &str, port: u16) -> Self {
        Listeners {
            all: vec![Arc::new(Listener {
                name: "PLAINTEXT".to_string(),
                protocol: SecurityProtocol::Plaintext,
                bind,
                advertise_host: host.to_string(),
                advertise_port: port,
                inter_broker: true,
                tls: None,
                sasl: None,
            })],
            peer_client: Arc::new(super::peer_client::PeerClient::plaintext()),
            controller_tls: None,
        }
    }

    /// The inter-broker listener.
    pub fn inter_broker(&self) -> &Arc<Listener> {
        self.all
            .iter()
            .find(|l| l.inter_broker)
            .expect("resolved with an inter-broker listener")
    }

    /// The listener named `name` (upper-case).
    pub fn named(&self, name: &str) -> Option<&Arc<Listener>> {
        self.all.iter().find(|l| l.name == name)
    }
}

/// The security properties as given (file first, flags over it), resolved once both are read.
#[derive(Debug, Clone, Default)]
pub struct SecuritySettings {
    /// `listeners` as given.
    listeners: Option<String>,
    /// `advertised.listeners` as given.
    advertised: Option<String>,
    /// Every other security property, by its full name (`listener.name.*` included).
    props: BTreeMap<String, String>,
}

/// Properties read per listener (`listener.name.<name>.<property>` or broker-wide).
const PER_LISTENER: &[&str] = &[
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.certificates",
    "ssl.client.auth",
    "ssl.principal.mapping.rules",
    "ssl.enabled.protocols",
    super::peer_client::ENDPOINT_IDENTIFICATION,
    "sasl.enabled.mechanisms",
    super::sasl::REAUTH_MAX_MS,
    "plain.sasl.jaas.config",
    "scram-sha-256.sasl.jaas.config",
    "scram-sha-512.sasl.jaas.config",
    "oauthbearer.sasl.jaas.config",
    // Read to refuse a validator Rill does not run (`super::sasl`).
    "oauthbearer.sasl.server.callback.handler.class",
    "sasl.server.callback.handler.class",
];

/// Broker-wide properties this module reads.
const BROKER_WIDE: &[&str] = &[
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    super::peer_client::INTER_BROKER_MECHANISM,
];

impl SecuritySettings {
    /// Keeps `listeners` as given (its client entry is resolved by `crate::config` too).
    pub fn set_listeners(&mut self, v: &str) {
        self.listeners = Some(v.trim().to_string());
    }

    /// Keeps `advertised.listeners` as given.
    pub fn set_advertised(&mut self, v: &str) {
        self.advertised = Some(v.trim().to_string());
    }

    /// Takes a security property; `false` if `key` is not one.
    pub fn apply_property(&mut self, key: &str, v: &str) -> bool {
        let per_listener = key
            .strip_prefix("listener.name.")
            .and_then(|rest| rest.split_once('.'))
            .is_some_and(|(_, prop)| PER_LISTENER.contains(&prop));
        if !(per_listener || BROKER_WIDE.contains(&key) || PER_LISTENER.contains(&key)) {
            return false;
        }
        self.props.insert(key.to_string(), v.trim().to_string());
        true
    }

    /// `property` for the listener `name`: its `listener.name.<name>.<property>`, else the
    /// broker-wide one.
    pub fn get(&self, name: &str, property: &str) -> Option<&str> {
        let own = format!("listener.name.{}.{property}", name.to_ascii_lowercase());
        self.props
            .get(&own)
            .or_else(|| self.props.get(property))
            .map(String::as_str)
    }

    /// The listeners to serve. `first`: the first client listener's bind address and
    /// advertised host and port as `crate::config` resolved them (flags over the file);
    /// `controller_names`: `controller.listener.names`.
    pub fn resolve(
        &self,
        first: (SocketAddr, &str, u16),
        controller_names: &[String],
    ) -> Result<Listeners, BadSetting> {
        let map = self.protocol_map(controller_names)?;
        let Some(text) = &self.listeners else {
            let mut listeners = Listeners::plaintext(first.0, first.1, first.2);
            self.mark_inter_broker(&mut listeners, "PLAINTEXT")?;
            return Ok(listeners);
        };
        let advertised = match &self.advertised {
            Some(a) => parse_listeners("advertised.listeners", a)?,
            None => Vec::new(),
        };
        let entries = parse_listeners("listeners", text)?;
        let mut all: Vec<Arc<Listener>> = Vec::new();
        for (name, address) in entries {
            if controller_names.contains(&name) {
                continue;
            }
            let Some(&protocol) = map.get(&name) else {
                return Err(bad(
                    "listener.security.protocol.map",
                    self.props
                        .get("listener.security.protocol.map")
                        .map_or("", String::as_str),
                    format!("no security protocol defined for listener {name}"),
                ));
            };
            let (bind, host, port) = if all.is_empty() {
                (first.0, first.1.to_string(), first.2)
            } else {
                let bind = bind_address("listeners", &address)?;
                let (host, port) = match advertised.iter().find(|(n, _)| *n == name) {
                    Some((_, a)) => host_port("advertised.listeners", a)?,
                    None => (bind.ip().to_string(), bind.port()),
                };
                (bind, host, port)
            };
            if all.iter().any(|l| l.name == name) {
                return Err(bad(
                    "listeners",
                    text,
                    format!("listener {name} given twice"),
                ));
            }
            if bind.port() != 0 && all.iter().any(|l| l.bind.port() == bind.port()) {
                return Err(bad(
                    "listeners",
                    text,
                    format!("each listener must have a different port ({name})"),
                ));
            }
            let (tls, sasl) = self.security_of(&name, protocol)?;
            all.push(Arc::new(Listener {
                name,
                protocol,
                bind,
                advertise_host: host,
                advertise_port: port,
                inter_broker: false,
                tls,
                sasl,
            }));
        }
        let controller_tls = self.controller_tls(controller_names, &map)?;
        let mut listeners = Listeners {
            all,
            peer_client: Arc::new(super::peer_client::PeerClient::plaintext()),
            controller_tls,
        };
        let inter_broker = self.inter_broker_name()?;
        self.mark_inter_broker(&mut listeners, &inter_broker)?;
        Ok(listeners)
    }

    /// The TLS settings (SSL, SASL_SSL) and SASL settings (SASL_*) of listener `name`.
    #[allow(clippy::type_complexity)] // two optional settings, named by their types
    fn security_of(
        &self,
        name: &str,
        protocol: SecurityProtocol,
    ) -> Result<
        (
            Option<Arc<super::tls::TlsListener>>,
            Option<Arc<super::sasl::SaslListener>>,
        ),
        BadSetting,
    > {
        let get = |p: &str| self.get(name, p).map(str::to_string);
        let tls = match protocol.tls() {
            true => Some(Arc::new(super::tls::resolve(name, &get)?)),
            false => None,
        };
        let sasl = match protocol.sasl() {
            true => Some(Arc::new(super::sasl::resolve(name, &get)?)),
            false => None,
        };
        Ok((tls, sasl))
    }

    /// The TLS of the first controller listener (the one brokers reach the quorum on).
    fn controller_tls(
        &self,
        controller_names: &[String],
        map: &BTreeMap<String, SecurityProtocol>,
    ) -> Result<Option<Arc<super::controller_tls::ControllerTls>>, BadSetting> {
        let Some(name) = controller_names.first() else {
            return Ok(None);
        };
        let protocol = map
            .get(name)
            .copied()
            .unwrap_or(SecurityProtocol::Plaintext);
        let get = |p: &str| self.get(name, p).map(str::to_string);
        Ok(super::controller_tls::resolve(name, protocol, &get)?.map(Arc::new))
    }

    /// `listener.security.protocol.map`, or Kafka's default (each protocol's own name), with
    /// controller listeners PLAINTEXT unless mapped.
    fn protocol_map(
        &self,
        controller_names: &[String],
    ) -> Result<BTreeMap<String, SecurityProtocol>, BadSetting> {
        let key = "listener.security.protocol.map";
        let mut map = BTreeMap::new();
        match self.props.get(key) {
            Some(text) => {
                for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                    let (name, protocol) = entry
                        .split_once(':')
                        .ok_or_else(|| bad(key, text, format!("{entry:?} is not NAME:PROTOCOL")))?;
                    let protocol = SecurityProtocol::parse(protocol).ok_or_else(|| {
                        bad(key, text, format!("{protocol:?} is no security protocol"))
                    })?;
                    let name = name.trim().to_ascii_uppercase();
                    if map.insert(name.clone(), protocol).is_some() {
                        return Err(bad(key, text, format!("{name} is mapped twice")));
                    }
                }
            }
            None => {
                for p in SecurityProtocol::ALL {
                    map.insert(p.name().to_string(), p);
                }
            }
        }
        for name in controller_names {
            map.entry(name.clone())
                .or_insert(SecurityProtocol::Plaintext);
        }
        Ok(map)
    }

    /// `inter.broker.listener.name`, or the listener named after
    /// `security.inter.broker.protocol` (PLAINTEXT by default); never both.
    fn inter_broker_name(&self) -> Result<String, BadSetting> {
        let by_name = self.props.get("inter.broker.listener.name");
        let by_protocol = self.props.get("security.inter.broker.protocol");
        match (by_name, by_protocol) {
            (Some(name), Some(_)) => Err(bad(
                "inter.broker.listener.name",
                name,
                "only one of inter.broker.listener.name and security.inter.broker.protocol \
                 may be set",
            )),
            (Some(name), None) => Ok(name.trim().to_ascii_uppercase()),
            (None, Some(protocol)) => SecurityProtocol::parse(protocol)
                .map(|p| p.name().to_string())
                .ok_or_else(|| {
                    bad(
                        "security.inter.broker.protocol",
                        protocol,
                        "is no security protocol",
                    )
                }),
            (None, None) => Ok(INTER_BROKER_PROTOCOL_DEFAULT.name().to_string()),
        }
    }

    fn mark_inter_broker(&self, listeners: &mut Listeners, name: &str) -> Result<(), BadSetting> {
        let Some(found) = listeners.all.iter_mut().find(|l| l.name == name) else {
            let key = if self.props.contains_key("inter.broker.listener.name") {
                "inter.broker.listener.name"
            } else {
                "security.inter.broker.protocol"
            };
            return Err(bad(
                key,
                name,
                "the inter-broker listener must be one of the listeners",
            ));
        };
        let mut listener = (**found).clone();
        let enabled = listener
            .sasl
            .as_ref()
            .map_or(&[][..], |s| s.mechanisms.as_slice());
        let get = |p: &str| self.get(name, p).map(str::to_string);
        listeners.peer_client = Arc::new(super::peer_client::resolve(
            name,
            listener.protocol,
            enabled,
            &get,
        )?);
        listener.inter_broker = true;
        *found = Arc::new(listener);
        Ok(())
    }
}

/// `listeners` (or `advertised.listeners`) as (upper-case name, `host:port`) pairs; an entry
/// without `NAME://` is PLAINTEXT.
pub fn parse_listeners(key: &str, text: &str) -> Result<Vec<(String, String)>, BadSetting> {
    let mut listeners = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, address) = match entry.split_once("://") {
            Some((name, address)) => (name.trim().to_ascii_uppercase(), address.trim()),
            None => ("PLAINTEXT".to_string(), entry),
        };
        if name.is_empty() || !address.contains(':') {
            return Err(bad(
                key,
                text,
                format!("entry {entry:?} is not NAME://host:port"),
            ));
        }
        listeners.push((name, address.to_string()));
    }
    Ok(listeners)
}

/// `host:port` split at its last colon, the port parsed and IPv6 brackets dropped (the host may
/// be empty).
fn split_host_port<'a>(key: &str, address: &'a str) -> Result<(&'a str, u16), BadSetting> {
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| bad(key, address, "expected HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .map_err(|e: std::num::ParseIntError| bad(key, address, e.to_string()))?;
    Ok((host.trim_matches(|c| c == '[' || c == ']'), port))
}

/// `host:port` as a bind address (an empty host: every interface, as Kafka binds it).
pub fn bind_address(key: &str, address: &str) -> Result<SocketAddr, BadSetting> {
    let (host, port) = split_host_port(key, address)?;
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| bad(key, address, e.to_string()))?
        .next()
        .ok_or_else(|| bad(key, address, "resolves to no address"))
}

/// `host:port` as given, for advertising.
fn host_port(key: &str, address: &str) -> Result<(String, u16), BadSetting> {
    let (host, port) = split_host_port(key, address)?;
    if host.is_empty() {
        return Err(bad(key, address, "empty host"));
    }
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> SecuritySettings {
        let mut s = SecuritySettings::default();
        for (k, v) in pairs {
            match *k {
                "listeners" => s.set_listeners(v),
                "advertised.listeners" => s.set_advertised(v),
                _ => assert!(s.apply_property(k, v), "{k} not taken"),
            }
        }
        s
    }

    fn first() -> (SocketAddr, &'static str, u16) {
        ("127.0.0.1:9092".parse().unwrap(), "127.0.0.1", 9092)
    }

    #[test]
    fn without_listeners_one_plaintext_listener_is_also_the_inter_broker_one() {
        let l = settings(&[]).resolve(first(), &[]).unwrap();
        assert_eq!(l.all.len(), 1);
        assert_eq!(l.inter_broker().name, "PLAINTEXT");
        assert_eq!(l.all[0].bind, first().0);
    }

    #[test]
    fn names_map_to_protocols_and_the_inter_broker_listener_is_marked() {
        let l = settings(&[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,INTERNAL://:9094,CONTROLLER://127.0.0.1:9093",
            ),
            (
                "advertised.listeners",
                "PLAINTEXT://a:1,INTERNAL://b.example:2",
            ),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            ),
            ("inter.broker.listener.name", "internal"),
        ])
        .resolve(first(), &["CONTROLLER".to_string()])
        .unwrap();
        let names: Vec<_> = l.all.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            ["PLAINTEXT", "INTERNAL"],
            "the controller is the quorum's"
        );
        let internal = l.named("INTERNAL").unwrap();
        assert!(internal.inter_broker && !l.all[0].inter_broker);
        assert_eq!(internal.bind, "0.0.0.0:9094".parse().unwrap());
        assert_eq!(
            (internal.advertise_host.as_str(), internal.advertise_port),
            ("b.example", 2)
        );
        // By protocol: the listener named after it.
        let l = settings(&[
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093",
            ),
            ("security.inter.broker.protocol", "plaintext"),
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
        ])
        .resolve(first(), &[])
        .unwrap();
        let sasl = l.named("SASL_PLAINTEXT").unwrap();
        assert_eq!(sasl.protocol, SecurityProtocol::SaslPlaintext);
        assert_eq!(sasl.sasl.as_ref().unwrap().names(), ["SCRAM-SHA-512"]);
        assert!(l.named("PLAINTEXT").unwrap().sasl.is_none());
        let e = settings(&[("listeners", "SSL://127.0.0.1:9093")])
            .resolve(first(), &[])
            .unwrap_err();
        assert!(e.reason.contains("no key store"), "{e}");
        assert_eq!(l.inter_broker().name, "PLAINTEXT");
    }

    #[test]
    fn kafkas_refusals_name_the_property() {
        let refused = |pairs: &[(&str, &str)]| settings(pairs).resolve(first(), &[]).unwrap_err();
        let e = refused(&[(
            "listeners",
            "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094",
        )]);
        assert_eq!(e.key, "listener.security.protocol.map");
        assert!(e.reason.contains("INTERNAL"), "{e}");
        let e = refused(&[(
            "listeners",
            "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092",
        )]);
        assert!(e.reason.contains("different port"), "{e}");
        let e = refused(&[
            ("listeners", "PLAINTEXT://127.0.0.1:9092"),
            ("inter.broker.listener.name", "PLAINTEXT"),
            ("security.inter.broker.protocol", "PLAINTEXT"),
        ]);
        assert!(e.reason.contains("only one of"), "{e}");
        let e = refused(&[
            ("listeners", "PLAINTEXT://127.0.0.1:9092"),
            ("inter.broker.listener.name", "REPLICATION"),
        ]);
        assert_eq!(e.key, "inter.broker.listener.name");
        let e = refused(&[("listener.security.protocol.map", "PLAINTEXT:TLS")]);
        assert!(e.reason.contains("no security protocol"), "{e}");
        let e = refused(&[(
            "listeners",
            "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093",
        )]);
        assert!(e.reason.contains("twice"), "{e}");
    }

    #[test]
    fn a_listener_override_beats_the_broker_wide_value() {
        let mut s = SecuritySettings::default();
        s.props.insert("ssl.client.auth".into(), "none".into());
        s.props.insert(
            "listener.name.mtls.ssl.client.auth".into(),
            "required".into(),
        );
        assert_eq!(s.get("MTLS", "ssl.client.auth"), Some("required"));
        assert_eq!(s.get("SSL", "ssl.client.auth"), Some("none"));
        assert_eq!(s.get("SSL", "ssl.keystore.type"), None);
    }
}
