//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the server side (RFC 5802, RFC 7677), as Kafka's
//! `ScramSaslServer` runs it: the client-first message names the user, the server answers its
//! salt, iterations and a nonce, the client-final message proves the password, the server-final
//! message proves the server knew the credential.
//!
//! The primitives are RustCrypto's (hmac over sha2) and the comparison of the proof is
//! `subtle`'s constant-time one; only the message syntax (Kafka's `ScramMessages` patterns) is
//! written here. Kafka's limits apply: gs2 header `n` only (no channel binding), ASCII user
//! names (`=2C` and `=3D` escapes), a credential of fewer than 4096 iterations refused.
//!
//! What a failure tells the client is the caller's (`crate::handler::sasl_authenticate`):
//! [`Failure::Generic`] is Kafka's "invalid credentials" message, which says nothing of whether
//! the user exists.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use rill_metadata::scram::{ScramCredential, ScramMechanism};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// Random bytes in a server nonce (Kafka: 130 random bits).
const SERVER_NONCE_BYTES: usize = 24;

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Kafka's `SaslException`: the client is told only that its credentials were invalid.
    Generic,
    /// Kafka's `SaslAuthenticationException`: this message goes to the client.
    Told(String),
}

/// The exchange after the server-first message: what the client-final message is checked
/// against.
pub struct AwaitingFinal {
    mechanism: ScramMechanism,
    user: String,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credential: ScramCredential,
}

impl AwaitingFinal {
    /// The mechanism being run.
    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }
}

