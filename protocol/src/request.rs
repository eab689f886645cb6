//! Request decoding: header (v0-v2), version check against the registry, then the body.
//!
//! Order matters for answering bad input well: the fixed 8 bytes (api key, version,
//! correlation id) are read first so that every later failure can still be answered or logged
//! with the correlation id; the version is checked against [`crate::api_registry`] before any
//! body byte is parsed; and every length in the body is checked against the frame
//! ([`crate::length_guard`]) before the codec allocates for it.

use bytes::{Buf, Bytes, BytesMut};

use crate::api_registry;
use crate::kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use crate::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use crate::length_guard;
use crate::ErrorCode;

/// Bytes of api_key + api_version + correlation_id, present in every request header version.
pub const HEADER_FIXED_BYTES: usize = 8;

/// A decoded request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The header as sent (client id, unknown tags).
    pub header: RequestHeader,
    /// The API, resolved from `header.request_api_key`.
    pub api_key: ApiKey,
    /// The version the body was decoded at.
    pub api_version: i16,
    /// Echoed in the response header.
    pub correlation_id: i32,
    /// The decoded body.
    pub body: RequestKind,
}

impl Request {
    /// A request as a client sends it: header v1/v2 (whichever `api_key` at `api_version`
    /// calls for) carrying `client_id`.
    pub fn new(
        api_key: ApiKey,
        api_version: i16,
        correlation_id: i32,
        client_id: &'static str,
        body: RequestKind,
    ) -> Self {
        let header = RequestHeader::default()
            .with_request_api_key(api_key as i16)
            .with_request_api_version(api_version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(client_id)));
        Request {
            header,
            api_key,
            api_version,
            correlation_id,
            body,
        }
    }

    /// The frame body (header then message, no size prefix): what [`decode_request`] reads.
    /// For clients, tests and tools; the broker itself only decodes requests.
    pub fn encode(&self) -> Result<BytesMut, String> {
        let mut out = BytesMut::new();
        self.header
            .encode(
                &mut out,
                self.api_key.request_header_version(self.api_version),
            )
            .map_err(|e| format!("header: {e:#}"))?;
        self.body
            .encode(&mut out, self.api_version)
            .map_err(|e| format!("body: {e:#}"))?;
        Ok(out)
    }
}

/// Why a request frame could not be decoded, with everything that *was* learned from it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// Fewer than 8 bytes: not even a correlation id to answer to. Close the connection.
    #[error("request of {len} bytes is shorter than the fixed header")]
    Truncated {
        /// Bytes received.
        len: usize,
    },
    /// An api key Rill does not know or does not serve. Kafka closes the connection.
    #[error("unknown or unsupported api key {api_key} (v{api_version}, correlation id {correlation_id})")]
    UnknownApiKey {
        /// From the header.
        correlation_id: i32,
        /// The raw key.
        api_key: i16,
        /// The raw version.
        api_version: i16,
    },
    /// A known API at a version outside the registry (or advertised but not decodable).
    /// For ApiVersions the server must answer error 35 with a v0 body; for others, close.
    #[error("{api_key:?} v{api_version} is not supported (correlation id {correlation_id})")]
    UnsupportedVersion {
        /// From the header.
        correlation_id: i32,
        /// The API.
        api_key: ApiKey,
        /// The requested version.
        api_version: i16,
    },
    /// A supported API and version whose header or body does not parse.
    #[error(
        "malformed {api_key:?} v{api_version} request (correlation id {correlation_id}): {reason}"
    )]
    Malformed {
        /// From the header.
        correlation_id: i32,
        /// The API.
        api_key: ApiKey,
        /// The version.
        api_version: i16,
        /// What the decoder said.
        reason: String,
    },
}

impl RequestError {
    /// The correlation id, when the frame was long enough to carry one.
    pub fn correlation_id(&self) -> Option<i32> {
        match self {
            RequestError::Truncated { .. } => None,
            RequestError::UnknownApiKey { correlation_id, .. }
            | RequestError::UnsupportedVersion { correlation_id, .. }
            | RequestError::Malformed { correlation_id, .. } => Some(*correlation_id),
        }
    }

