//! SASL on SASL_PLAINTEXT and SASL_SSL listeners: the mechanisms a listener offers and the
//! PLAIN users its JAAS line names, read from Kafka's properties:
//!
//! | property | what it says | default |
//! |---|---|---|
//! | `sasl.enabled.mechanisms` (or `listener.name.<l>.sasl.enabled.mechanisms`) | `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER`, comma-separated | Kafka's `GSSAPI`, which Rill does not serve: the start stops |
//! | `listener.name.<l>.plain.sasl.jaas.config` | `org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>="<password>" ...;` | none: a listener with PLAIN enabled and no JAAS line stops the start |
//! | `listener.name.<l>.scram-sha-256.sasl.jaas.config` (and `-512`) | `org.apache.kafka.common.security.scram.ScramLoginModule required;` (optional here) | |
//! | `listener.name.<l>.oauthbearer.sasl.jaas.config` | `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required [unsecuredValidator...=...];` (optional here): the unsecured validator's options ([`super::oauthbearer::ValidatorOptions`]) | |
//! | `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` | only Kafka's unsecured validator is served: another class (a JWKS validator) stops the start | the unsecured validator |
//!
//! SCRAM users are not in the JAAS line: their credentials are made with
//! AlterUserScramCredentials and kept in the metadata (`rill_metadata::scram`).
//!
//! A connection's progress through the exchange is its [`SaslState`], kept in its
//! [`super::session::Session`].

use std::collections::BTreeMap;

use rill_metadata::scram::ScramMechanism;
use subtle::ConstantTimeEq;

use super::oauthbearer::{ValidatorOptions, UNSECURED_VALIDATOR};
use super::{bad, BadSetting};

/// Kafka's class of the PLAIN login module.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// Kafka's class of the SCRAM login module.
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
/// The JAAS option prefix that names a PLAIN user (`user_alice="secret"`).
const PLAIN_USER_PREFIX: &str = "user_";

/// A SASL mechanism Rill serves.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// PLAIN (RFC 4616), users from the JAAS line.
    Plain,
    /// SCRAM-SHA-256 or SCRAM-SHA-512, users from AlterUserScramCredentials.
    Scram(ScramMechanism),
    /// OAUTHBEARER (RFC 7628) with unsecured JWTs (`super::oauthbearer`).
    OAuthBearer,
}

impl Mechanism {
    /// The mechanism named `name` (as a client's SaslHandshake names it: exact case).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "SCRAM-SHA-256" => Some(Mechanism::Scram(ScramMechanism::Sha256)),
            "SCRAM-SHA-512" => Some(Mechanism::Scram(ScramMechanism::Sha512)),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// Kafka's class of its login module (the JAAS line's entry).
    pub fn login_module(self) -> &'static str {
        match self {
            Mechanism::Plain => PLAIN_LOGIN_MODULE,
            Mechanism::Scram(_) => SCRAM_LOGIN_MODULE,
            Mechanism::OAuthBearer => super::oauthbearer::LOGIN_MODULE,
        }
    }
}

/// The PLAIN users of a listener's JAAS line: name → password.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PlainUsers(BTreeMap<String, String>);

impl std::fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

impl PlainUsers {
    /// Whether `user` is named with exactly `password` (compared in constant time, as
    /// Kafka's `Utils.isEqualConstantTime`).
    pub fn verify(&self, user: &str, password: &str) -> bool {
        match self.0.get(user) {
            Some(expected) => bool::from(expected.as_bytes().ct_eq(password.as_bytes())),
            None => false,
        }
    }
}

/// What a SASL listener offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslListener {
    /// `sasl.enabled.mechanisms`, in its order (SaslHandshake lists them so).
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users (empty unless PLAIN is enabled).
    pub plain_users: PlainUsers,
    /// OAUTHBEARER's validator options (Kafka's defaults unless its JAAS line sets them).
    pub oauthbearer: ValidatorOptions,
    /// `connections.max.reauth.ms` (KIP-368): how long an authentication lasts before the
    /// client must authenticate again on its connection; `None` (0, Kafka's default): for ever.
    pub reauth_max: Option<std::time::Duration>,
}

