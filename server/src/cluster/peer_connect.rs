//! A connection from this broker to another broker's inter-broker listener, made as that
//! listener's security protocol asks ([`PeerClient`]): TCP, then the TLS handshake (SSL,
//! SASL_SSL), then the SASL exchange (SaslHandshake v1, SaslAuthenticate v2: PLAIN or SCRAM),
//! so that every inter-broker request (replica Fetch, WriteTxnMarkers, AddPartitionsToTxn) is
//! sent encrypted and as this broker's principal, as a Kafka broker sends it.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use futures_rustls::client::TlsStream;
use futures_rustls::TlsConnector;
use glommio::net::TcpStream;
use rill_metadata::types::Endpoint;
use rill_protocol::frame::body_len;
use rill_protocol::kafka_protocol::messages::{
    ApiKey, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use rill_protocol::kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use rustls::pki_types::ServerName;

use crate::security::peer_client::{PeerClient, PeerLogin};
use crate::security::sasl::Mechanism;
use crate::security::scram_client::ScramClient;

/// The SaslHandshake version sent: v1, whose tokens then travel in SaslAuthenticate.
const SASL_HANDSHAKE_VERSION: i16 = 1;
/// The SaslAuthenticate version sent (flexible; the session lifetime in the answer).
const SASL_AUTHENTICATE_VERSION: i16 = 2;
/// Largest answer taken during the handshake.
const HANDSHAKE_ANSWER_BYTES_MAX: usize = 1 << 20;

/// Why a connection or an exchange on it failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The socket failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The TCP connection or the TLS handshake failed.
    #[error("connect: {0}")]
    Connect(String),
    /// The other broker refused this broker's login.
    #[error("SASL authentication: {0}")]
    Authentication(String),
    /// The request could not be encoded.
    #[error("encode: {0}")]
    Encode(String),
    /// The answer is not what was asked.
    #[error("decode: {0}")]
    Decode(String),
    /// The answer belongs to another request.
    #[error("answer to correlation id {got}, asked {sent}")]
    Correlation {
        /// The id sent.
        sent: i32,
        /// The id answered.
        got: i32,
    },
}

/// A connection to a peer broker: plaintext or TLS.
pub enum PeerStream {
    /// PLAINTEXT and SASL_PLAINTEXT.
    Plain(TcpStream),
    /// SSL and SASL_SSL.
    Tls(Box<TlsStream<TcpStream>>),
}

/// An open connection and its request counter.
pub struct PeerConnection {
    stream: PeerStream,
    correlation_id: i32,
    client_id: StrBytes,
    /// When it was opened, and the SASL session lifetime the peer answered (KIP-368; `None`:
    /// none), for [`PeerConnection::reusable`].
    opened: std::time::Instant,
    session_lifetime: Option<Duration>,
}

/// How long a connection is used at most, whatever its SASL session lifetime.
pub const CONNECTION_AGE_MAX: Duration = Duration::from_secs(300);

/// Connects to `endpoint` as `client` says, bounded by `timeout` (TCP, TLS and SASL together);
/// `client_id` is what the peer's logs show.
pub async fn connect(
    client: &PeerClient,
    endpoint: &Endpoint,
    client_id: &str,
    timeout: Duration,
) -> Result<PeerConnection, PeerError> {
    let opening = open(client, endpoint, client_id);
    match glommio::timer::timeout(timeout, async { Ok(opening.await) }).await {
        Ok(result) => result,
        Err(_) => Err(PeerError::Connect(format!(
            "{}:{} did not finish connecting within {timeout:?}",
            endpoint.host, endpoint.port
        ))),
    }
}

async fn open(
    client: &PeerClient,
    endpoint: &Endpoint,
    client_id: &str,
) -> Result<PeerConnection, PeerError> {
    let address = format!("{}:{}", endpoint.host, endpoint.port);
    let tcp = TcpStream::connect(address.as_str())
        .await
        .map_err(|e| PeerError::Connect(format!("{address}: {e}")))?;
    tcp.set_nodelay(true)
        .map_err(|e| PeerError::Connect(e.to_string()))?;
    let stream = match &client.tls {
        None => PeerStream::Plain(tcp),
        Some(config) => PeerStream::Tls(Box::new(tls(config, &endpoint.host, tcp).await?)),
    };
    let mut connection = PeerConnection {
        stream,
        correlation_id: 0,
        client_id: StrBytes::from_string(client_id.to_string()),
        opened: std::time::Instant::now(),
        session_lifetime: None,
    };
    if let Some(login) = &client.login {
        connection.authenticate(login).await?;
    }
    Ok(connection)
}

async fn tls(
    config: &Arc<rustls::ClientConfig>,
    host: &str,
    tcp: TcpStream,
) -> Result<TlsStream<TcpStream>, PeerError> {
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| PeerError::Connect(format!("{host} is no TLS server name: {e}")))?;
    TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| PeerError::Connect(format!("TLS handshake with {host}: {e}")))
}

