//! SASL/SCRAM on the client side (RFC 5802, RFC 7677), for this broker's own connections to
//! other brokers (`sasl.mechanism.inter.broker.protocol=SCRAM-SHA-*`), as Kafka's
//! `ScramSaslClient` runs it: client-first names the user and a nonce, the server answers its
//! salt, iterations and the combined nonce, client-final proves the password, and the
//! server-final message must prove that the server knew the credential.
//!
//! The primitives are RustCrypto's (PBKDF2 and HMAC over sha2, through [`super::scram`]); only
//! the message syntax is written here.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use rill_metadata::scram::ScramMechanism;
use sha2::{Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::scram::{hash, hmac};

/// Random bytes in a client nonce.
const CLIENT_NONCE_BYTES: usize = 24;
/// The gs2 header without channel binding, and its base64 (`c=biws`).
const GS2_HEADER: &str = "n,,";

/// Why a client exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramClientError {
    /// The server's message is not what RFC 5802 allows at that step.
    #[error("malformed SCRAM {0} message from the server")]
    Malformed(&'static str),
    /// The server's nonce does not extend ours, or it asks for too few iterations.
    #[error("SCRAM server-first message refused: {0}")]
    Refused(&'static str),
    /// The server did not prove it knows the credential (or reported an error).
    #[error("SCRAM server-final message: {0}")]
    ServerNotProven(String),
    /// No randomness for the nonce.
    #[error("no randomness for a SCRAM nonce")]
    NoRandomness,
}

/// A client exchange after its first message.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
}

/// A client exchange after its final message: what the server-final message must carry.
pub struct AwaitingServerFinal {
    expected_signature: Vec<u8>,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .finish_non_exhaustive()
    }
}

/// A user name as SASLNAME (`,` and `=` escaped).
fn sasl_name(user: &str) -> String {
    user.replace('=', "=3D").replace(',', "=2C")
}

/// RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC.
pub(super) fn salted_password(
    m: ScramMechanism,
    password: &str,
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    match m {
        ScramMechanism::Sha256 => {
            pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, iterations).to_vec()
        }
        ScramMechanism::Sha512 => {
            pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, iterations).to_vec()
        }
    }
}

impl ScramClient {
    /// Starts an exchange for `user`: the client-first message to send.
    pub fn start(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
    ) -> Result<(Self, Vec<u8>), ScramClientError> {
        let mut bytes = [0u8; CLIENT_NONCE_BYTES];
        getrandom::fill(&mut bytes).map_err(|_| ScramClientError::NoRandomness)?;
        let nonce = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        Ok(Self::with_nonce(mechanism, user, password, nonce))
    }

    /// [`Self::start`] with a given nonce (the RFC's test vectors).
    fn with_nonce(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        nonce: String,
    ) -> (Self, Vec<u8>) {
        let client_first_bare = format!("n={},r={nonce}", sasl_name(user));
        let first = format!("{GS2_HEADER}{client_first_bare}").into_bytes();
        let client = Self {
            mechanism,
            password: password.to_string(),
            client_first_bare,
            nonce,
        };
        (client, first)
    }

