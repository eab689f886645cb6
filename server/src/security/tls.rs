//! A TLS listener's settings, read as Kafka 2.7+ reads PEM stores (per listener through
//! `listener.name.<name>.<property>`):
//!
//! | property                                   | Rill                                         |
//! |--------------------------------------------|----------------------------------------------|
//! | `ssl.keystore.type`                        | PEM only (another type stops the start)      |
//! | `ssl.keystore.location`                    | a PEM file with the private key and the certificate chain |
//! | `ssl.keystore.key`, `ssl.keystore.certificate.chain` | the same, inline PEM              |
//! | `ssl.key.password`                         | refused: encrypted keys are not read          |
//! | `ssl.truststore.type`                      | PEM only                                      |
//! | `ssl.truststore.location`, `ssl.truststore.certificates` | CA certificates (file or inline) that client certificates are checked against |
//! | `ssl.client.auth`                          | `none` (default), `requested`, `required`     |
//! | `ssl.principal.mapping.rules`              | Kafka's rules ([`super::principal`])          |
//! | `ssl.enabled.protocols`                    | `TLSv1.2`, `TLSv1.3` (default both)           |
//!
//! The key store and the trust store are read at start and again when their files change (the
//! next handshake after it, at most once a second: [`super::tls_reload`]).

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use super::principal::PrincipalRules;
use super::{bad, BadSetting};

/// What a TLS listener serves with.
#[derive(Debug)]
pub struct TlsListener {
    /// The rustls configuration (key, chain, client verifier, versions), built again when the
    /// trust store file changes.
    pub config: super::tls_reload::ReloadingServerConfig,
    /// `ssl.principal.mapping.rules`.
    pub rules: PrincipalRules,
}