impl PeerConnection {
    /// Sends `request` at `version` and waits for its answer (at most `answer_max` bytes).
    pub async fn call<R: Request>(
        &mut self,
        version: i16,
        request: &R,
        answer_max: usize,
    ) -> Result<R::Response, PeerError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let api_key = ApiKey::try_from(R::KEY).map_err(|_| PeerError::Encode("api key".into()))?;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::new();
        frame.extend_from_slice(&[0; 4]);
        header
            .encode(&mut frame, api_key.request_header_version(version))
            .and_then(|()| request.encode(&mut frame, version))
            .map_err(|e| PeerError::Encode(format!("{e:#}")))?;
        let size =
            i32::try_from(frame.len() - 4).map_err(|_| PeerError::Encode("too large".into()))?;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        self.stream.write_all(&frame).await?;
        self.stream.flush().await?;

        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).await?;
        let len = body_len(i32::from_be_bytes(prefix), answer_max)
            .map_err(|e| PeerError::Decode(e.to_string()))?;
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await?;
        let mut body = Bytes::from(body);
        let answer = ResponseHeader::decode(&mut body, api_key.response_header_version(version))
            .map_err(|e| PeerError::Decode(format!("header: {e:#}")))?;
        if answer.correlation_id != correlation_id {
            return Err(PeerError::Correlation {
                sent: correlation_id,
                got: answer.correlation_id,
            });
        }
        let response = R::Response::decode(&mut body, version)
            .map_err(|e| PeerError::Decode(format!("body: {e:#}")))?;
        if body.has_remaining() {
            tracing::debug!(
                left = body.remaining(),
                "peer answer longer than its message"
            );
        }
        Ok(response)
    }

    /// Whether it may take another request: younger than [`CONNECTION_AGE_MAX`] and than half
    /// its SASL session lifetime (a peer closes a connection past it; this one does not
    /// re-authenticate, so it is retired well before).
    pub fn reusable(&self) -> bool {
        let age = self.opened.elapsed();
        age < CONNECTION_AGE_MAX && self.session_lifetime.is_none_or(|l| age < l / 2)
    }

    /// Closes the connection (its TLS session too).
    pub async fn close(mut self) {
        let _ = self.stream.close().await;
    }

    /// Logs in as `login`: SaslHandshake, then the mechanism's SaslAuthenticate tokens.
    async fn authenticate(&mut self, login: &PeerLogin) -> Result<(), PeerError> {
        let handshake = SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(login.mechanism.name()));
        let answer = self
            .call(
                SASL_HANDSHAKE_VERSION,
                &handshake,
                HANDSHAKE_ANSWER_BYTES_MAX,
            )
            .await?;
        if answer.error_code != 0 {
            let offered: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(PeerError::Authentication(format!(
                "{} refused (error {}; the peer offers {offered:?})",
                login.mechanism.name(),
                answer.error_code
            )));
        }
        match login.mechanism {
            // `security::peer_client::login` refuses it at the start.
            Mechanism::OAuthBearer => {
                return Err(PeerError::Authentication(
                    "OAUTHBEARER is not a mechanism this broker logs in with".to_string(),
                ))
            }
            Mechanism::Plain => {
                let token = format!("\0{}\0{}", login.username, login.password);
                self.sasl_token(token.into_bytes()).await?;
            }
            Mechanism::Scram(m) => {
                let (client, first) = ScramClient::start(m, &login.username, &login.password)
                    .map_err(|e| PeerError::Authentication(e.to_string()))?;
                let server_first = self.sasl_token(first).await?;
                let (awaiting, last) = client
                    .server_first(&server_first)
                    .map_err(|e| PeerError::Authentication(e.to_string()))?;
                let server_final = self.sasl_token(last).await?;
                awaiting
                    .server_final(&server_final)
                    .map_err(|e| PeerError::Authentication(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// One SaslAuthenticate round: the server's token back, or why it refused.
    async fn sasl_token(&mut self, token: Vec<u8>) -> Result<Bytes, PeerError> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
        let answer = self
            .call(
                SASL_AUTHENTICATE_VERSION,
                &request,
                HANDSHAKE_ANSWER_BYTES_MAX,
            )
            .await?;
        if answer.error_code != 0 {
            return Err(PeerError::Authentication(format!(
                "error {}: {}",
                answer.error_code,
                answer.error_message.as_deref().unwrap_or("")
            )));
        }
        if let Ok(ms @ 1..) = u64::try_from(answer.session_lifetime_ms) {
            self.session_lifetime = Some(Duration::from_millis(ms));
        }
        Ok(answer.auth_bytes)
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_flush(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            PeerStream::Plain(s) => Pin::new(s).poll_close(cx),
            PeerStream::Tls(s) => Pin::new(s.as_mut()).poll_close(cx),
        }
    }
}
