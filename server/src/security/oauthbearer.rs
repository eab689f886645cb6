//! SASL/OAUTHBEARER (RFC 7628) with unsecured JWTs, as Kafka's broker serves it when no
//! `sasl.server.callback.handler.class` is set (`OAuthBearerUnsecuredValidatorCallbackHandler`):
//! the client-first message `n,[a=authzid],\x01auth=Bearer <token>\x01[key=value\x01...]\x01`,
//! its token a JWS compact form `header.claims.` whose header says `"alg":"none"` and whose
//! signature is empty.
//!
//! The claims checked, with the options of the listener's `OAuthBearerLoginModule` JAAS line:
//! the principal claim (`unsecuredValidatorPrincipalClaimName`, `sub`) a non-blank string; `exp`
//! a number not past and `iat`, if there, a number not in the future (both allowing
//! `unsecuredValidatorAllowableClockSkewMs`, 0); `exp` after `iat`; the scope claim
//! (`unsecuredValidatorScopeClaimName`, `scope`) holding every scope of the space-separated
//! `unsecuredValidatorRequiredScope`. As Kafka's `OAuthBearerUnsecuredJws`, a scope claim that
//! is a string is one scope (trimmed), an array is one scope per element.
//!
//! Nothing here reads a clock: the caller hands in the time. No cryptography is needed (the
//! tokens are unsigned), which is why this mechanism is for development and tests only.

use std::collections::BTreeMap;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use rill_types::{DurationMs, TimestampMs};
use serde_json::{Map, Value};

/// Kafka's class of the OAUTHBEARER login module (the JAAS line's entry).
pub const LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
/// Kafka's validator of unsecured tokens: the only `sasl.server.callback.handler.class` served.
pub const UNSECURED_VALIDATOR: &str = "org.apache.kafka.common.security.oauthbearer.internals.\
                                       unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";

/// RFC 7628's separator, and the client's answer to an error challenge.
const CONTROL_A: u8 = 0x01;

/// Padding optional and trailing bits allowed, as Java's decoders take them.
const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
/// JWS's alphabet (RFC 7515: base64url).
const BASE64_URL: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);
/// The standard alphabet, which Kafka's validator decodes with (`Base64.getDecoder()`).
const BASE64_STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);

/// A listener's validator options, from its OAUTHBEARER JAAS line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatorOptions {
    /// The claim that names the principal (`sub`).
    pub principal_claim: String,
    /// The claim that holds the token's scope (`scope`).
    pub scope_claim: String,
    /// Scopes every token must hold (none by default).
    pub required_scope: Vec<String>,
    /// How far `exp` may be past and `iat` in the future.
    pub clock_skew_ms: DurationMs,
}

impl Default for ValidatorOptions {
    fn default() -> Self {
        ValidatorOptions {
            principal_claim: "sub".to_string(),
            scope_claim: "scope".to_string(),
            required_scope: Vec::new(),
            clock_skew_ms: DurationMs::ZERO,
        }
    }
}

/// A validator option that cannot be used (Kafka's `OAuthBearerConfigException`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    /// `unsecuredValidatorAllowableClockSkewMs` is not a non-negative int.
    #[error("unsecuredValidatorAllowableClockSkewMs must be a non-negative int: {0:?}")]
    ClockSkew(String),
    /// A scope of `unsecuredValidatorRequiredScope` has a character RFC 6749 forbids.
    #[error("Invalid scope value: {0}")]
    Scope(String),
}

impl ValidatorOptions {
    /// The options of a JAAS entry's `unsecuredValidator*` keys (blank ones take the default).
    pub fn from_jaas(options: &BTreeMap<String, String>) -> Result<Self, OptionError> {
        let given = |key: &str| options.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        let mut out = ValidatorOptions::default();
        if let Some(name) = given("unsecuredValidatorPrincipalClaimName") {
            out.principal_claim = name.to_string();
        }
        if let Some(name) = given("unsecuredValidatorScopeClaimName") {
            out.scope_claim = name.to_string();
        }
        if let Some(scope) = given("unsecuredValidatorRequiredScope") {
            for item in scope.split(' ').filter(|s| !s.is_empty()) {
                if !item.bytes().all(scope_char) {
                    return Err(OptionError::Scope(item.to_string()));
                }
                out.required_scope.push(item.to_string());
            }
        }
        if let Some(skew) = given("unsecuredValidatorAllowableClockSkewMs") {
            match skew.parse::<i32>() {
                Ok(ms) if ms >= 0 => out.clock_skew_ms = DurationMs::from(ms),
                _ => return Err(OptionError::ClockSkew(skew.to_string())),
            }
        }
        Ok(out)
    }
}

