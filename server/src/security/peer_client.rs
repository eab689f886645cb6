//! How this broker connects, as a client, to the other brokers' inter-broker listener: with that
//! listener's security protocol, as a Kafka broker does (its replica fetchers, transaction
//! markers and AddPartitionsToTxn verifications all go there). Read from Kafka's properties:
//!
//! | property | what it says | default |
//! |---|---|---|
//! | the inter-broker listener's `ssl.truststore.*` | the CAs other brokers' certificates are checked against | none: a TLS inter-broker listener without one stops the start |
//! | its `ssl.keystore.*` | the certificate this broker presents (for `ssl.client.auth=required`) | the listener's own |
//! | `ssl.endpoint.identification.algorithm` (or the listener's) | `https`: the certificate must name the host connected to; empty: it need not | `https` |
//! | `sasl.mechanism.inter.broker.protocol` | `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`, enabled on the listener | Kafka's `GSSAPI`, not served: the start stops |
//! | `listener.name.<l>.<mechanism>.sasl.jaas.config` | its `username` and `password` options | none: the start stops |

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, SignatureScheme};

use super::sasl::Mechanism;
use super::{bad, BadSetting, SecurityProtocol};

/// The property naming the inter-broker SASL mechanism.
pub const INTER_BROKER_MECHANISM: &str = "sasl.mechanism.inter.broker.protocol";
/// The property that turns host name verification of server certificates off (empty).
pub const ENDPOINT_IDENTIFICATION: &str = "ssl.endpoint.identification.algorithm";

/// How to reach another broker's inter-broker listener.
#[derive(Debug, Clone)]
pub struct PeerClient {
    /// The inter-broker listener's security protocol.
    pub protocol: SecurityProtocol,
    /// TLS client settings (SSL and SASL_SSL).
    pub tls: Option<Arc<ClientConfig>>,
    /// Who this broker logs in as (SASL_PLAINTEXT and SASL_SSL).
    pub login: Option<PeerLogin>,
}

/// This broker's SASL login on other brokers.
#[derive(Clone)]
pub struct PeerLogin {
    /// `sasl.mechanism.inter.broker.protocol`.
    pub mechanism: Mechanism,
    /// The JAAS `username`.
    pub username: String,
    /// The JAAS `password`.
    pub password: String,
}

impl std::fmt::Debug for PeerLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl PeerClient {
    /// Plaintext, as without any security property.
    pub fn plaintext() -> Self {
        Self {
            protocol: SecurityProtocol::Plaintext,
            tls: None,
            login: None,
        }
    }
}

