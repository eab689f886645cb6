//! ApiVersions (18): the versions Rill serves, straight from rill-protocol's registry.
//!
//! An unsupported *request* version never reaches here: the dispatcher answers it with error 35
//! and a v0 body, using [`unsupported_version_response`].

use rill_protocol::api_registry::api_versions_response;
use rill_protocol::kafka_protocol::messages::ApiVersionsResponse;
use rill_protocol::ErrorCode;

/// This API's entry in the registry (`rill_protocol::for_each_api!`).
pub async fn serve<B: super::Broker>(
    _broker: &B,
    cx: super::RequestContext<'_>,
    _request: rill_protocol::kafka_protocol::messages::ApiVersionsRequest,
) -> super::Answer {
    super::Answer::body(handle(cx.version))
}

/// The answer to a supported ApiVersions request.
pub fn handle(version: i16) -> ApiVersionsResponse {
    api_versions_response(version, ErrorCode::None)
}

/// The answer to an ApiVersions request at a version we do not speak: error 35, v0 body.
pub fn unsupported_version_response() -> ApiVersionsResponse {
    api_versions_response(0, ErrorCode::UnsupportedVersion)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rill_protocol::kafka_protocol::messages::ApiKey;

    #[test]
    fn lists_produce_and_fetch_ranges_librdkafka_needs() {
        let r = handle(3);
        assert_eq!(r.error_code, 0);
        let range = |k: ApiKey| {
            let v = r.api_keys.iter().find(|v| v.api_key == k as i16).unwrap();
            (v.min_version, v.max_version)
        };
        let (min, max) = range(ApiKey::Produce);
        assert!(
            min <= 3 && max >= 7,
            "Produce v3..7 needed for record batches v2"
        );
        let (min, max) = range(ApiKey::Fetch);
        assert!(min <= 4 && max >= 11);
        assert_eq!(r.api_keys.len(), rill_protocol::api_registry::ENTRIES.len());
    }

    #[test]
    fn unsupported_version_gets_error_35() {
        let r = unsupported_version_response();
        assert_eq!(r.error_code, 35);
        assert!(!r.api_keys.is_empty());
    }
}