/// RFC 6749's scope-token characters (`%x21 / %x23-5B / %x5D-7E`): no quote, no backslash.
fn scope_char(b: u8) -> bool {
    matches!(b, 0x21 | 0x23..=0x5B | 0x5D..=0x7E)
}

/// A token that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validated {
    /// The principal claim's value: the connection's `User:` name.
    pub principal: String,
    /// `exp` (Kafka's credential lifetime).
    pub expires_ms: TimestampMs,
}

/// A token that failed validation (Kafka's `OAuthBearerIllegalTokenException`): answered with
/// an error challenge, not closed at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// What was wrong, for the broker's log only.
    pub reason: String,
    /// The required scope (Java's list form, `[a, b]`) when a scope was missing.
    pub scope: Option<String>,
}

impl Invalid {
    fn token(reason: impl Into<String>) -> Self {
        Invalid {
            reason: reason.into(),
            scope: None,
        }
    }

    /// The error challenge's JSON, byte for byte Kafka's (`OAuthBearerSaslServer`):
    /// `{"status":"invalid_token"}`, or `insufficient_scope` with the required scope.
    pub fn challenge(&self) -> String {
        match &self.scope {
            // The scope items hold neither `"` nor `\` (scope_char): nothing to escape.
            Some(scope) => format!("{{\"status\":\"insufficient_scope\", \"scope\":\"{scope}\"}}"),
            None => "{\"status\":\"invalid_token\"}".to_string(),
        }
    }
}

/// Why a client-first message was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientFirstRefusal {
    /// Not RFC 7628's syntax (Kafka's `SaslException`): the client is told only that its
    /// credentials were invalid, and the connection closed.
    Malformed(&'static str),
    /// The token is invalid: answered with [`Invalid::challenge`].
    Invalid(Invalid),
    /// The authorization id is not the token's principal (Kafka tells the client this).
    Authzid(String),
}

/// The parts of a client-first message the broker uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialResponse<'a> {
    /// The `a=` authorization id, as sent (empty if none).
    pub authzid: &'a str,
    /// The bearer token.
    pub token: &'a str,
}

/// Whether `message` is the client's `\x01` answer to an error challenge.
pub fn is_error_acknowledgement(message: &[u8]) -> bool {
    message == [CONTROL_A]
}

/// Reads a client-first message (Kafka's `OAuthBearerClientInitialResponse` grammar). Its
/// extensions (`key=value` pairs other than `auth`) are checked for syntax and ignored, as
/// the unsecured validator accepts every one.
pub fn initial_response(message: &[u8]) -> Result<InitialResponse<'_>, &'static str> {
    const BAD: &str = "Invalid OAUTHBEARER client first message";
    // Every part of the grammar is ASCII.
    let text = std::str::from_utf8(message)
        .ok()
        .filter(|t| t.is_ascii())
        .ok_or(BAD)?;
    let rest = text.strip_prefix("n,").ok_or(BAD)?;
    let (gs2_authzid, rest) = rest.split_once(',').ok_or(BAD)?;
    let authzid = match gs2_authzid {
        "" => "",
        a => a.strip_prefix("a=").filter(|n| sasl_name(n)).ok_or(BAD)?,
    };
    // `\x01 (key=value \x01)* \x01`
    let pairs = rest
        .strip_prefix('\u{1}')
        .and_then(|r| r.strip_suffix('\u{1}'))
        .ok_or(BAD)?;
    let mut auth = None;
    if !pairs.is_empty() {
        let pairs = pairs.strip_suffix('\u{1}').ok_or(BAD)?;
        for pair in pairs.split('\u{1}') {
            let (key, value) = pair.split_once('=').ok_or(BAD)?;
            let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
            let value_ok = !value.is_empty()
                && value
                    .bytes()
                    .all(|b| matches!(b, 0x21..=0x7E | b' ' | b'\t' | b'\r' | b'\n'));
            if !key_ok || !value_ok {
                return Err(BAD);
            }
            if key == "auth" {
                auth = Some(value);
            }
        }
    }
    let auth = auth.ok_or("Invalid OAUTHBEARER client first message: 'auth' not specified")?;
    let token = bearer(auth)?;
    Ok(InitialResponse { authzid, token })
}

