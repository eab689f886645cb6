//! Response encoding: size prefix + response header (v0 or v1) + body.
//!
//! The header version comes from the generated specs (`ApiKey::response_header_version`), which
//! already encode the ApiVersions exception: its response header is always v0 (no tag section)
//! so that a client that does not yet know the broker's versions can parse it.

use bytes::{BufMut, BytesMut};

use crate::frame::SIZE_PREFIX_BYTES;
use crate::kafka_protocol::messages::{ApiKey, ResponseKind};

/// Why a response could not be encoded. Always a bug in the caller (wrong version for a field
/// it set, or a body that does not match the api key); the output buffer is left unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The codec refused the body at this version.
    #[error("cannot encode {api_key:?} v{api_version} response: {reason}")]
    Codec {
        /// The API.
        api_key: ApiKey,
        /// The version.
        api_version: i16,
        /// What the codec said.
        reason: String,
    },
    /// The encoded response does not fit the i32 size prefix.
    #[error("response of {bytes} bytes exceeds the i32 size prefix")]
    TooLarge {
        /// Encoded size.
        bytes: usize,
    },
}

/// Appends one whole response frame to `out`: size prefix, header, body.
///
/// On error nothing is appended.
pub fn encode_response(
    out: &mut BytesMut,
    correlation_id: i32,
    api_key: ApiKey,
    api_version: i16,
    body: &ResponseKind,
) -> Result<(), EncodeError> {
    let start = out.len();
    out.put_i32(0); // size, patched below
    put_response_header(
        out,
        correlation_id,
        api_key.response_header_version(api_version),
    );
    if let Err(e) = body.encode(out, api_version) {
        out.truncate(start);
        let reason = format!("{e:#}");
        return Err(EncodeError::Codec {
            api_key,
            api_version,
            reason,
        });
    }
    patch_size_prefix(out, start)
}

/// Appends the answer to an ApiVersions request at a version Rill does not support:
/// error 35 (UNSUPPORTED_VERSION) with a v0 body listing the ranges, so the client retries
/// with a version it now knows instead of falling back to pre-0.10 protocol.
pub fn encode_api_versions_fallback(
    out: &mut BytesMut,
    correlation_id: i32,
    implemented: impl Fn(ApiKey) -> bool,
) -> Result<(), EncodeError> {
    let body = crate::api_registry::api_versions_response_for(
        0,
        crate::ErrorCode::UnsupportedVersion,
        implemented,
    );
    encode_response(
        out,
        correlation_id,
        ApiKey::ApiVersions,
        0,
        &ResponseKind::ApiVersions(body),
    )
}

/// Writes a response header: v0 = correlation id; v1 adds an EMPTY tag section (one 0 byte).
///
/// Rill never writes response-header tags: librdkafka < 2.2 mis-skips non-empty ones.
pub fn put_response_header(out: &mut BytesMut, correlation_id: i32, header_version: i16) {
    assert!(
        header_version == 0 || header_version == 1,
        "response header v{header_version}"
    );
    out.put_i32(correlation_id);
    if header_version >= 1 {
        out.put_u8(0);
    }
}