/// The `ssl.*` properties of one listener (`get(property)` gives its value, the listener's
/// own override first).
pub fn resolve(
    listener: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<TlsListener, BadSetting> {
    for key in ["ssl.keystore.type", "ssl.truststore.type"] {
        if let Some(kind) = get(key).filter(|k| !k.eq_ignore_ascii_case("PEM")) {
            return Err(bad(key, &kind, "only PEM stores are read"));
        }
    }
    if let Some(password) = get("ssl.key.password").filter(|p| !p.is_empty()) {
        let _ = password;
        return Err(bad(
            "ssl.key.password",
            "(hidden)",
            "encrypted private keys are not read; give an unencrypted PEM key",
        ));
    }
    let certificate = Arc::new(reloading_keystore(listener, get)?);
    // What building the configuration reads, kept to build it again (the same reads).
    let read = std::cell::RefCell::new(Vec::new());
    let recording = |k: &str| {
        let v = get(k);
        read.borrow_mut().push((k.to_string(), v.clone()));
        v
    };
    // Built once to learn its reads (and refuse bad settings with their own messages).
    server_config(certificate.clone(), &recording)?;
    let read = read.into_inner();
    let file = get("ssl.truststore.location").map(std::path::PathBuf::from);
    let build = move || {
        let get = |k: &str| {
            read.iter()
                .find(|(p, _)| p == k)
                .and_then(|(_, v)| v.clone())
        };
        server_config(certificate.clone(), &get)
    };
    let config = super::tls_reload::Reloading::new("trust store", file, Box::new(build))?;
    let rules = match get("ssl.principal.mapping.rules") {
        Some(text) => PrincipalRules::parse("ssl.principal.mapping.rules", &text)?,
        None => PrincipalRules::default(),
    };
    Ok(TlsListener { config, rules })
}

/// The rustls configuration of a listener serving `certificate`, with its trust store, client
/// authentication and protocol versions.
fn server_config(
    certificate: Arc<super::tls_reload::ReloadingKeyStore>,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, BadSetting> {
    let roots = truststore(get)?;
    let auth = get("ssl.client.auth").unwrap_or_else(|| "none".to_string());
    let versions = versions(get)?;
    let builder =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&versions)
            .map_err(|e| bad("ssl.enabled.protocols", "", e.to_string()))?;
    let builder = match auth.trim().to_ascii_lowercase().as_str() {
        "none" => builder.with_no_client_auth(),
        mode @ ("required" | "requested") => {
            let Some(roots) = roots else {
                return Err(bad(
                    "ssl.client.auth",
                    mode,
                    "needs ssl.truststore.location or ssl.truststore.certificates",
                ));
            };
            let verifier = WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                Arc::new(rustls::crypto::ring::default_provider()),
            );
            let verifier = if mode == "requested" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| bad("ssl.truststore.location", "", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        other => {
            return Err(bad(
                "ssl.client.auth",
                other,
                "expected required, requested or none",
            ))
        }
    };
    Ok(builder.with_cert_resolver(certificate))
}

/// The properties a key store is read from.
const KEYSTORE_PROPERTIES: [&str; 3] = [
    "ssl.keystore.location",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
];

/// The listener's key store as a certificate served and read again when its file changes
/// ([`super::tls_reload`]).
fn reloading_keystore(
    listener: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<super::tls_reload::ReloadingKeyStore, BadSetting> {
    let given: Vec<(&str, Option<String>)> =
        KEYSTORE_PROPERTIES.iter().map(|k| (*k, get(k))).collect();
    let file = get("ssl.keystore.location").map(std::path::PathBuf::from);
    let name = listener.to_string();
    let provider = rustls::crypto::ring::default_provider();
    let load = move || {
        let get = |k: &str| {
            given
                .iter()
                .find(|(p, _)| *p == k)
                .and_then(|(_, v)| v.clone())
        };
        let (chain, key) = keystore(&name, &get)?;
        rustls::sign::CertifiedKey::from_der(chain, key, &provider)
            .map_err(|e| bad("ssl.keystore.location", "", e.to_string()))
    };
    super::tls_reload::Reloading::new("key store", file, Box::new(load))
}

/// A key store: the certificate chain and its private key.
pub(super) type Keystore = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// The listener's key store (`ssl.keystore.*`).
pub(super) fn keystore(
    listener: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Keystore, BadSetting> {
    let (text, key) = match (
        get("ssl.keystore.location"),
        get("ssl.keystore.key"),
        get("ssl.keystore.certificate.chain"),
    ) {
        (Some(path), None, None) => {
            let text = std::fs::read(&path)
                .map_err(|e| bad("ssl.keystore.location", &path, e.to_string()))?;
            (text.clone(), (text, "ssl.keystore.location"))
        }
        (None, Some(key), Some(chain)) => {
            (chain.into_bytes(), (key.into_bytes(), "ssl.keystore.key"))
        }
        (None, None, None) => {
            return Err(bad(
                "ssl.keystore.location",
                "",
                format!("listener {listener} speaks TLS and has no key store"),
            ))
        }
        _ => {
            return Err(bad(
                "ssl.keystore.location",
                "",
                "give ssl.keystore.location, or ssl.keystore.key with \
                 ssl.keystore.certificate.chain",
            ))
        }
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<_, _>>()
        .map_err(|e| bad("ssl.keystore.certificate.chain", "", e.to_string()))?;
    if chain.is_empty() {
        return Err(bad(
            "ssl.keystore.certificate.chain",
            "",
            "no CERTIFICATE in the key store",
        ));
    }
    let (key_text, key_property) = key;
    if String::from_utf8_lossy(&key_text).contains("ENCRYPTED PRIVATE KEY") {
        return Err(bad(
            key_property,
            "(hidden)",
            "encrypted private keys are not read; give an unencrypted PEM key",
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_text)
        .map_err(|e| bad(key_property, "(hidden)", format!("no private key: {e}")))?;
    Ok((chain, key))
}

/// The listener's trust store (`ssl.truststore.*`), if it names one.
pub(super) fn truststore(
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<RootCertStore>, BadSetting> {
    let (text, key) = match (
        get("ssl.truststore.location"),
        get("ssl.truststore.certificates"),
    ) {
        (Some(path), None) => (
            std::fs::read(&path)
                .map_err(|e| bad("ssl.truststore.location", &path, e.to_string()))?,
            "ssl.truststore.location",
        ),
        (None, Some(certs)) => (certs.into_bytes(), "ssl.truststore.certificates"),
        (None, None) => return Ok(None),
        (Some(path), Some(_)) => {
            return Err(bad(
                "ssl.truststore.location",
                &path,
                "give ssl.truststore.location or ssl.truststore.certificates, not both",
            ))
        }
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&text) {
        let cert = cert.map_err(|e| bad(key, "", e.to_string()))?;
        roots.add(cert).map_err(|e| bad(key, "", e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(bad(key, "", "no CERTIFICATE in the trust store"));
    }
    Ok(Some(roots))
}

/// `ssl.enabled.protocols`.
pub(super) fn versions(
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, BadSetting> {
    let Some(text) = get("ssl.enabled.protocols") else {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    };
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match name {
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            other => {
                return Err(bad(
                    "ssl.enabled.protocols",
                    &text,
                    format!("{other} is not served (TLSv1.2 and TLSv1.3 are)"),
                ))
            }
        }
    }
    if out.is_empty() {
        return Err(bad("ssl.enabled.protocols", &text, "no protocol left"));
    }
    Ok(out)
}