/// The client settings for the inter-broker listener `listener` over `protocol`; `get(property)`
/// reads its `listener.name.<l>.<property>`, else the broker-wide one; `enabled` are the SASL
/// mechanisms the listener serves.
pub fn resolve(
    listener: &str,
    protocol: SecurityProtocol,
    enabled: &[Mechanism],
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<PeerClient, BadSetting> {
    let tls = match protocol.tls() {
        true => Some(Arc::new(tls_client(listener, get)?)),
        false => None,
    };
    let login = match protocol.sasl() {
        true => Some(login(listener, enabled, get)?),
        false => None,
    };
    Ok(PeerClient {
        protocol,
        tls,
        login,
    })
}

/// A TLS client configuration from listener `listener`'s trust store (required) and key store
/// (presented as this broker's certificate when given).
pub(super) fn tls_client(
    listener: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<ClientConfig, BadSetting> {
    let Some(roots) = super::tls::truststore(get)? else {
        return Err(bad(
            "ssl.truststore.location",
            "",
            format!(
                "listener {listener} is the inter-broker listener and speaks TLS: brokers \
                 check each other's certificates against its trust store (give \
                 ssl.truststore.location or ssl.truststore.certificates)"
            ),
        ));
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| bad("ssl.truststore.location", "", e.to_string()))?;
    let algorithm = get(ENDPOINT_IDENTIFICATION).unwrap_or_else(|| "https".to_string());
    let verifier: Arc<dyn ServerCertVerifier> = match algorithm.trim() {
        "" => Arc::new(AnyHostName(webpki)),
        a if a.eq_ignore_ascii_case("https") => webpki,
        other => {
            return Err(bad(
                ENDPOINT_IDENTIFICATION,
                other,
                "expected https or an empty value",
            ))
        }
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&super::tls::versions(get)?)
        .map_err(|e| bad("ssl.enabled.protocols", "", e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let has_keystore = ["ssl.keystore.location", "ssl.keystore.key"]
        .iter()
        .any(|k| get(k).is_some());
    if !has_keystore {
        return Ok(builder.with_no_client_auth());
    }
    let (chain, key) = super::tls::keystore(listener, get)?;
    builder
        .with_client_auth_cert(chain, key)
        .map_err(|e| bad("ssl.keystore.location", "", e.to_string()))
}

/// [`tls_client`] for another module's tests.
#[cfg(test)]
pub(crate) fn tls_client_for_tests(get: &dyn Fn(&str) -> Option<String>) -> Arc<ClientConfig> {
    Arc::new(tls_client("TEST", get).expect("a trust store"))
}

fn login(
    listener: &str,
    enabled: &[Mechanism],
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<PeerLogin, BadSetting> {
    let name = get(INTER_BROKER_MECHANISM).unwrap_or_else(|| "GSSAPI".to_string());
    let Some(mechanism) = Mechanism::parse(name.trim()) else {
        return Err(bad(
            INTER_BROKER_MECHANISM,
            &name,
            "not served (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are; Kafka's default is GSSAPI)",
        ));
    };
    if mechanism == Mechanism::OAuthBearer {
        return Err(bad(
            INTER_BROKER_MECHANISM,
            &name,
            "OAUTHBEARER is served to clients, but this broker does not log in to others with it \
             (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 it does)",
        ));
    }
    if !enabled.contains(&mechanism) {
        return Err(bad(
            INTER_BROKER_MECHANISM,
            &name,
            format!("not in the sasl.enabled.mechanisms of the inter-broker listener {listener}"),
        ));
    }
    let property = format!("{}.sasl.jaas.config", mechanism.name().to_ascii_lowercase());
    let full = format!("listener.name.{}.{property}", listener.to_ascii_lowercase());
    let class = mechanism.login_module();
    let missing = || {
        bad(
            &full,
            "(hidden)",
            format!(
                "the inter-broker listener's {class} entry needs username and password \
                 options: what this broker logs in to the others with"
            ),
        )
    };
    let jaas = get(&property).ok_or_else(missing)?;
    let modules = super::jaas::parse(&jaas)
        .map_err(|e| bad(&full, "(hidden)", format!("Invalid JAAS config: {e}")))?;
    let module = modules
        .iter()
        .find(|m| m.class == class)
        .ok_or_else(missing)?;
    match (
        module.options.get("username"),
        module.options.get("password"),
    ) {
        (Some(username), Some(password)) => Ok(PeerLogin {
            mechanism,
            username: username.clone(),
            password: password.clone(),
        }),
        _ => Err(missing()),
    }
}

/// Kafka's empty `ssl.endpoint.identification.algorithm`: the chain must still lead to a
/// trusted CA, but the certificate need not name the host connected to.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn plaintext_needs_nothing() {
        let c = resolve("PLAINTEXT", SecurityProtocol::Plaintext, &[], &|_| None).unwrap();
        assert!(c.tls.is_none() && c.login.is_none());
    }

    #[test]
    fn sasl_takes_the_mechanism_and_the_jaas_username_and_password() {
        let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    username=\"admin\" password=\"s3cret\" user_admin=\"s3cret\";";
        let pairs = [
            (INTER_BROKER_MECHANISM, "PLAIN"),
            ("plain.sasl.jaas.config", jaas),
        ];
        let c = resolve(
            "SASL_PLAINTEXT",
            SecurityProtocol::SaslPlaintext,
            &[Mechanism::Plain],
            &props(&pairs),
        )
        .unwrap();
        let login = c.login.unwrap();
        assert_eq!(
            (
                login.mechanism,
                login.username.as_str(),
                login.password.as_str()
            ),
            (Mechanism::Plain, "admin", "s3cret")
        );
        assert!(!format!("{login:?}").contains("s3cret"));
    }

    #[test]
    fn a_missing_or_unserved_mechanism_or_login_stops_the_start() {
        let get_err = |pairs: &[(&str, &str)], enabled: &[Mechanism]| {
            resolve(
                "SASL_PLAINTEXT",
                SecurityProtocol::SaslPlaintext,
                enabled,
                &props(pairs),
            )
            .unwrap_err()
        };
        let plain = [Mechanism::Plain];
        assert_eq!(get_err(&[], &plain).key, INTER_BROKER_MECHANISM);
        let e = get_err(&[(INTER_BROKER_MECHANISM, "SCRAM-SHA-512")], &plain);
        assert!(e.reason.contains("not in the sasl.enabled.mechanisms"));
        let no_password = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                           username=\"admin\";";
        let e = get_err(
            &[
                (INTER_BROKER_MECHANISM, "PLAIN"),
                ("plain.sasl.jaas.config", no_password),
            ],
            &plain,
        );
        assert_eq!(e.key, "listener.name.sasl_plaintext.plain.sasl.jaas.config");
    }

    #[test]
    fn tls_needs_a_trust_store() {
        let e = resolve("SSL", SecurityProtocol::Ssl, &[], &|_| None).unwrap_err();
        assert_eq!(e.key, "ssl.truststore.location");
    }
}
