//! Kafka's own JSON message specs, pinned in `protocol/specs/`, parsed into a field tree.
//!
//! The codec (`kafka_protocol`) is generated from the same specs; this tree exists so that
//! [`crate::length_guard`] can walk a request's bytes *before* the codec allocates for the
//! counts it reads. Specs come from apache/kafka commit 1eb7644349cb07139d6a3c1ad1986979647cac99
//! (clients/src/main/resources/common/message, Apache-2.0); every advertised range is inside
//! their `validVersions` (a unit test checks it). The share group APIs' specs (KIP-932:
//! ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge) are Kafka 4.x's, from
//! after v0 (4.0's early access) was removed; that commit predates them.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

use crate::kafka_protocol::messages::ApiKey;

/// An inclusive version range as the specs write it: "3+", "0-2", "5", "none".
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    /// Lowest version (inclusive).
    pub min: i16,
    /// Highest version (inclusive).
    pub max: i16,
}

impl Versions {
    /// The empty range ("none").
    pub const NONE: Versions = Versions { min: 1, max: 0 };

    /// Parses the spec notation; `None` for anything else.
    pub fn parse(text: &str) -> Option<Versions> {
        let text = text.trim();
        if text == "none" {
            return Some(Versions::NONE);
        }
        if let Some(min) = text.strip_suffix('+') {
            return Some(Versions {
                min: min.parse().ok()?,
                max: i16::MAX,
            });
        }
        if let Some((min, max)) = text.split_once('-') {
            return Some(Versions {
                min: min.parse().ok()?,
                max: max.parse().ok()?,
            });
        }
        let only = text.parse().ok()?;
        Some(Versions {
            min: only,
            max: only,
        })
    }

    /// Whether `version` is in the range.
    pub fn contains(&self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

/// The wire shape of a field's type.
#[derive(Clone, Debug, PartialEq)]
pub enum FieldType {
    /// bool, int8..int64, uint16/32, float64, uuid: this many bytes.
    Fixed(usize),
    /// string: INT16 length (or compact varint length when flexible).
    String,
    /// bytes and records: INT32 length (or compact varint length when flexible).
    Bytes,
    /// An array of the inner type: INT32 count (or compact varint count when flexible).
    Array(Box<FieldType>),
    /// A nested structure with its own fields (and tag section when flexible).
    Struct(Vec<Field>),
}

/// One field of a message or struct.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// Spec name (for error messages).
    pub name: String,
    /// Wire shape.
    pub ty: FieldType,
    /// Versions in which the field exists.
    pub versions: Versions,
    /// Versions in which the field is a tagged field (lives in the tag section).
    pub tagged_versions: Versions,
    /// The tag number, for tagged fields.
    pub tag: Option<u32>,
    /// Field-level flexibility override (RequestHeader.ClientId is "none").
    pub flexible_versions: Option<Versions>,
    /// The spec's type name without `[]` ("int16", "uint16", "records", a struct's name...):
    /// what a request generator needs beyond the wire shape (tests/livefuzz).
    pub type_name: String,
    /// The spec's `entityType` ("topicName", "groupId", "transactionalId"...), if any.
    pub entity_type: Option<String>,
    /// Versions in which the field may be null.
    pub nullable_versions: Versions,
}

/// A parsed request spec.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageSpec {
    /// Versions the spec defines.
    pub valid_versions: Versions,
    /// Versions that use compact encodings and tag sections.
    pub flexible_versions: Versions,
    /// Top-level fields.
    pub fields: Vec<Field>,
}

/// (api key, pinned spec text) for every API in the registry ([`crate::for_each_api!`]).
macro_rules! request_specs {
    ($($name:ident $min:literal ..= $max:literal $(decodes $from:literal ..)? => $handler:ident,)*) => {
        const REQUEST_SPECS: &[(ApiKey, &str)] = &[$((
            ApiKey::$name,
            include_str!(concat!("../specs/", stringify!($name), "Request.json")),
        ),)*];
    };
}
crate::for_each_api!(request_specs);

/// The pinned request-header spec.
const REQUEST_HEADER_SPEC: &str = include_str!("../specs/RequestHeader.json");

/// The parsed spec of `api_key`'s request, if pinned. Parsed once per process.
pub fn request_spec(api_key: ApiKey) -> Option<&'static MessageSpec> {
    static SPECS: OnceLock<HashMap<i16, MessageSpec>> = OnceLock::new();
    let specs = SPECS.get_or_init(|| {
        REQUEST_SPECS
            .iter()
            .map(|(key, text)| (*key as i16, parse_spec(text).expect("pinned spec parses")))
            .collect()
    });
    specs.get(&(api_key as i16))
}

/// The consumer protocol's subscription (JoinGroup member metadata of `protocol_type`
/// "consumer"), for checking a client's metadata before it is decoded.
pub fn consumer_subscription_spec() -> &'static MessageSpec {
    static SPEC: OnceLock<MessageSpec> = OnceLock::new();
    SPEC.get_or_init(|| {
        parse_spec(include_str!("../specs/ConsumerProtocolSubscription.json"))
            .expect("pinned subscription spec parses")
    })
}

/// The parsed request-header spec.
pub fn request_header_spec() -> &'static MessageSpec {
    static SPEC: OnceLock<MessageSpec> = OnceLock::new();
    SPEC.get_or_init(|| parse_spec(REQUEST_HEADER_SPEC).expect("pinned header spec parses"))
}

