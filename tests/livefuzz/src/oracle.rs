//! What a response must look like to the client that sent the case: its correlation id, then a
//! header and body that the client-side codec decodes at the request's version with no bytes
//! left over (a response a client cannot parse drops its connection, or worse, misreads it).

use bytes::Bytes;
use rill_protocol::api_registry;
use rill_protocol::kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use rill_protocol::kafka_protocol::protocol::Decodable;

use crate::case::Case;

/// The correlation id of a response frame (the bytes after its size prefix).
pub fn correlation_id(response: &[u8]) -> Option<i32> {
    response.first_chunk::<4>().map(|b| i32::from_be_bytes(*b))
}

/// Checks `response` (after its size prefix) as the answer to `case`.
pub fn check_response(case: &Case, response: &[u8]) -> Result<(), String> {
    let api = ApiKey::try_from(case.api_key)
        .map_err(|_| format!("answered an unknown api key {}", case.api_key))?;
    let decodes = api_registry::entry(api).is_some_and(|e| e.decodes(case.version));
    // An ApiVersions the broker cannot decode is answered with a v0 body (UNSUPPORTED_VERSION).
    let version = if api == ApiKey::ApiVersions && !decodes {
        0
    } else {
        case.version
    };
    if !decodes && api != ApiKey::ApiVersions {
        return Err(format!(
            "{api:?} v{} is not decodable, yet was answered",
            case.version
        ));
    }
    let mut buf = Bytes::copy_from_slice(response);
    ResponseHeader::decode(&mut buf, api.response_header_version(version))
        .map_err(|e| format!("{api:?} v{version}: response header undecodable: {e:#}"))?;
    ResponseKind::decode(api, &mut buf, version)
        .map_err(|e| format!("{api:?} v{version}: response body undecodable: {e:#}"))?;
    if !buf.is_empty() {
        return Err(format!(
            "{api:?} v{version}: {} bytes after the response body",
            buf.len()
        ));
    }
    Ok(())
}