    /// Takes the server-first message (`r=nonce,s=salt,i=iterations[,ext]`): the client-final
    /// message to send, and what the server's answer to it must prove.
    pub fn server_first(
        self,
        message: &[u8],
    ) -> Result<(AwaitingServerFinal, Vec<u8>), ScramClientError> {
        let text = std::str::from_utf8(message)
            .map_err(|_| ScramClientError::Malformed("server-first"))?;
        let mut fields = text.split(',');
        let mut field = |prefix: &str| {
            fields
                .next()
                .and_then(|f| f.strip_prefix(prefix))
                .ok_or(ScramClientError::Malformed("server-first"))
        };
        let nonce = field("r=")?;
        let salt = BASE64
            .decode(field("s=")?)
            .map_err(|_| ScramClientError::Malformed("server-first"))?;
        let iterations: u32 = field("i=")?
            .parse()
            .map_err(|_| ScramClientError::Malformed("server-first"))?;
        // Kafka's client refuses what its server would never store.
        let minimum = u32::try_from(self.mechanism.iterations_min()).unwrap_or(u32::MAX);
        if iterations < minimum {
            return Err(ScramClientError::Refused("too few iterations"));
        }
        if nonce.len() <= self.nonce.len() || !nonce.starts_with(&self.nonce) {
            return Err(ScramClientError::Refused(
                "the server nonce does not extend the client's",
            ));
        }
        let m = self.mechanism;
        let salted = salted_password(m, &self.password, &salt, iterations);
        let client_key = hmac(m, &salted, b"Client Key");
        let stored_key = hash(m, &client_key);
        let without_proof = format!("c={},r={nonce}", BASE64.encode(GS2_HEADER));
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = hmac(m, &stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac(m, &salted, b"Server Key");
        let expected_signature = hmac(m, &server_key, auth_message.as_bytes());
        let last = format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes();
        Ok((AwaitingServerFinal { expected_signature }, last))
    }
}

impl AwaitingServerFinal {
    /// Checks the server-final message (`v=signature`, or `e=error`).
    pub fn server_final(self, message: &[u8]) -> Result<(), ScramClientError> {
        let text = std::str::from_utf8(message)
            .map_err(|_| ScramClientError::Malformed("server-final"))?;
        if let Some(error) = text.strip_prefix("e=") {
            return Err(ScramClientError::ServerNotProven(error.to_string()));
        }
        let signature = text
            .split(',')
            .next()
            .and_then(|v| v.strip_prefix("v="))
            .and_then(|v| BASE64.decode(v).ok())
            .ok_or(ScramClientError::Malformed("server-final"))?;
        match bool::from(signature.ct_eq(&self.expected_signature)) {
            true => Ok(()),
            false => Err(ScramClientError::ServerNotProven(
                "wrong server signature".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::scram::{client_final, client_first, credential};
    use super::*;

    /// A whole exchange of this client against the server side, for a credential of `stored`.
    fn against_server(
        m: ScramMechanism,
        user: &str,
        stored: &str,
        password: &str,
    ) -> Result<String, String> {
        let salt = b"pepper".to_vec();
        let cred = credential(m, &salt, &salted_password(m, stored, &salt, 4096), 4096);
        let (client, first) = ScramClient::start(m, user, password).unwrap();
        let (state, server_first) =
            client_first(m, &first, |_| Some(cred.clone())).map_err(|e| format!("{e:?}"))?;
        let (awaiting, last) = client
            .server_first(&server_first)
            .map_err(|e| e.to_string())?;
        let (name, server_final) =
            client_final(state, &last).map_err(|e| format!("server: {e:?}"))?;
        awaiting
            .server_final(&server_final)
            .map_err(|e| e.to_string())?;
        Ok(name)
    }

    #[test]
    fn it_logs_in_with_the_right_password_for_both_hashes_and_an_escaped_name() {
        for m in ScramMechanism::ALL {
            assert_eq!(
                against_server(m, "br,ok=er", "pw", "pw"),
                Ok("br,ok=er".to_string())
            );
            assert!(against_server(m, "broker", "pw", "wrong")
                .unwrap_err()
                .starts_with("server"));
        }
    }

    /// RFC 7677's SCRAM-SHA-256 example (user "user", password "pencil").
    #[test]
    fn rfc_7677_test_vector() {
        let m = ScramMechanism::Sha256;
        let (client, first) =
            ScramClient::with_nonce(m, "user", "pencil", "rOprNGfwEbeRWgbNEkqO".into());
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                             s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let (awaiting, last) = client.server_first(server_first).unwrap();
        assert_eq!(
            String::from_utf8(last).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            awaiting.server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
            Ok(())
        );
    }

    #[test]
    fn a_bad_server_is_refused() {
        let m = ScramMechanism::Sha512;
        let start = || ScramClient::with_nonce(m, "u", "p", "abc".into()).0;
        for (bad, why) in [
            (&b"r=xyz1,s=c2FsdA==,i=4096"[..], "nonce not extended"),
            (b"r=abc,s=c2FsdA==,i=4096", "nonce not extended at all"),
            (b"r=abcd,s=c2FsdA==,i=4095", "too few iterations"),
            (b"r=abcd,s=!!,i=4096", "salt not base64"),
            (b"r=abcd,i=4096", "no salt"),
            (b"", "empty"),
            (b"r=abcd,s=c2FsdA==,i=x", "iterations not a number"),
        ] {
            assert!(start().server_first(bad).is_err(), "{why}");
        }
        let (awaiting, _) = start().server_first(b"r=abcd,s=c2FsdA==,i=4096").unwrap();
        assert!(awaiting.server_final(b"e=invalid-proof").is_err());
        let (awaiting, _) = start().server_first(b"r=abcd,s=c2FsdA==,i=4096").unwrap();
        assert!(awaiting.server_final(b"v=AAAA").is_err());
    }
}
