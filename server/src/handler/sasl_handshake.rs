//! SaslHandshake (17), v1: the client names its mechanism, the broker lists those it
//! enables (`sasl.enabled.mechanisms`) and, if the mechanism is one, waits for its
//! SaslAuthenticate tokens. v0 (raw tokens after the handshake, without SaslAuthenticate) is
//! advertised, because librdkafka 2.0.2 turns SASL on only when it is, but not served: a v0
//! handshake on a SASL listener is answered UNSUPPORTED_VERSION with the mechanisms, then closed
//! (clients that know v1 send v1).
//!
//! As Kafka: an unknown mechanism is answered UNSUPPORTED_SASL_MECHANISM with the list, then the
//! connection is closed; a SaslHandshake on a listener without SASL, or after authentication,
//! is answered ILLEGAL_SASL_STATE (`KafkaApis.handleSaslHandshakeRequest`), unless the
//! authentication expires (`connections.max.reauth.ms` is set, or an OAUTHBEARER token's `exp`
//! bounds it): then it begins a re-authentication (KIP-368) with the connection's mechanism
//! (another one is refused and the connection closed).

use rill_protocol::kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use rill_protocol::ErrorCode;

use super::{str_bytes, Answer, Broker};
use crate::security::sasl::SaslState;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: Broker>(
    _broker: &B,
    cx: super::RequestContext<'_>,
    request: SaslHandshakeRequest,
) -> Answer {
    let illegal = || {
        Answer::body(
            SaslHandshakeResponse::default().with_error_code(ErrorCode::IllegalSaslState.code()),
        )
    };
    let Some(sasl) = cx.session.listener.sasl.clone() else {
        return illegal();
    };
    let mechanisms = sasl.names().into_iter().map(str_bytes).collect();
    let response = SaslHandshakeResponse::default().with_mechanisms(mechanisms);
    // KIP-368: a client whose authentication expires authenticates again on its connection,
    // with the same mechanism (and, SaslAuthenticate checks, as the same principal).
    let reauthable = cx.version >= 1 && cx.session.with_reauth(|r| r.expires.is_some());
    cx.session.with_sasl(|state| match state {
        SaslState::Complete if reauthable => {
            let before = cx.session.with_reauth(|r| r.mechanism);
            match sasl.enabled(&request.mechanism) {
                Some(m) if Some(m) == before => {
                    let principal = cx.session.principal();
                    cx.session.with_reauth(|r| r.from = Some(principal));
                    *state = SaslState::Authenticate(m);
                    Answer::body(response)
                }
                _ => {
                    tracing::info!(
                        peer = ?cx.session.peer,
                        mechanism = &*request.mechanism,
                        "closing connection: re-authentication with another mechanism"
                    );
                    *state = SaslState::Failed;
                    Answer::Final(
                        response
                            .with_error_code(ErrorCode::IllegalSaslState.code())
                            .into(),
                    )
                }
            }
        }
        SaslState::Complete => illegal(),
        SaslState::Handshake if cx.version == 0 => {
            *state = SaslState::Failed;
            Answer::Final(
                response
                    .with_error_code(ErrorCode::UnsupportedVersion.code())
                    .into(),
            )
        }
        SaslState::Handshake => match sasl.enabled(&request.mechanism) {
            Some(m) => {
                *state = SaslState::Authenticate(m);
                Answer::body(response)
            }
            None => {
                tracing::debug!(
                    mechanism = &*request.mechanism,
                    "unsupported SASL mechanism"
                );
                *state = SaslState::Failed;
                Answer::Final(
                    response
                        .with_error_code(ErrorCode::UnsupportedSaslMechanism.code())
                        .into(),
                )
            }
        },
        // The dispatcher admits a SaslHandshake only in the states above.
        _ => {
            *state = SaslState::Failed;
            Answer::Close
        }
    })
}