/// Kafka's SASLNAME: ASCII 0x01-0x7F but `=` and `,`, or the escapes `=2C` and `=3D` (kept as
/// sent, as Kafka compares the raw text with the principal).
fn sasl_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'=' if matches!(bytes.get(i + 1..i + 3), Some(b"2C" | b"3D")) => i += 3,
            b'=' | b',' | 0 | 0x80.. => return false,
            _ => i += 1,
        }
    }
    !bytes.is_empty()
}

/// `auth`'s value: `<scheme> +<token>`, the scheme `Bearer` in any case, the token RFC 6750's
/// b64token (`[-_~+/.a-zA-Z0-9]+=*`).
fn bearer(auth: &str) -> Result<&str, &'static str> {
    const BAD: &str = "Invalid OAUTHBEARER client first message: invalid 'auth' format";
    let (scheme, token) = auth.split_once(' ').ok_or(BAD)?;
    let token = token.trim_start_matches(' ');
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let b64 = |b: u8| b.is_ascii_alphanumeric() || b"-_~+/.".contains(&b);
    let body = token.trim_end_matches('=');
    if scheme.is_empty() || !scheme.bytes().all(word) || body.is_empty() || !body.bytes().all(b64) {
        return Err(BAD);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("Invalid scheme in OAUTHBEARER client first message");
    }
    Ok(token)
}

/// Evaluates a client-first message at `now_ms` (the wall clock): the validated token, or
/// why it is refused.
pub fn evaluate(
    message: &[u8],
    options: &ValidatorOptions,
    now_ms: TimestampMs,
) -> Result<Validated, ClientFirstRefusal> {
    let first = initial_response(message).map_err(ClientFirstRefusal::Malformed)?;
    let token = validate(first.token, options, now_ms).map_err(ClientFirstRefusal::Invalid)?;
    if !first.authzid.is_empty() && first.authzid != token.principal {
        return Err(ClientFirstRefusal::Authzid(format!(
            "Authentication failed: Client requested an authorization id ({}) that is different \
             from the token's principal name ({})",
            first.authzid, token.principal
        )));
    }
    Ok(token)
}

/// Validates an unsecured JWS at `now_ms` as Kafka's unsecured validator does, its checks in
/// Kafka's order.
pub fn validate(
    token: &str,
    options: &ValidatorOptions,
    now_ms: TimestampMs,
) -> Result<Validated, Invalid> {
    if token.contains("..") {
        return Err(Invalid::token(
            "Malformed compact serialization contains '..'",
        ));
    }
    let parts: Vec<&str> = token.split('.').collect();
    let [header, claims, signature] = parts[..] else {
        return Err(Invalid::token(
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
        ));
    };
    let header = json_object(header)?;
    let claims = json_object(claims)?;
    if header.get("alg").and_then(Value::as_str) != Some("none") {
        return Err(Invalid::token(
            "Unsecured JWS must have 'none' for an algorithm",
        ));
    }
    if !signature.is_empty() {
        return Err(Invalid::token(
            "Unsecured JWS must not contain a digital signature",
        ));
    }
    let scope = scope(&claims, &options.scope_claim)?;
    let exp = number(&claims, "exp")?.ok_or_else(|| Invalid::token("No expiration time in JWT"))?;
    let principal = match claims.get(&options.principal_claim) {
        Some(Value::String(p)) if !p.trim().is_empty() => p.clone(),
        Some(Value::String(_)) | None => {
            return Err(Invalid::token(format!(
                "No principal name in JWT claim: {}",
                options.principal_claim
            )))
        }
        Some(other) => return Err(wrong_type(&options.principal_claim, "String", other)),
    };
    check_times(number(&claims, "iat")?, exp, options.clock_skew_ms, now_ms)?;
    if let Some(missing) = options.required_scope.iter().find(|s| !scope.contains(s)) {
        return Err(Invalid {
            reason: format!(
                "The provided scope ({scope:?}) was missing a required scope ({missing})"
            ),
            scope: Some(format!("[{}]", options.required_scope.join(", "))),
        });
    }
    Ok(Validated {
        principal,
        // Kafka's Math.round(exp * 1000); `as` saturates an absurd value.
        expires_ms: TimestampMs((exp * 1000.0).round() as i64),
    })
}