    /// True when the server must answer ApiVersions error 35 with a v0 body.
    pub fn needs_api_versions_fallback(&self) -> bool {
        matches!(
            self,
            RequestError::UnsupportedVersion {
                api_key: ApiKey::ApiVersions,
                ..
            }
        )
    }

    /// The Kafka error code that best describes this failure.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            RequestError::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
            RequestError::UnknownApiKey { .. } => ErrorCode::UnsupportedVersion,
            RequestError::Truncated { .. } | RequestError::Malformed { .. } => {
                ErrorCode::InvalidRequest
            }
        }
    }
}

/// The fixed first 8 bytes of every request header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct HeaderPrefix {
    /// Raw api key.
    pub api_key: i16,
    /// Raw api version.
    pub api_version: i16,
    /// Correlation id.
    pub correlation_id: i32,
}

/// Reads the fixed 8 bytes without consuming them.
pub fn peek_header_prefix(frame_body: &[u8]) -> Option<HeaderPrefix> {
    let mut fixed = frame_body.get(..HEADER_FIXED_BYTES)?;
    Some(HeaderPrefix {
        api_key: fixed.get_i16(),
        api_version: fixed.get_i16(),
        correlation_id: fixed.get_i32(),
    })
}

/// Decodes one request from a frame body (the bytes after the 4-byte size prefix).
///
/// Never panics on any input; see [`RequestError`] for what each failure means.
pub fn decode_request(frame_body: Bytes) -> Result<Request, RequestError> {
    let len = frame_body.len();
    let prefix = peek_header_prefix(&frame_body).ok_or(RequestError::Truncated { len })?;
    let api_key = resolve_api(prefix)?;
    let version = prefix.api_version;
    let malformed = |reason: String| RequestError::Malformed {
        correlation_id: prefix.correlation_id,
        api_key,
        api_version: version,
        reason,
    };
    let mut buf = frame_body;
    let header_version = api_key.request_header_version(version);
    let header = decode_request_header(&mut buf, header_version).map_err(&malformed)?;
    length_guard::check_request_body(api_key, version, &buf)
        .map_err(|e| malformed(e.to_string()))?;
    let body = decode_body(api_key, &mut buf, version).map_err(&malformed)?;
    Ok(Request {
        header,
        api_key,
        api_version: version,
        correlation_id: prefix.correlation_id,
        body,
    })
}

/// Maps the raw key/version to a registered, decodable API or the matching error.
fn resolve_api(prefix: HeaderPrefix) -> Result<ApiKey, RequestError> {
    let unknown = RequestError::UnknownApiKey {
        correlation_id: prefix.correlation_id,
        api_key: prefix.api_key,
        api_version: prefix.api_version,
    };
    let Ok(api_key) = ApiKey::try_from(prefix.api_key) else {
        return Err(unknown);
    };
    let Some(entry) = api_registry::entry(api_key) else {
        return Err(unknown);
    };
    if !entry.decodes(prefix.api_version) {
        return Err(RequestError::UnsupportedVersion {
            correlation_id: prefix.correlation_id,
            api_key,
            api_version: prefix.api_version,
        });
    }
    Ok(api_key)
}

/// Decodes a request header of `header_version` (0, 1 or 2), consuming it from `buf`.
///
/// v0 has no client id (only ControlledShutdown v0 ever used it); v1 adds the INT16-length
/// nullable client id; v2 adds a tagged-field section (the client id stays INT16-length).
pub fn decode_request_header(
    buf: &mut Bytes,
    header_version: i16,
) -> Result<RequestHeader, String> {
    match header_version {
        0 => {
            let prefix = peek_header_prefix(buf).ok_or("header shorter than 8 bytes")?;
            buf.advance(HEADER_FIXED_BYTES);
            Ok(RequestHeader::default()
                .with_request_api_key(prefix.api_key)
                .with_request_api_version(prefix.api_version)
                .with_correlation_id(prefix.correlation_id)
                .with_client_id(None::<StrBytes>))
        }
        1 | 2 => RequestHeader::decode(buf, header_version).map_err(|e| format!("header: {e:#}")),
        other => Err(format!("request header version {other} does not exist")),
    }
}

