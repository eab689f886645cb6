//! ApiVersions: Rill's advertised range of every API it implements against Kafka's, and the
//! response itself at every version.

use rill_protocol::kafka_protocol::messages::{ApiKey, ApiVersionsRequest, RequestKind};

use super::{sb, Case};
use crate::pair::{Pair, Peer};

pub const CASES: &[Case] = &[
    ("api_versions_ranges", ranges),
    ("api_versions", each_version),
];

/// Every API either broker advertises: the same (min, max), or a difference per edge.
fn ranges(pair: &mut Pair) -> anyhow::Result<()> {
    let kafka = pair.ranges[&Peer::Kafka].clone();
    let rill = pair.ranges[&Peer::Rill].clone();
    let keys: std::collections::BTreeSet<i16> = kafka.keys().chain(rill.keys()).copied().collect();
    for key in keys {
        let name = ApiKey::try_from(key).map_or(format!("key{key}"), |k| format!("{k:?}"));
        let path = format!("api_keys[{name}]");
        match (kafka.get(&key), rill.get(&key)) {
            (Some(k), Some(r)) => {
                if k.0 != r.0 {
                    pair.note(
                        "ApiVersions",
                        3,
                        &format!("{path}.min_version"),
                        Some(k.0.to_string()),
                        Some(r.0.to_string()),
                    );
                }
                if k.1 != r.1 {
                    pair.note(
                        "ApiVersions",
                        3,
                        &format!("{path}.max_version"),
                        Some(k.1.to_string()),
                        Some(r.1.to_string()),
                    );
                }
            }
            (k, r) => {
                let show = |v: Option<&(i16, i16)>| v.map(|(a, b)| format!("{a}..={b}"));
                pair.note("ApiVersions", 3, &path, show(k), show(r));
            }
        }
    }
    Ok(())
}

/// The whole response at every version (its api_keys are the ranges case's).
fn each_version(pair: &mut Pair) -> anyhow::Result<()> {
    pair.ignore(&["api_keys"]);
    for version in pair.versions(ApiKey::ApiVersions) {
        let mut request = ApiVersionsRequest::default();
        if version >= 3 {
            request = request
                .with_client_software_name(sb("rill-kdiff"))
                .with_client_software_version(sb("1.0"));
        }
        pair.both(version, |_| RequestKind::ApiVersions(request.clone()))?;
    }
    Ok(())
}