/// `iat` not after now plus the skew, `exp` after now minus the skew, `exp` after `iat`
/// (Kafka's `OAuthBearerValidationUtils`, in seconds as JSON numbers).
fn check_times(
    iat: Option<f64>,
    exp: f64,
    skew_ms: DurationMs,
    now_ms: TimestampMs,
) -> Result<(), Invalid> {
    // Epoch milliseconds are exact in an f64 (below 2^53).
    let (now, skew) = (now_ms.0 as f64, skew_ms.0 as f64);
    if let Some(iat) = iat {
        if 1000.0 * iat > now + skew {
            return Err(Invalid::token(format!(
                "The Issued At value ({iat} seconds) was after the indicated time ({now_ms} ms) \
                 plus allowable clock skew ({skew_ms} ms)"
            )));
        }
    }
    if now - skew >= 1000.0 * exp {
        return Err(Invalid::token(format!(
            "The indicated time ({now_ms} ms) minus allowable clock skew ({skew_ms} ms) was on \
             or after the Expiration Time value ({exp} seconds)"
        )));
    }
    match iat {
        Some(iat) if exp <= iat => Err(Invalid::token(format!(
            "The Expiration Time time ({exp} seconds) was not after the Issued At time ({iat} \
             seconds)"
        ))),
        _ => Ok(()),
    }
}

/// A base64url (or standard base64) part decoded and read as a JSON object.
fn json_object(part: &str) -> Result<Map<String, Value>, Invalid> {
    let bytes = BASE64_URL
        .decode(part)
        .or_else(|_| BASE64_STANDARD.decode(part))
        .map_err(|_| Invalid::token("malformed Base64 URL encoded value"))?;
    serde_json::from_slice(&bytes).map_err(|_| Invalid::token("malformed JSON"))
}

/// The numeric claim `name`, if present.
fn number(claims: &Map<String, Value>, name: &str) -> Result<Option<f64>, Invalid> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_f64()
            .map(Some)
            .ok_or_else(|| Invalid::token(format!("The '{name}' claim is not a number"))),
        Some(other) => Err(wrong_type(name, "Number", other)),
    }
}

/// The token's scope: a string claim is one scope, an array one per non-blank element.
fn scope(claims: &Map<String, Value>, name: &str) -> Result<Vec<String>, Invalid> {
    let item = |v: &Value| match v {
        Value::String(s) => s.trim().to_string(),
        // Kafka takes an element's text (Jackson's asText).
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    };
    match claims.get(name) {
        None => Ok(Vec::new()),
        Some(v @ Value::String(_)) => Ok(vec![item(v)]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect()),
        Some(Value::Array(items)) => Ok(items.iter().map(item).filter(|s| !s.is_empty()).collect()),
        Some(other) => Err(wrong_type(name, "List", other)),
    }
}

fn wrong_type(claim: &str, expected: &str, got: &Value) -> Invalid {
    let kind = match got {
        Value::Null => "null",
        Value::Bool(_) => "Boolean",
        Value::Number(_) => "Number",
        Value::String(_) => "String",
        Value::Array(_) => "List",
        Value::Object(_) => "Object",
    };
    Invalid::token(format!(
        "The '{claim}' claim was not of type {expected}: {kind}"
    ))
}

/// The session lifetime to answer (Kafka's `SaslServerAuthenticator`): the token's
/// remaining life, or `connections.max.reauth.ms` if that is shorter; never negative.
pub fn session_lifetime_ms(
    expires_ms: TimestampMs,
    now_ms: TimestampMs,
    reauth_max_ms: Option<DurationMs>,
) -> DurationMs {
    let remaining = expires_ms.saturating_since(now_ms);
    reauth_max_ms
        .map_or(remaining, |max| remaining.min(max))
        .max(DurationMs::ZERO)
}

/// An unsecured token for `sub`, issued at `now_ms` and valid `lifetime_s` seconds (what
/// librdkafka's `enable.sasl.oauthbearer.unsecure.jwt` and Kafka's unsecured login build).
pub fn unsecured_token(sub: &str, scope: &[&str], now_ms: TimestampMs, lifetime_s: i64) -> String {
    let iat = now_ms.0 as f64 / 1000.0;
    let claims = serde_json::json!({
        "sub": sub,
        "iat": iat,
        "exp": iat + lifetime_s as f64,
        "scope": scope,
    });
    let encode = |v: &Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
    };
    format!(
        "{}.{}.",
        encode(&serde_json::json!({"alg": "none"})),
        encode(&claims)
    )
}

/// The client-first message carrying `token` (RFC 7628, no authorization id, no extensions).
pub fn client_first(token: &str) -> Vec<u8> {
    format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
}

#[cfg(test)]
#[path = "oauthbearer_tests.rs"]
mod tests;