impl std::fmt::Debug for AwaitingFinal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwaitingFinal")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// HMAC of `data` under `key` with the mechanism's hash.
pub(super) fn hmac(m: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length (RFC 2104), so new_from_slice cannot fail.
    match m {
        ScramMechanism::Sha256 => {
            let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        ScramMechanism::Sha512 => {
            let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key");
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
    }
}

/// The mechanism's hash of `data`.
pub(super) fn hash(m: ScramMechanism, data: &[u8]) -> Vec<u8> {
    match m {
        ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
        ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
    }
}

/// The credential stored for a salted password (Kafka's controller does the same with the one
/// AlterUserScramCredentials carries): StoredKey = H(HMAC(sp, "Client Key")), ServerKey =
/// HMAC(sp, "Server Key").
pub fn credential(
    m: ScramMechanism,
    salt: &[u8],
    salted_password: &[u8],
    iterations: i32,
) -> ScramCredential {
    let client_key = hmac(m, salted_password, b"Client Key");
    ScramCredential {
        salt: salt.to_vec(),
        stored_key: hash(m, &client_key),
        server_key: hmac(m, salted_password, b"Server Key"),
        iterations,
    }
}

/// A fresh server nonce (printable, no comma).
pub fn server_nonce() -> Result<String, Failure> {
    let mut bytes = [0u8; SERVER_NONCE_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| {
        tracing::error!(error = %e, "no randomness for a SCRAM nonce");
        Failure::Generic
    })?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

/// Kafka's SASLNAME: ASCII 0x01-0x7F without `=` and `,`, or the escapes `=2C` and `=3D`;
/// the decoded name.
fn sasl_name(text: &str) -> Option<String> {
    if text.is_empty() {
        return None;
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("=2C") {
            out.push(',');
            rest = after;
        } else if let Some(after) = rest.strip_prefix("=3D") {
            out.push('=');
            rest = after;
        } else if matches!(c, '\u{1}'..='\u{7f}') && c != '=' && c != ',' {
            out.push(c);
            rest = &rest[1..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// Kafka's PRINTABLE: 0x21-0x7E without `,`.
fn printable(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| (0x21..=0x7e).contains(&b) && b != b',')
}

/// `(,ALPHA=VALUE)*` split at commas: each `key=value` with an alphabetic key and an ASCII
/// value without commas.
fn extensions_ok(parts: &[&str]) -> bool {
    parts.iter().all(|p| match p.split_once('=') {
        Some((k, v)) => {
            !k.is_empty()
                && k.bytes().all(|b| b.is_ascii_alphabetic())
                && !v.is_empty()
                && v.bytes().all(|b| (0x01..=0x7f).contains(&b))
        }
        None => false,
    })
}

/// The client-first message: `n,[a=authzid],[m=...,]n=user,r=nonce[,ext=value...]`. Looks the
/// user up with `lookup` and answers the server-first message.
pub fn client_first(
    m: ScramMechanism,
    message: &[u8],
    lookup: impl FnOnce(&str) -> Option<ScramCredential>,
) -> Result<(AwaitingFinal, Vec<u8>), Failure> {
    let text = std::str::from_utf8(message).map_err(|_| Failure::Generic)?;
    let rest = text.strip_prefix("n,").ok_or(Failure::Generic)?;
    let (authzid, bare) = rest.split_once(',').ok_or(Failure::Generic)?;
    let authzid = match authzid {
        "" => String::new(),
        a => sasl_name(a.strip_prefix("a=").ok_or(Failure::Generic)?).ok_or(Failure::Generic)?,
    };
    let gs2_header = format!("n,{},", &rest[..rest.len() - bare.len() - 1]);
    let mut parts: Vec<&str> = bare.split(',').collect();
    if parts.first().is_some_and(|p| p.starts_with("m=")) {
        parts.remove(0);
    }
    if parts.len() < 2 {
        return Err(Failure::Generic);
    }
    let user = parts[0]
        .strip_prefix("n=")
        .and_then(sasl_name)
        .ok_or(Failure::Generic)?;
    let client_nonce = parts[1].strip_prefix("r=").ok_or(Failure::Generic)?;
    if !printable(client_nonce) || !extensions_ok(&parts[2..]) {
        return Err(Failure::Generic);
    }
    let credential = lookup(&user).ok_or(Failure::Generic)?;
    if !authzid.is_empty() && authzid != user {
        return Err(Failure::Told(
            "Authentication failed: Client requested an authorization id that is different \
             from username"
                .into(),
        ));
    }
    if credential.iterations < m.iterations_min() {
        return Err(Failure::Generic);
    }
    let nonce = format!("{client_nonce}{}", server_nonce()?);
    let server_first = format!(
        "r={nonce},s={},i={}",
        BASE64.encode(&credential.salt),
        credential.iterations
    );
    let reply = server_first.clone().into_bytes();
    let state = AwaitingFinal {
        mechanism: m,
        user,
        gs2_header,
        client_first_bare: bare.to_string(),
        server_first,
        nonce,
        credential,
    };
    Ok((state, reply))
}

/// The client-final message: `c=<gs2 header, base64>,r=<nonce>[,ext...],p=<proof>`. The user
/// and the server-final message when the proof holds.
pub fn client_final(state: AwaitingFinal, message: &[u8]) -> Result<(String, Vec<u8>), Failure> {
    let text = std::str::from_utf8(message).map_err(|_| Failure::Generic)?;
    let (without_proof, proof) = text.rsplit_once(",p=").ok_or(Failure::Generic)?;
    let parts: Vec<&str> = without_proof.split(',').collect();
    if parts.len() < 2 || !extensions_ok(&parts[2..]) {
        return Err(Failure::Generic);
    }
    let channel = parts[0].strip_prefix("c=").ok_or(Failure::Generic)?;
    let channel = BASE64.decode(channel).map_err(|_| Failure::Generic)?;
    let nonce = parts[1].strip_prefix("r=").ok_or(Failure::Generic)?;
    let proof = BASE64.decode(proof).map_err(|_| Failure::Generic)?;
    // Kafka's check (`nonce().endsWith(...)`), not RFC 5802's equality: librdkafka up to 2.0
    // sends its own nonce again before the combined one, and Kafka takes it. The fresh server
    // nonce must still be there, and the proof covers the message as sent.
    if channel != state.gs2_header.as_bytes() || !nonce.ends_with(&state.nonce) {
        return Err(Failure::Generic);
    }
    let m = state.mechanism;
    let auth_message = format!(
        "{},{},{without_proof}",
        state.client_first_bare, state.server_first
    );
    let signature = hmac(m, &state.credential.stored_key, auth_message.as_bytes());
    if proof.len() != signature.len() {
        return Err(Failure::Generic);
    }
    let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
    let computed = hash(m, &client_key);
    if !bool::from(computed.ct_eq(&state.credential.stored_key)) {
        return Err(Failure::Generic);
    }
    let server_signature = hmac(m, &state.credential.server_key, auth_message.as_bytes());
    let reply = format!("v={}", BASE64.encode(server_signature)).into_bytes();
    Ok((state.user, reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::scram_client::salted_password as salted;

    /// A client's whole exchange with `password` against a credential made from `stored`.
    fn exchange(m: ScramMechanism, stored: &str, password: &str) -> Result<String, Failure> {
        let salt = b"salty".to_vec();
        let cred = credential(m, &salt, &salted(m, stored, &salt, 4096), 4096);
        let first = b"n,,n=al=2Cice,r=clientnonce";
        let (state, server_first) = client_first(m, first, |u| {
            assert_eq!(u, "al,ice");
            Some(cred.clone())
        })?;
        let server_first = String::from_utf8(server_first).unwrap();
        let nonce = server_first
            .split(',')
            .next()
            .unwrap()
            .strip_prefix("r=")
            .unwrap();
        assert!(nonce.starts_with("clientnonce") && nonce.len() > 20);
        let sp = salted(m, password, &salt, 4096);
        let client_key = hmac(m, &sp, b"Client Key");
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("n=al=2Cice,r=clientnonce,{server_first},{without_proof}");
        let signature = hmac(m, &hash(m, &client_key), auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let last = format!("{without_proof},p={}", BASE64.encode(proof));
        let (user, server_final) = client_final(state, last.as_bytes())?;
        let expected = hmac(m, &hmac(m, &sp, b"Server Key"), auth.as_bytes());
        assert_eq!(
            String::from_utf8(server_final).unwrap(),
            format!("v={}", BASE64.encode(expected))
        );
        Ok(user)
    }

    #[test]
    fn the_right_password_passes_and_a_wrong_one_fails_for_both_hashes() {
        for m in ScramMechanism::ALL {
            assert_eq!(exchange(m, "pw", "pw"), Ok("al,ice".to_string()));
            assert_eq!(exchange(m, "pw", "wrong"), Err(Failure::Generic));
        }
    }

    /// RFC 7677's SCRAM-SHA-256 example (user "user", password "pencil").
    #[test]
    fn rfc_7677_test_vector() {
        let m = ScramMechanism::Sha256;
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let cred = credential(m, &salt, &salted(m, "pencil", &salt, 4096), 4096);
        let (mut state, _) =
            client_first(m, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", |_| Some(cred)).unwrap();
        // The RFC's server nonce, in place of a random one.
        state.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into();
        state.server_first = format!("r={},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", state.nonce);
        let last = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                    p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        let (user, server_final) = client_final(state, last.as_bytes()).unwrap();
        assert_eq!(user, "user");
        assert_eq!(
            server_final,
            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }

    #[test]
    fn malformed_messages_fail_without_a_lookup() {
        for bad in [
            &b"y,,n=u,r=x"[..],
            b"n,,n=,r=x",
            b"n,,n=u",
            b"n,,n=u,r=",
            b"n,,n=u\xff,r=x",
            b"n,,n=u=,r=x",
            b"n,,n=u,r=a b",
            b"p=tls,,n=u,r=x",
        ] {
            let r = client_first(ScramMechanism::Sha256, bad, |_| unreachable!());
            assert_eq!(r.err(), Some(Failure::Generic), "{bad:?}");
        }
        let unknown = client_first(ScramMechanism::Sha512, b"n,,n=u,r=x", |_| None);
        assert_eq!(unknown.err(), Some(Failure::Generic));
    }
}
