//! SaslAuthenticate (36), v0-2: one token of the mechanism SaslHandshake chose, answered with
//! the server's next token. PLAIN takes one (`[authzid] NUL user NUL password`, checked against
//! the listener's JAAS users); SCRAM two (client-first, then client-final:
//! `crate::security::scram`), its users' credentials from AlterUserScramCredentials;
//! OAUTHBEARER one unsecured JWT (`crate::security::oauthbearer`), or, if it is invalid, the
//! error challenge and then the client's `\x01`, which fails with that challenge as the message.
//!
//! A failure is answered SASL_AUTHENTICATION_FAILED with Kafka's message, then the connection
//! is closed: PLAIN's own messages ("Authentication failed: Invalid username or password"), and
//! for SCRAM the one that says nothing of whether the user exists ("Authentication failed
//! during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"). On
//! success the connection's principal is the user. `session_lifetime_ms` is
//! `connections.max.reauth.ms` (0 by default: no re-authentication asked for), or an OAUTHBEARER
//! token's remaining life if shorter (as Kafka's `SaslServerAuthenticator`); the client then
//! re-authenticates on its connection before that (KIP-368), as the same principal, or is
//! closed on its next request. After authentication, or on a listener without SASL, the answer
//! is ILLEGAL_SASL_STATE, as Kafka's.

use bytes::Bytes;
use rill_metadata::scram::{ScramCredential, ScramMechanism};
use rill_protocol::kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use rill_protocol::ErrorCode;
use rill_types::{DurationMs, TimestampMs};

use super::{message_bytes, Answer, Broker};
use crate::security::oauthbearer::{self, ClientFirstRefusal};
use crate::security::sasl::{Mechanism, PlainUsers, SaslListener, SaslState};
use crate::security::scram::{self, Failure};
use crate::security::session::Session;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    broker: &B,
    cx: super::RequestContext<'_>,
    request: SaslAuthenticateRequest,
) -> Answer {
    let session = cx.session;
    let Some(sasl) = session.listener.sasl.clone() else {
        return illegal();
    };
    // Taken out for the exchange (no await below), so a concurrent request sees `Failed`.
    let state = session.with_sasl(|s| std::mem::replace(s, SaslState::Failed));
    let token = &request.auth_bytes;
    let used = match &state {
        SaslState::Authenticate(m) => Some(*m),
        SaslState::ScramFinal(awaiting) => Some(Mechanism::Scram(awaiting.mechanism())),
        SaslState::OAuthChallenged(_) => Some(Mechanism::OAuthBearer),
        _ => None,
    };
    let outcome: Result<Step, (Mechanism, Failure)> = match state {
        SaslState::Complete => {
            session.with_sasl(|s| *s = SaslState::Complete);
            return illegal();
        }
        SaslState::Authenticate(Mechanism::Plain) => plain(&sasl.plain_users, token)
            .map(|user| Step::complete(user, None))
            .map_err(|f| (Mechanism::Plain, f)),
        SaslState::Authenticate(Mechanism::Scram(m)) => {
            scram::client_first(m, token, |user| scram_credential(broker, user, m))
                .map(|(next, reply)| Step::reply(reply, SaslState::ScramFinal(Box::new(next))))
                .map_err(|f| (Mechanism::Scram(m), f))
        }
        SaslState::ScramFinal(awaiting) => {
            let m = Mechanism::Scram(awaiting.mechanism());
            scram::client_final(*awaiting, token)
                .map(|(user, reply)| Step {
                    reply,
                    ..Step::complete(user, None)
                })
                .map_err(|f| (m, f))
        }
        SaslState::Authenticate(Mechanism::OAuthBearer) => oauthbearer(session, &sasl, None, token),
        SaslState::OAuthChallenged(challenge) => {
            oauthbearer(session, &sasl, Some(challenge), token)
        }
        // The dispatcher admits SaslAuthenticate only in the states above.
        SaslState::Handshake | SaslState::Failed => return Answer::Close,
    };
    let outcome = outcome.and_then(|step| same_principal_again(session, used, step));
    match outcome {
        Ok(step) => {
            let lifetime_ms = match step.user {
                Some(user) => authenticated(session, &sasl, used, user, step.expires_ms),
                None => DurationMs::ZERO,
            };
            session.with_sasl(|s| *s = step.next);
            Answer::body(
                SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(step.reply))
                    .with_session_lifetime_ms(lifetime_ms.0),
            )
        }
        Err((m, failure)) => refused(session, m, failure),
    }
}