/// Parses one spec file (JSON with `//` comments).
pub fn parse_spec(text: &str) -> Result<MessageSpec, String> {
    let json: Value = serde_json::from_str(&strip_comments(text)).map_err(|e| e.to_string())?;
    let mut common = HashMap::new();
    for s in json["commonStructs"].as_array().into_iter().flatten() {
        let name = s["name"].as_str().ok_or("commonStruct without name")?;
        common.insert(name.to_owned(), s["fields"].clone());
    }
    Ok(MessageSpec {
        valid_versions: versions_of(&json, "validVersions")?,
        flexible_versions: versions_of(&json, "flexibleVersions")?,
        fields: parse_fields(&json["fields"], &common)?,
    })
}

fn versions_of(json: &Value, key: &str) -> Result<Versions, String> {
    let text = json[key].as_str().ok_or_else(|| format!("missing {key}"))?;
    Versions::parse(text).ok_or_else(|| format!("bad {key}: {text}"))
}

fn optional_versions(json: &Value, key: &str) -> Result<Option<Versions>, String> {
    match json.get(key) {
        None => Ok(None),
        Some(_) => versions_of(json, key).map(Some),
    }
}

fn parse_fields(json: &Value, common: &HashMap<String, Value>) -> Result<Vec<Field>, String> {
    let list = json.as_array().ok_or("fields is not an array")?;
    list.iter().map(|f| parse_field(f, common)).collect()
}

fn parse_field(json: &Value, common: &HashMap<String, Value>) -> Result<Field, String> {
    let name = json["name"]
        .as_str()
        .ok_or("field without name")?
        .to_owned();
    let type_name = json["type"]
        .as_str()
        .ok_or_else(|| format!("{name}: no type"))?
        .trim();
    let tag = json
        .get("tag")
        .and_then(Value::as_u64)
        .map(u32::try_from)
        .transpose();
    Ok(Field {
        ty: parse_type(type_name, json, common).map_err(|e| format!("{name}: {e}"))?,
        versions: versions_of(json, "versions")?,
        tagged_versions: optional_versions(json, "taggedVersions")?.unwrap_or(Versions::NONE),
        tag: tag.map_err(|e| format!("{name}: tag {e}"))?,
        flexible_versions: optional_versions(json, "flexibleVersions")?,
        type_name: type_name.trim_start_matches("[]").to_owned(),
        entity_type: json["entityType"].as_str().map(str::to_owned),
        nullable_versions: optional_versions(json, "nullableVersions")?.unwrap_or(Versions::NONE),
        name,
    })
}

fn parse_type(
    type_name: &str,
    json: &Value,
    common: &HashMap<String, Value>,
) -> Result<FieldType, String> {
    if let Some(inner) = type_name.strip_prefix("[]") {
        return Ok(FieldType::Array(Box::new(parse_type(inner, json, common)?)));
    }
    let fixed = |n| Ok(FieldType::Fixed(n));
    match type_name {
        "bool" | "int8" => fixed(1),
        "int16" | "uint16" => fixed(2),
        "int32" | "uint32" => fixed(4),
        "int64" | "float64" => fixed(8),
        "uuid" => fixed(16),
        "string" => Ok(FieldType::String),
        "bytes" | "records" => Ok(FieldType::Bytes),
        _ if json.get("fields").is_some() => {
            Ok(FieldType::Struct(parse_fields(&json["fields"], common)?))
        }
        name => match common.get(name) {
            Some(fields) => Ok(FieldType::Struct(parse_fields(fields, common)?)),
            None => Err(format!("unknown type {name}")),
        },
    }
}

/// Removes `//` comments that are outside JSON strings.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        out.push_str(&line[..comment_start(line).unwrap_or(line.len())]);
        out.push('\n');
    }
    out
}

fn comment_start(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_string => i += 1,
            b'"' => in_string = !in_string,
            b'/' if !in_string && bytes.get(i + 1) == Some(&b'/') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api_registry::ENTRIES;

    #[test]
    fn versions_notation() {
        assert_eq!(
            Versions::parse("3+"),
            Some(Versions {
                min: 3,
                max: i16::MAX
            })
        );
        assert_eq!(Versions::parse("0-2"), Some(Versions { min: 0, max: 2 }));
        assert_eq!(Versions::parse("5"), Some(Versions { min: 5, max: 5 }));
        assert!(!Versions::parse("none").unwrap().contains(0));
        assert_eq!(Versions::parse("x"), None);
    }

    #[test]
    fn every_registry_entry_has_a_spec_covering_its_range() {
        for e in ENTRIES {
            let spec = request_spec(e.api_key).unwrap_or_else(|| panic!("{:?} spec", e.api_key));
            assert!(
                spec.valid_versions.contains(e.decodable_min),
                "{:?}",
                e.api_key
            );
            assert!(
                spec.valid_versions.contains(e.advertised_max),
                "{:?}",
                e.api_key
            );
        }
    }

    #[test]
    fn header_client_id_is_never_compact() {
        let header = request_header_spec();
        let client_id = header.fields.iter().find(|f| f.name == "ClientId").unwrap();
        assert_eq!(client_id.flexible_versions, Some(Versions::NONE));
    }

    #[test]
    fn comments_outside_strings_only() {
        assert_eq!(comment_start(r#"{ "a": "http://x" } // c"#), Some(20));
        assert_eq!(comment_start(r#""a\"//b""#), None);
    }
}