/// The property that bounds an authentication's life (KIP-368).
pub const REAUTH_MAX_MS: &str = "connections.max.reauth.ms";

/// A connection's authentication over time (KIP-368): what it authenticated with, until when,
/// and, during a re-authentication, who it was.
#[derive(Debug, Default, Clone)]
pub struct Reauth {
    /// The mechanism of its last authentication (a re-authentication must use it again).
    pub mechanism: Option<Mechanism>,
    /// When its authentication expires: after that only a re-authentication is served.
    pub expires: Option<std::time::Instant>,
    /// During a re-authentication, the principal it must prove again.
    pub from: Option<String>,
}

impl SaslListener {
    /// The enabled mechanism named `name`.
    pub fn enabled(&self, name: &str) -> Option<Mechanism> {
        Mechanism::parse(name).filter(|m| self.mechanisms.contains(m))
    }

    /// The enabled mechanisms' names.
    pub fn names(&self) -> Vec<&'static str> {
        self.mechanisms.iter().map(|m| m.name()).collect()
    }
}

/// The listener `listener`'s SASL settings; `get(property)` reads its
/// `listener.name.<l>.<property>`, else the broker-wide one.
pub fn resolve(
    listener: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<SaslListener, BadSetting> {
    let mechanisms = enabled_mechanisms(listener, get)?;
    let mut plain_users = PlainUsers::default();
    let mut oauthbearer = ValidatorOptions::default();
    for m in &mechanisms {
        let property = format!("{}.sasl.jaas.config", m.name().to_ascii_lowercase());
        let full = format!("listener.name.{}.{property}", listener.to_ascii_lowercase());
        let class = m.login_module();
        if *m == Mechanism::OAuthBearer {
            unsecured_validator_only(listener, get)?;
        }
        let Some(jaas) = get(&property) else {
            if *m == Mechanism::Plain {
                return Err(bad(
                    &full,
                    "",
                    "PLAIN is enabled but no JAAS configuration names its users",
                ));
            }
            continue;
        };
        let modules = super::jaas::parse(&jaas)
            .map_err(|e| bad(&full, "(hidden)", format!("Invalid JAAS config: {e}")))?;
        let Some(module) = modules.iter().find(|l| l.class == class) else {
            return Err(bad(
                &full,
                "(hidden)",
                format!("no {class} entry for {}", m.name()),
            ));
        };
        if *m == Mechanism::Plain {
            plain_users = PlainUsers(
                module
                    .options
                    .iter()
                    .filter_map(|(k, v)| Some((k.strip_prefix(PLAIN_USER_PREFIX)?, v)))
                    .map(|(k, v)| (k.to_string(), v.clone()))
                    .collect(),
            );
        }
        if *m == Mechanism::OAuthBearer {
            oauthbearer = ValidatorOptions::from_jaas(&module.options)
                .map_err(|e| bad(&full, "(hidden)", e.to_string()))?;
        }
    }
    let reauth_max = reauth_max(get)?;
    Ok(SaslListener {
        mechanisms,
        plain_users,
        oauthbearer,
        reauth_max,
    })
}

/// `sasl.enabled.mechanisms`: each once, in order; one Rill does not serve stops the start.
fn enabled_mechanisms(
    listener: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Mechanism>, BadSetting> {
    let key = "sasl.enabled.mechanisms";
    let text = get(key).unwrap_or_else(|| "GSSAPI".to_string());
    let mut mechanisms = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(m) = Mechanism::parse(name) else {
            return Err(bad(
                key,
                &text,
                format!(
                    "listener {listener}: mechanism {name} is not served (PLAIN, SCRAM-SHA-256, \
                     SCRAM-SHA-512 and OAUTHBEARER are; Kafka's default is GSSAPI)"
                ),
            ));
        };
        if !mechanisms.contains(&m) {
            mechanisms.push(m);
        }
    }
    if mechanisms.is_empty() {
        return Err(bad(
            key,
            &text,
            format!("listener {listener}: no mechanism"),
        ));
    }
    Ok(mechanisms)
}

/// OAUTHBEARER tokens are validated only as Kafka's default does (unsecured JWTs): a listener
/// configured with another validator (a JWKS one) must not start, lest unsigned tokens pass.
fn unsecured_validator_only(
    listener: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<(), BadSetting> {
    for property in [
        "oauthbearer.sasl.server.callback.handler.class",
        "sasl.server.callback.handler.class",
    ] {
        if let Some(class) = get(property).filter(|c| {
            let c = c.trim();
            !c.is_empty() && c != UNSECURED_VALIDATOR
        }) {
            return Err(bad(
                &format!("listener.name.{}.{property}", listener.to_ascii_lowercase()),
                &class,
                "only Kafka's unsecured validator (the default) is served for OAUTHBEARER",
            ));
        }
    }
    Ok(())
}

/// `connections.max.reauth.ms`: `None` when unset or 0 (Kafka's default: never expires).
fn reauth_max(
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<std::time::Duration>, BadSetting> {
    let Some(text) = get(REAUTH_MAX_MS) else {
        return Ok(None);
    };
    match text.trim().parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(ms) => Ok(Some(std::time::Duration::from_millis(ms))),
        Err(e) => Err(bad(REAUTH_MAX_MS, &text, e.to_string())),
    }
}

/// Where a connection of a SASL listener is in its exchange (Kafka's `SaslServerAuthenticator`
/// states).
#[derive(Debug, Default)]
pub enum SaslState {
    /// Nothing yet: ApiVersions or SaslHandshake may come.
    #[default]
    Handshake,
    /// A SaslHandshake chose this mechanism: SaslAuthenticate tokens come.
    Authenticate(Mechanism),
    /// SCRAM sent its server-first message: the client-final one comes.
    ScramFinal(Box<super::scram::AwaitingFinal>),
    /// OAUTHBEARER answered this error challenge: the client's `\x01` comes (then the
    /// authentication fails with it), or another client-first message.
    OAuthChallenged(String),
    /// Done: the principal is the user's, every API may come.
    Complete,
    /// Failed: the connection is being closed.
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn reads_mechanisms_and_plain_users() {
        let jaas = format!(
            "{PLAIN_LOGIN_MODULE} required username=\"a\" password=\"b\" user_alice=\"s3cret\";"
        );
        let p = [
            ("sasl.enabled.mechanisms", "SCRAM-SHA-512, PLAIN"),
            ("plain.sasl.jaas.config", jaas.as_str()),
        ];
        let l = resolve("SASL_SSL", &props(&p)).unwrap();
        assert_eq!(l.names(), ["SCRAM-SHA-512", "PLAIN"]);
        assert!(l.plain_users.verify("alice", "s3cret"));
        assert!(!l.plain_users.verify("alice", "s3cre"));
        assert!(!l.plain_users.verify("bob", ""));
        assert_eq!(l.enabled("PLAIN"), Some(Mechanism::Plain));
        assert_eq!(l.enabled("SCRAM-SHA-256"), None);
        assert!(!format!("{l:?}").contains("s3cret"));
    }

    #[test]
    fn refuses_what_cannot_be_served() {
        let e = resolve("SASL_PLAINTEXT", &props(&[])).unwrap_err();
        assert!(e.reason.contains("GSSAPI"), "{e}");
        let e = resolve(
            "SASL_PLAINTEXT",
            &props(&[("sasl.enabled.mechanisms", "PLAIN")]),
        )
        .unwrap_err();
        assert_eq!(e.key, "listener.name.sasl_plaintext.plain.sasl.jaas.config");
        let p = [
            ("sasl.enabled.mechanisms", "PLAIN"),
            ("plain.sasl.jaas.config", "Other required;"),
        ];
        assert!(resolve("L", &props(&p)).is_err());
        let scram = [("sasl.enabled.mechanisms", "SCRAM-SHA-256")];
        assert!(
            resolve("L", &props(&scram)).is_ok(),
            "SCRAM needs no JAAS line"
        );
    }
}