/// The failure's answer: SASL_AUTHENTICATION_FAILED with Kafka's message, then the close.
fn refused(session: &Session, m: Mechanism, failure: Failure) -> Answer {
    let message = match failure {
        Failure::Told(message) => message,
        Failure::Generic => format!(
            "Authentication failed during {} due to invalid credentials with SASL mechanism {}",
            match session.with_reauth(|r| r.from.is_some()) {
                true => "re-authentication",
                false => "authentication",
            },
            m.name()
        ),
    };
    tracing::info!(peer = ?session.peer, mechanism = m.name(), %message, "SASL authentication failed");
    Answer::Final(
        SaslAuthenticateResponse::default()
            .with_error_code(ErrorCode::SaslAuthenticationFailed.code())
            .with_error_message(Some(message_bytes(&message)))
            .into(),
    )
}

/// One exchange step's outcome.
struct Step {
    /// The user, once authenticated.
    user: Option<String>,
    /// The server's token.
    reply: Vec<u8>,
    /// The connection's next state.
    next: SaslState,
    /// When the credential itself expires (an OAUTHBEARER token's `exp`; PLAIN's and
    /// SCRAM's passwords do not).
    expires_ms: Option<TimestampMs>,
}

impl Step {
    /// `user` authenticated, nothing more to say.
    fn complete(user: String, expires_ms: Option<TimestampMs>) -> Self {
        Step {
            user: Some(user),
            reply: Vec::new(),
            next: SaslState::Complete,
            expires_ms,
        }
    }

    /// The exchange goes on: `reply` to the client, then `next`.
    fn reply(reply: Vec<u8>, next: SaslState) -> Self {
        Step {
            user: None,
            reply,
            next,
            expires_ms: None,
        }
    }
}

