//! Edges of the OAUTHBEARER client-first message and of unsecured-token validation.

use super::*;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// 2026-01-01T00:00:00Z, in ms.
const NOW_MS: i64 = 1_767_225_600_000;
const NOW_S: i64 = NOW_MS / 1000;
const NOW: TimestampMs = TimestampMs(NOW_MS);

fn part(json: &str) -> String {
    URL_SAFE_NO_PAD.encode(json)
}

fn jws(header: &str, claims: &str) -> String {
    format!("{}.{}.", part(header), part(claims))
}

fn token(claims: &str) -> String {
    jws(r#"{"alg":"none"}"#, claims)
}

fn message(token: &str) -> Vec<u8> {
    client_first(token)
}

fn valid_claims() -> String {
    format!(r#"{{"sub":"alice","iat":{NOW_S},"exp":{}}}"#, NOW_S + 3600)
}

fn opts() -> ValidatorOptions {
    ValidatorOptions::default()
}

fn refused(msg: &[u8], options: &ValidatorOptions) -> ClientFirstRefusal {
    evaluate(msg, options, NOW).expect_err("refused")
}

fn invalid(t: &str, options: &ValidatorOptions) -> Invalid {
    match refused(&message(t), options) {
        ClientFirstRefusal::Invalid(i) => i,
        other => panic!("not an invalid token: {other:?}"),
    }
}

#[test]
fn a_valid_token_names_its_principal_and_expiry() {
    let ok = evaluate(&message(&token(&valid_claims())), &opts(), NOW).unwrap();
    assert_eq!(ok.principal, "alice");
    assert_eq!(ok.expires_ms, TimestampMs((NOW_S + 3600) * 1000));
    // With an authzid equal to the principal, and extensions, and a padded token.
    let t = token(&valid_claims());
    let msg = format!("n,a=alice,\u{1}auth=Bearer {t}\u{1}traceId=x y=z\u{1}\u{1}");
    assert_eq!(
        evaluate(msg.as_bytes(), &opts(), NOW).unwrap().principal,
        "alice"
    );
    let scheme = format!("n,,\u{1}auth=bEaReR   {t}\u{1}\u{1}");
    assert!(evaluate(scheme.as_bytes(), &opts(), NOW).is_ok());
}

#[test]
fn malformed_messages_are_refused_without_a_challenge() {
    let t = token(&valid_claims());
    let cases: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\x01".to_vec(),
        b"n,,\x01\x01".to_vec(),
        format!("y,,\u{1}auth=Bearer {t}\u{1}\u{1}").into_bytes(),
        format!("n,,\u{1}auth=Bearer {t}\u{1}").into_bytes(),
        format!("n,,\u{1}auth=Basic {t}\u{1}\u{1}").into_bytes(),
        b"n,,\x01auth=Bearer\x01\x01".to_vec(),
        format!("n,,\u{1}auth=Bearer {t}!\u{1}\u{1}").into_bytes(),
        format!("n,,\u{1}auth=Bearer {t}\u{1}k=\u{1}\u{1}").into_bytes(),
        format!("n,,\u{1}auth=Bearer {t}\u{1}\u{1}\u{1}").into_bytes(),
        format!("n,b=x,\u{1}auth=Bearer {t}\u{1}\u{1}").into_bytes(),
        format!("n,a=al=ice,\u{1}auth=Bearer {t}\u{1}\u{1}").into_bytes(),
        b"n,,\x01user=alice\x01\x01".to_vec(),
        format!("n,,\u{1}auth=Bearer {t}é\u{1}\u{1}").into_bytes(),
    ];
    for msg in cases {
        assert!(
            matches!(refused(&msg, &opts()), ClientFirstRefusal::Malformed(_)),
            "{:?}",
            String::from_utf8_lossy(&msg)
        );
    }
    assert_eq!(
        refused(b"n,,\x01user=alice\x01\x01", &opts()),
        ClientFirstRefusal::Malformed(
            "Invalid OAUTHBEARER client first message: 'auth' not specified"
        )
    );
    assert_eq!(
        refused(
            format!("n,,\u{1}auth=Basic {t}\u{1}\u{1}").as_bytes(),
            &opts()
        ),
        ClientFirstRefusal::Malformed("Invalid scheme in OAUTHBEARER client first message")
    );
}

#[test]
fn an_authzid_other_than_the_principal_is_told() {
    let t = token(&valid_claims());
    let msg = format!("n,a=bob,\u{1}auth=Bearer {t}\u{1}\u{1}");
    let ClientFirstRefusal::Authzid(m) = refused(msg.as_bytes(), &opts()) else {
        panic!("not an authzid refusal");
    };
    assert!(m.contains("(bob)") && m.contains("(alice)"), "{m}");
}

#[test]
fn bad_token_shapes_are_invalid_tokens() {
    let c = valid_claims();
    let cases = [
        ("not base64", format!("{}.A.", part(r#"{"alg":"none"}"#))),
        (
            "not JSON",
            format!("{}.{}.", part(r#"{"alg":"none"}"#), part("{nope")),
        ),
        ("JSON, not an object", token("[1,2]")),
        ("alg not none", jws(r#"{"alg":"HS256"}"#, &c)),
        ("no alg", jws(r#"{"typ":"JWT"}"#, &c)),
        ("alg not a string", jws(r#"{"alg":1}"#, &c)),
        ("a signature", format!("{}sig", token(&c))),
        (
            "two parts",
            format!("{}.{}", part(r#"{"alg":"none"}"#), part(&c)),
        ),
        ("four parts", format!("{}x.", token(&c))),
        ("'..'", format!("{}..", part(r#"{"alg":"none"}"#))),
    ];
    for (what, t) in cases {
        let i = invalid(&t, &opts());
        assert_eq!(i.challenge(), r#"{"status":"invalid_token"}"#, "{what}");
    }
}

#[test]
fn the_standard_alphabet_is_read_as_kafka_reads_it() {
    use base64::engine::general_purpose::STANDARD_NO_PAD;
    let claims = format!(r#"{{"sub":"alice","exp":{},"x":">>>???"}}"#, NOW_S + 60);
    let t = format!(
        "{}.{}.",
        part(r#"{"alg":"none"}"#),
        STANDARD_NO_PAD.encode(claims)
    );
    assert!(t.contains('+') && t.contains('/'), "{t}");
    assert!(evaluate(&message(&t), &opts(), NOW).is_ok());
    // Padding is allowed only at the token's end (RFC 6750's b64token).
    let padded = format!("{}.{}=.", part(r#"{"alg":"none"}"#), part(&valid_claims()));
    assert!(matches!(
        refused(&message(&padded), &opts()),
        ClientFirstRefusal::Malformed(_)
    ));
}

#[test]
fn claims_are_checked_as_kafka_checks_them() {
    let exp = NOW_S + 60;
    let cases = [
        ("no exp", r#"{"sub":"alice"}"#.to_string()),
        (
            "exp a string",
            format!(r#"{{"sub":"alice","exp":"{exp}"}}"#),
        ),
        (
            "exp past",
            format!(r#"{{"sub":"alice","exp":{}}}"#, NOW_S - 1),
        ),
        ("exp now", format!(r#"{{"sub":"alice","exp":{NOW_S}}}"#)),
        (
            "iat future",
            format!(r#"{{"sub":"alice","iat":{},"exp":{exp}}}"#, NOW_S + 1),
        ),
        (
            "iat a string",
            format!(r#"{{"sub":"alice","iat":"x","exp":{exp}}}"#),
        ),
        (
            "exp not after iat",
            format!(r#"{{"sub":"alice","iat":{exp},"exp":{exp}}}"#),
        ),
        ("no sub", format!(r#"{{"exp":{exp}}}"#)),
        ("sub a number", format!(r#"{{"sub":7,"exp":{exp}}}"#)),
        (
            "sub an array",
            format!(r#"{{"sub":["alice"],"exp":{exp}}}"#),
        ),
        ("sub null", format!(r#"{{"sub":null,"exp":{exp}}}"#)),
        ("sub blank", format!(r#"{{"sub":"  ","exp":{exp}}}"#)),
        (
            "scope a number",
            format!(r#"{{"sub":"alice","exp":{exp},"scope":3}}"#),
        ),
    ];
    for (what, claims) in cases {
        let i = invalid(&token(&claims), &opts());
        assert_eq!(i.scope, None, "{what}");
        assert_eq!(i.challenge(), r#"{"status":"invalid_token"}"#, "{what}");
    }
    let fraction = format!(r#"{{"sub":"alice","iat":{}.5,"exp":{exp}.25}}"#, NOW_S - 1);
    let ok = evaluate(&message(&token(&fraction)), &opts(), NOW).unwrap();
    assert_eq!(ok.expires_ms, TimestampMs(exp * 1000 + 250));
}

#[test]
fn the_clock_skew_moves_both_boundaries_by_its_width() {
    let skew = ValidatorOptions {
        clock_skew_ms: DurationMs(5000),
        ..opts()
    };
    let at = |iat: i64, exp: i64| {
        let claims = format!(r#"{{"sub":"alice","iat":{iat},"exp":{exp}}}"#);
        evaluate(&message(&token(&claims)), &skew, NOW).is_ok()
    };
    let far = NOW_S + 3600;
    // exp: valid while now - skew < exp.
    assert!(
        at(NOW_S - 100, NOW_S - 4),
        "exp 4 s past, within 5 s of skew"
    );
    assert!(
        !at(NOW_S - 100, NOW_S - 5),
        "exp exactly skew past: on the boundary"
    );
    assert!(!at(NOW_S - 100, NOW_S - 6), "exp one second over the skew");
    // iat: valid while iat <= now + skew.
    assert!(at(NOW_S + 5, far), "iat exactly skew ahead");
    assert!(at(NOW_S + 4, far), "iat one second under the skew");
    assert!(!at(NOW_S + 6, far), "iat one second over the skew");
    // Without skew, exp one second ahead is valid and iat one second ahead is not.
    let none = |iat: i64, exp: i64| {
        let claims = format!(r#"{{"sub":"alice","iat":{iat},"exp":{exp}}}"#);
        evaluate(&message(&token(&claims)), &opts(), NOW).is_ok()
    };
    assert!(none(NOW_S, NOW_S + 1));
    assert!(!none(NOW_S + 1, far));
}

#[test]
fn required_scopes_are_all_needed_from_a_string_or_an_array() {
    let jaas: BTreeMap<String, String> = [(
        "unsecuredValidatorRequiredScope".to_string(),
        " read  write ".to_string(),
    )]
    .into();
    let options = ValidatorOptions::from_jaas(&jaas).unwrap();
    assert_eq!(options.required_scope, ["read", "write"]);
    let exp = NOW_S + 60;
    let with = |scope: &str| token(&format!(r#"{{"sub":"alice","exp":{exp},"scope":{scope}}}"#));
    assert!(evaluate(&message(&with(r#"["write"," read ","x"]"#)), &options, NOW).is_ok());
    let missing = invalid(&with(r#"["read"]"#), &options);
    assert_eq!(
        missing.challenge(),
        r#"{"status":"insufficient_scope", "scope":"[read, write]"}"#
    );
    // A string scope is one scope, as Kafka's OAuthBearerUnsecuredJws reads it.
    assert!(invalid(&with(r#""read write""#), &options).scope.is_some());
    let one: BTreeMap<String, String> = [(
        "unsecuredValidatorRequiredScope".to_string(),
        "read".to_string(),
    )]
    .into();
    let one = ValidatorOptions::from_jaas(&one).unwrap();
    assert!(evaluate(&message(&with(r#"" read ""#)), &one, NOW).is_ok());
    assert!(
        invalid(&token(&format!(r#"{{"sub":"alice","exp":{exp}}}"#)), &one)
            .scope
            .is_some()
    );
}

#[test]
fn options_come_from_the_jaas_line() {
    let jaas = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let o = ValidatorOptions::from_jaas(&jaas(&[
        ("unsecuredValidatorPrincipalClaimName", " user "),
        ("unsecuredValidatorScopeClaimName", "scp"),
        ("unsecuredValidatorAllowableClockSkewMs", "250"),
        ("unsecuredLoginStringClaim_sub", "admin"),
    ]))
    .unwrap();
    assert_eq!(
        (o.principal_claim.as_str(), o.scope_claim.as_str()),
        ("user", "scp")
    );
    assert_eq!(o.clock_skew_ms, DurationMs(250));
    let claims = format!(r#"{{"user":"carol","exp":{}}}"#, NOW_S + 9);
    assert_eq!(
        evaluate(&message(&token(&claims)), &o, NOW)
            .unwrap()
            .principal,
        "carol"
    );
    assert_eq!(ValidatorOptions::from_jaas(&jaas(&[])).unwrap(), opts());
    for bad in ["-1", "x", "99999999999"] {
        let e =
            ValidatorOptions::from_jaas(&jaas(&[("unsecuredValidatorAllowableClockSkewMs", bad)]));
        assert!(matches!(e, Err(OptionError::ClockSkew(_))), "{bad}");
    }
    let e = ValidatorOptions::from_jaas(&jaas(&[("unsecuredValidatorRequiredScope", "a\"b")]));
    assert_eq!(e, Err(OptionError::Scope("a\"b".to_string())));
}

#[test]
fn the_session_lifetime_is_the_lesser_of_the_token_and_reauth() {
    let (d, t) = (DurationMs, TimestampMs);
    assert_eq!(session_lifetime_ms(NOW + d(10_000), NOW, None), d(10_000));
    assert_eq!(
        session_lifetime_ms(NOW + d(10_000), NOW, Some(d(2_000))),
        d(2_000)
    );
    assert_eq!(
        session_lifetime_ms(NOW + d(1_000), NOW, Some(d(2_000))),
        d(1_000)
    );
    assert_eq!(
        session_lifetime_ms(NOW - d(1_000), NOW, Some(d(2_000))),
        DurationMs::ZERO
    );
    assert_eq!(
        session_lifetime_ms(t(i64::MIN), t(i64::MAX), None),
        DurationMs::ZERO
    );
}

#[test]
fn an_unsecured_token_built_here_validates() {
    let t = unsecured_token("admin", &["a", "b"], NOW, 3600);
    let ok = evaluate(&client_first(&t), &opts(), NOW).unwrap();
    assert_eq!(
        ok,
        Validated {
            principal: "admin".to_string(),
            expires_ms: NOW + DurationMs(3_600_000)
        }
    );
    assert!(is_error_acknowledgement(b"\x01"));
    assert!(!is_error_acknowledgement(b"\x01\x01"));
}

#[test]
fn a_message_torn_at_every_byte_never_panics_and_never_passes() {
    let full = message(&token(&valid_claims()));
    assert!(evaluate(&full, &opts(), NOW).is_ok());
    for cut in 0..full.len() {
        assert!(
            evaluate(&full[..cut], &opts(), NOW).is_err(),
            "cut at {cut}"
        );
    }
    // Every byte replaced by each of a few hostile ones: no panic.
    for i in 0..full.len() {
        for b in [0u8, 0x01, b'.', b'=', 0xFF, b'"'] {
            let mut m = full.clone();
            m[i] = b;
            let _ = evaluate(&m, &opts(), NOW);
        }
    }
}