/// Fills the 4-byte size prefix at `start` with the number of bytes that follow it.
pub(crate) fn patch_size_prefix(out: &mut BytesMut, start: usize) -> Result<(), EncodeError> {
    let body_bytes = out.len() - start - SIZE_PREFIX_BYTES;
    let Ok(size) = i32::try_from(body_bytes) else {
        out.truncate(start);
        return Err(EncodeError::TooLarge { bytes: body_bytes });
    };
    out[start..start + SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_registry::api_versions_response;
    use crate::kafka_protocol::messages::{MetadataResponse, ResponseHeader};
    use crate::kafka_protocol::protocol::Decodable;
    use crate::ErrorCode;
    use bytes::{Buf, Bytes};

    fn split_frame(out: &BytesMut) -> Bytes {
        let mut frame = Bytes::copy_from_slice(out);
        let size = frame.get_i32();
        assert_eq!(usize::try_from(size).unwrap(), frame.len());
        frame
    }

    #[test]
    fn api_versions_v3_body_still_gets_header_v0() {
        let body = ResponseKind::ApiVersions(api_versions_response(3, ErrorCode::None));
        let mut out = BytesMut::new();
        encode_response(&mut out, 42, ApiKey::ApiVersions, 3, &body).unwrap();
        let mut frame = split_frame(&out);
        assert_eq!(frame.get_i32(), 42);
        assert_eq!(
            frame.get_i16(),
            0,
            "error code follows correlation id: no tag byte"
        );
        let mut frame = split_frame(&out);
        frame.advance(4);
        let decoded = ResponseKind::decode(ApiKey::ApiVersions, &mut frame, 3).unwrap();
        assert_eq!(decoded, body);
    }

    /// Trap 4: librdkafka < 2.2 mis-skips non-empty tag sections (seen for real with tansu).
    #[test]
    fn api_versions_v3_tag_sections_are_all_empty() {
        let body = ResponseKind::ApiVersions(api_versions_response(3, ErrorCode::None));
        let mut out = BytesMut::new();
        encode_response(&mut out, 1, ApiKey::ApiVersions, 3, &body).unwrap();
        let entries = crate::api_registry::ENTRIES.len();
        // size, correlation id, error, varint count, entries (key, min, max, tags), throttle, tags
        assert!(entries < 127, "count fits one varint byte");
        assert_eq!(out.len(), 4 + 4 + 2 + 1 + entries * 7 + 4 + 1);
        assert_eq!(out[out.len() - 1], 0, "empty top-level tag section");
        for entry in out[11..11 + entries * 7].chunks(7) {
            assert_eq!(entry[6], 0, "empty per-entry tag section");
        }
    }

    #[test]
    fn unsupported_version_fallback_is_v0_with_error_35() {
        let body =
            ResponseKind::ApiVersions(api_versions_response(0, ErrorCode::UnsupportedVersion));
        let mut out = BytesMut::new();
        encode_response(&mut out, 1, ApiKey::ApiVersions, 0, &body).unwrap();
        let mut frame = split_frame(&out);
        assert_eq!(frame.get_i32(), 1);
        assert_eq!(frame.get_i16(), 35);
        let count = frame.get_i32();
        assert_eq!(
            usize::try_from(count).unwrap(),
            crate::api_registry::ENTRIES.len()
        );
        assert_eq!(
            frame.len(),
            6 * crate::api_registry::ENTRIES.len(),
            "v0 entries carry no tags"
        );
    }

    #[test]
    fn fallback_helper_matches_manual_encoding() {
        let mut manual = BytesMut::new();
        let body =
            ResponseKind::ApiVersions(api_versions_response(0, ErrorCode::UnsupportedVersion));
        encode_response(&mut manual, 4, ApiKey::ApiVersions, 0, &body).unwrap();
        let mut helper = BytesMut::new();
        encode_api_versions_fallback(&mut helper, 4, |_| true).unwrap();
        assert_eq!(helper, manual);
    }

    #[test]
    fn flexible_response_gets_header_v1_with_empty_tags() {
        let body = ResponseKind::Metadata(MetadataResponse::default());
        let mut out = BytesMut::new();
        encode_response(&mut out, 9, ApiKey::Metadata, 12, &body).unwrap();
        let mut frame = split_frame(&out);
        let header = ResponseHeader::decode(&mut frame, 1).unwrap();
        assert_eq!(header.correlation_id, 9);
        assert!(header.unknown_tagged_fields.is_empty());
        assert_eq!(
            ResponseKind::decode(ApiKey::Metadata, &mut frame, 12).unwrap(),
            body
        );
    }

    #[test]
    fn codec_error_leaves_buffer_unchanged() {
        let body = ResponseKind::Metadata(MetadataResponse::default());
        let mut out = BytesMut::from(&b"keep"[..]);
        let err = encode_response(&mut out, 9, ApiKey::Metadata, 99, &body).unwrap_err();
        assert!(matches!(
            err,
            EncodeError::Codec {
                api_version: 99,
                ..
            }
        ));
        assert_eq!(&out[..], b"keep");
    }
}