/// The wall clock, which tokens' `exp` and `iat` are measured on.
fn wall_clock_ms() -> TimestampMs {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    TimestampMs(i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// OAUTHBEARER's step (Kafka's `OAuthBearerSaslServer`): a valid token authenticates; an
/// invalid one is answered with the error challenge, which the client acknowledges with
/// `\x01` and the authentication then fails with it as the message; a malformed message
/// fails at once.
fn oauthbearer(
    session: &Session,
    sasl: &SaslListener,
    challenged: Option<String>,
    token: &[u8],
) -> Result<Step, (Mechanism, Failure)> {
    let m = Mechanism::OAuthBearer;
    if let Some(challenge) = challenged {
        if oauthbearer::is_error_acknowledgement(token) {
            return Err((m, Failure::Told(challenge)));
        }
    }
    match oauthbearer::evaluate(token, &sasl.oauthbearer, wall_clock_ms()) {
        Ok(valid) => Ok(Step::complete(valid.principal, Some(valid.expires_ms))),
        Err(ClientFirstRefusal::Invalid(invalid)) => {
            tracing::info!(peer = ?session.peer, reason = %invalid.reason, "OAUTHBEARER token refused");
            let challenge = invalid.challenge();
            Ok(Step::reply(
                challenge.clone().into_bytes(),
                SaslState::OAuthChallenged(challenge),
            ))
        }
        Err(ClientFirstRefusal::Malformed(why)) => {
            tracing::debug!(peer = ?session.peer, why, "OAUTHBEARER message refused");
            Err((m, Failure::Generic))
        }
        Err(ClientFirstRefusal::Authzid(message)) => Err((m, Failure::Told(message))),
    }
}

/// `user` proved who it is with `used`: the connection's principal from now on, and when that
/// expires: after `connections.max.reauth.ms`, or the credential's expiry if sooner (Kafka's
/// `SaslServerAuthenticator`); the session lifetime to answer, in ms (0: none).
fn authenticated(
    session: &Session,
    sasl: &SaslListener,
    used: Option<Mechanism>,
    user: String,
    credential_expires_ms: Option<TimestampMs>,
) -> DurationMs {
    match session.with_reauth(|r| r.from.take()).is_some() {
        true => tracing::info!(peer = ?session.peer, %user, "SASL re-authentication succeeded"),
        false => tracing::debug!(peer = ?session.peer, %user, "SASL authentication succeeded"),
    }
    session.set_principal(user);
    let reauth_ms = sasl
        .reauth_max
        .map(|d| DurationMs(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
    let lifetime_ms = match credential_expires_ms {
        Some(expires) => Some(oauthbearer::session_lifetime_ms(
            expires,
            wall_clock_ms(),
            reauth_ms,
        )),
        None => reauth_ms,
    };
    // A lifetime too long for the clock never expires.
    let expires = lifetime_ms.and_then(|ms| {
        let ms = u64::try_from(ms.0).unwrap_or(0);
        std::time::Instant::now().checked_add(std::time::Duration::from_millis(ms))
    });
    session.with_reauth(|r| {
        r.mechanism = used;
        r.expires = expires;
    });
    // v0 has no field for it: such a client is closed at expiry (as Kafka's).
    lifetime_ms.unwrap_or(DurationMs::ZERO)
}

/// A re-authentication must prove the principal the connection had (Kafka's
/// `SaslServerAuthenticator` refuses a change of principal).
fn same_principal_again(
    session: &Session,
    used: Option<Mechanism>,
    step: Step,
) -> Result<Step, (Mechanism, Failure)> {
    let (Some(user), Some(before)) = (&step.user, session.with_reauth(|r| r.from.clone())) else {
        return Ok(step);
    };
    if *user == before {
        return Ok(step);
    }
    Err((
        used.unwrap_or(Mechanism::Plain),
        Failure::Told(format!(
            "Cannot change principals during re-authentication from User:{before}: User:{user}"
        )),
    ))
}

fn illegal() -> Answer {
    Answer::body(
        SaslAuthenticateResponse::default()
            .with_error_code(ErrorCode::IllegalSaslState.code())
            .with_error_message(Some(message_bytes(
                "SaslAuthenticate request received after successful authentication",
            ))),
    )
}

/// Kafka's `PlainSaslServer.evaluateResponse`: `authzid NUL authcid NUL passwd`, the user on
/// success.
fn plain(users: &PlainUsers, token: &[u8]) -> Result<String, Failure> {
    let told = |m: &str| Failure::Told(m.to_string());
    let text = String::from_utf8_lossy(token);
    let tokens: Vec<&str> = text.splitn(4, '\0').collect();
    if tokens.len() != 3 {
        return Err(Failure::Told(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            tokens.len()
        )));
    }
    let (authzid, user, password) = (tokens[0], tokens[1], tokens[2]);
    if user.is_empty() {
        return Err(told("Authentication failed: username not specified"));
    }
    if password.is_empty() {
        return Err(told("Authentication failed: password not specified"));
    }
    if !users.verify(user, password) {
        return Err(told("Authentication failed: Invalid username or password"));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(told(
            "Authentication failed: Client requested an authorization id that is different \
             from username",
        ));
    }
    Ok(user.to_string())
}

/// `user`'s credential for `m`: in a cluster from the applied metadata image, on a single node
/// from its registry.
pub fn scram_credential<B: Broker>(
    broker: &B,
    user: &str,
    m: ScramMechanism,
) -> Option<ScramCredential> {
    match broker.cluster() {
        Some(cluster) => cluster.image().scram.get(user)?.get(&m).cloned(),
        None => broker.topics().scram_credential(user, m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::fake::FakeBroker;
    use crate::handler::str_bytes;
    use crate::security::session::Session;
    use futures::executor::block_on;
    use rill_protocol::kafka_protocol::messages::{ResponseKind, SaslHandshakeRequest};

    fn sasl_session() -> Session {
        Session::sasl_for_tests()
    }

    fn cx<'a>(session: &'a Session, version: i16) -> super::super::RequestContext<'a> {
        super::super::RequestContext {
            version,
            client_id: "",
            frame: Bytes::new(),
            session,
        }
    }

    fn authenticate(broker: &FakeBroker, session: &Session, token: &[u8]) -> Answer {
        let request =
            SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
        block_on(serve(broker, cx(session, 2), request))
    }

    fn handshake(broker: &FakeBroker, session: &Session, mechanism: &str) -> Answer {
        let request = SaslHandshakeRequest::default().with_mechanism(str_bytes(mechanism));
        block_on(super::super::sasl_handshake::serve(
            broker,
            cx(session, 1),
            request,
        ))
    }

    #[test]
    fn plain_logs_in_the_jaas_user_and_refuses_a_wrong_password() {
        let broker = FakeBroker::new();
        let session = sasl_session();
        use rill_protocol::kafka_protocol::messages::ApiKey;
        assert!(!session.admits(Some(ApiKey::Produce)));
        assert!(matches!(
            handshake(&broker, &session, "PLAIN"),
            Answer::Body(_)
        ));
        let Answer::Body(ResponseKind::SaslAuthenticate(ok)) =
            authenticate(&broker, &session, b"\0alice\0pw")
        else {
            panic!("not answered");
        };
        assert_eq!(ok.error_code, 0);
        assert_eq!(session.principal(), "alice");
        assert!(session.admits(Some(ApiKey::Produce)));
        let Answer::Body(ResponseKind::SaslAuthenticate(again)) =
            authenticate(&broker, &session, b"")
        else {
            panic!("not answered");
        };
        assert_eq!(again.error_code, ErrorCode::IllegalSaslState.code());

        let session = sasl_session();
        handshake(&broker, &session, "PLAIN");
        let Answer::Final(ResponseKind::SaslAuthenticate(bad)) =
            authenticate(&broker, &session, b"\0alice\0nope")
        else {
            panic!("a failure closes");
        };
        assert_eq!(bad.error_code, ErrorCode::SaslAuthenticationFailed.code());
        assert_eq!(
            bad.error_message.as_deref(),
            Some("Authentication failed: Invalid username or password")
        );
        assert!(!session.admits(Some(ApiKey::SaslAuthenticate)));
    }

    #[test]
    fn plain_token_shapes_get_kafkas_messages() {
        let users = PlainUsers::default();
        let told = |t: &[u8]| match plain(&users, t) {
            Err(Failure::Told(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(told(b"alice").contains("expected 3 tokens, got 1"));
        assert!(told(b"a\0b\0c\0d").contains("got 4"));
        assert!(told(b"\0\0pw").contains("username not specified"));
        assert!(told(b"\0u\0").contains("password not specified"));
    }

    #[test]
    fn an_unknown_mechanism_is_listed_then_closed_and_scram_without_a_user_fails() {
        let broker = FakeBroker::new();
        let session = sasl_session();
        let Answer::Final(ResponseKind::SaslHandshake(r)) = handshake(&broker, &session, "GSSAPI")
        else {
            panic!("an unknown mechanism closes");
        };
        assert_eq!(r.error_code, ErrorCode::UnsupportedSaslMechanism.code());
        assert_eq!(r.mechanisms.len(), 3);
        let session = sasl_session();
        handshake(&broker, &session, "SCRAM-SHA-256");
        let Answer::Final(ResponseKind::SaslAuthenticate(bad)) =
            authenticate(&broker, &session, b"n,,n=nobody,r=abc")
        else {
            panic!("a failure closes");
        };
        assert_eq!(
            bad.error_message.as_deref(),
            Some("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
        );
    }

    fn oauth(broker: &FakeBroker, session: &Session, message: &[u8]) -> (bool, i16, String, i64) {
        match authenticate(broker, session, message) {
            Answer::Body(ResponseKind::SaslAuthenticate(r)) => (
                false,
                r.error_code,
                String::from_utf8_lossy(&r.auth_bytes).into_owned(),
                r.session_lifetime_ms,
            ),
            Answer::Final(ResponseKind::SaslAuthenticate(r)) => (
                true,
                r.error_code,
                r.error_message.map(|m| m.to_string()).unwrap_or_default(),
                0,
            ),
            _ => panic!("not answered"),
        }
    }

    #[test]
    fn oauthbearer_authenticates_a_token_and_challenges_an_invalid_one() {
        use crate::security::oauthbearer::{client_first, unsecured_token};
        let broker = FakeBroker::new();
        let now = wall_clock_ms();
        let session = sasl_session();
        handshake(&broker, &session, "OAUTHBEARER");
        let good = client_first(&unsecured_token("carol", &[], now, 60));
        let (closed, error, reply, lifetime) = oauth(&broker, &session, &good);
        assert_eq!((closed, error, reply.as_str()), (false, 0, ""));
        assert!((55_000..=60_000).contains(&lifetime), "{lifetime}");
        assert_eq!(session.principal(), "carol");
        // The token's expiry bounds the session: a re-authentication may begin.
        assert!(matches!(
            handshake(&broker, &session, "OAUTHBEARER"),
            Answer::Body(_)
        ));
        let (closed, error, _, _) = oauth(&broker, &session, &good);
        assert_eq!((closed, error), (false, 0));

        let session = sasl_session();
        handshake(&broker, &session, "OAUTHBEARER");
        let expired = client_first(&unsecured_token(
            "carol",
            &[],
            now - DurationMs(120_000),
            60,
        ));
        let (closed, error, reply, _) = oauth(&broker, &session, &expired);
        assert_eq!((closed, error), (false, 0));
        assert_eq!(reply, r#"{"status":"invalid_token"}"#);
        let (closed, error, message, _) = oauth(&broker, &session, b"\x01");
        assert!(closed);
        assert_eq!(error, ErrorCode::SaslAuthenticationFailed.code());
        assert_eq!(message, r#"{"status":"invalid_token"}"#);

        let session = sasl_session();
        handshake(&broker, &session, "OAUTHBEARER");
        let (closed, _, message, _) = oauth(&broker, &session, b"n,,\x01auth=Basic x\x01\x01");
        assert!(closed);
        assert_eq!(
            message,
            "Authentication failed during authentication due to invalid credentials with SASL \
             mechanism OAUTHBEARER"
        );
    }
}