/// Decodes the body with the generated codec; a panic inside it becomes an error, not a crash.
fn decode_body(api_key: ApiKey, buf: &mut Bytes, version: i16) -> Result<RequestKind, String> {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        RequestKind::decode(api_key, buf, version)
    }));
    match outcome {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(_) => Err("codec panicked on this input".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
    use bytes::BufMut;

    fn frame(api_key: i16, version: i16, correlation_id: i32, rest: &[u8]) -> Bytes {
        let mut out = BytesMut::new();
        out.put_i16(api_key);
        out.put_i16(version);
        out.put_i32(correlation_id);
        out.put_slice(rest);
        out.freeze()
    }

    fn encoded_request(api_key: ApiKey, version: i16, body: &RequestKind) -> Bytes {
        Request::new(api_key, version, 7, "test", body.clone())
            .encode()
            .unwrap()
            .freeze()
    }

    #[test]
    fn api_versions_v3_round_trip_uses_header_v2() {
        let body = RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("kcat"))
                .with_client_software_version(StrBytes::from_static_str("1.7.1")),
        );
        let req = decode_request(encoded_request(ApiKey::ApiVersions, 3, &body)).unwrap();
        assert_eq!(req.api_key, ApiKey::ApiVersions);
        assert_eq!(req.correlation_id, 7);
        assert_eq!(req.header.client_id.as_deref(), Some("test"));
        assert_eq!(req.body, body);
    }

    #[test]
    fn metadata_v0_to_v12_round_trip() {
        for version in 0..=12 {
            let body = RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![])));
            let req = decode_request(encoded_request(ApiKey::Metadata, version, &body)).unwrap();
            assert_eq!(req.api_version, version);
            assert_eq!(req.body, body);
        }
    }

    #[test]
    fn truncated_has_no_correlation_id() {
        let err = decode_request(Bytes::from_static(&[0, 18, 0])).unwrap_err();
        assert_eq!(err, RequestError::Truncated { len: 3 });
        assert_eq!(err.correlation_id(), None);
    }

    #[test]
    fn unsupported_api_versions_version_asks_for_fallback() {
        let err = decode_request(frame(18, 99, 5, &[])).unwrap_err();
        assert!(err.needs_api_versions_fallback());
        assert_eq!(err.correlation_id(), Some(5));
        assert_eq!(err.error_code(), ErrorCode::UnsupportedVersion);
    }

    #[test]
    fn produce_v2_is_advertised_but_rejected() {
        let err = decode_request(frame(0, 2, 9, &[])).unwrap_err();
        assert!(matches!(
            err,
            RequestError::UnsupportedVersion { api_version: 2, .. }
        ));
        assert!(!err.needs_api_versions_fallback());
    }

    #[test]
    fn unknown_and_unregistered_keys() {
        let err = decode_request(frame(999, 0, 1, &[])).unwrap_err();
        assert!(matches!(
            err,
            RequestError::UnknownApiKey { api_key: 999, .. }
        ));
        let err =
            decode_request(frame(ApiKey::CreateDelegationToken as i16, 2, 1, &[])).unwrap_err();
        assert!(matches!(err, RequestError::UnknownApiKey { .. }));
    }

    #[test]
    fn malformed_body_keeps_correlation_id() {
        // Metadata v1: client id length 0, then a topic array claiming 1_000_000_000 entries.
        let err = decode_request(frame(3, 1, 11, &[0, 0, 0x3b, 0x9a, 0xca, 0x00])).unwrap_err();
        assert!(
            matches!(
                err,
                RequestError::Malformed {
                    correlation_id: 11,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn header_v0_has_no_client_id() {
        let mut buf = frame(7, 0, 3, &[0xAA]);
        let header = decode_request_header(&mut buf, 0).unwrap();
        assert_eq!(header.correlation_id, 3);
        assert_eq!(header.client_id, None);
        assert_eq!(&buf[..], &[0xAA]);
        assert!(decode_request_header(&mut frame(7, 0, 3, &[]), 3).is_err());
    }
}
