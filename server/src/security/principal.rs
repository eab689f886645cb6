//! The principal of a TLS client: its certificate's subject as Kafka writes it (RFC 2253, as
//! Java's `X500Principal.getName()`: the last RDN first, `CN=client,OU=eng,O=Acme,C=US`), mapped
//! through `ssl.principal.mapping.rules` as Kafka's `SslPrincipalMapper` maps it.

use regex::Regex;

use super::{bad, BadSetting};

/// Kafka's principal of a connection that proved nothing (no client certificate, no SASL).
pub const ANONYMOUS: &str = "ANONYMOUS";

/// One `ssl.principal.mapping.rules` rule.
#[derive(Debug, Clone)]
enum Rule {
    /// `DEFAULT`: the DN as it is.
    Default,
    /// `RULE:pattern/replacement/[LU]`: a DN the pattern matches whole becomes the
    /// replacement (`$1`... its groups), lower- or upper-cased if asked.
    Replace {
        pattern: Regex,
        replacement: String,
        case: Option<char>,
    },
}

/// `ssl.principal.mapping.rules`, parsed.
#[derive(Debug, Clone)]
pub struct PrincipalRules {
    rules: Vec<Rule>,
}

impl Default for PrincipalRules {
    fn default() -> Self {
        PrincipalRules {
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalRules {
    /// Parses Kafka's syntax: rules separated by commas (a pattern may hold commas and `\/`).
    pub fn parse(key: &str, text: &str) -> Result<Self, BadSetting> {
        let splitter = Regex::new(
            r"^\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,\s*|$)",
        )
        .expect("a valid pattern");
        let mut rest = text.trim();
        let mut rules = Vec::new();
        while !rest.is_empty() {
            let Some(m) = splitter.captures(rest) else {
                return Err(bad(key, text, format!("cannot parse the rule at {rest:?}")));
            };
            if m.get(1).is_some() {
                rules.push(Rule::Default);
            } else {
                let pattern = m[2].replace(r"\/", "/");
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| bad(key, text, e.to_string()))?;
                rules.push(Rule::Replace {
                    pattern,
                    replacement: m[3].replace(r"\/", "/"),
                    case: m[4].chars().next(),
                });
            }
            rest = &rest[m.get(0).expect("whole match").end()..];
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(PrincipalRules { rules })
    }

    /// The principal name of `dn`; `None` when no rule applies (Kafka then fails the
    /// connection's authentication).
    pub fn map(&self, dn: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(dn.to_string()),
            Rule::Replace {
                pattern,
                replacement,
                case,
            } => pattern.is_match(dn).then(|| {
                let out = pattern.replace_all(dn, replacement.as_str()).into_owned();
                match case {
                    Some('L') => out.to_lowercase(),
                    Some('U') => out.to_uppercase(),
                    _ => out,
                }
            }),
        })
    }
}

/// The subject of a DER certificate in RFC 2253 form, or `None` if it does not parse.
pub fn subject_dn(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter().collect::<Vec<_>>().into_iter().rev() {
        let mut parts = Vec::new();
        for attr in rdn.iter() {
            let oid = attr.attr_type();
            // The keywords Java's RFC 2253 form uses; any other attribute by its OID.
            let id = oid.to_id_string();
            let name = match id.as_str() {
                "2.5.4.3" => "CN",
                "2.5.4.11" => "OU",
                "2.5.4.10" => "O",
                "2.5.4.7" => "L",
                "2.5.4.8" => "ST",
                "2.5.4.6" => "C",
                "2.5.4.9" => "STREET",
                "0.9.2342.19200300.100.1.25" => "DC",
                "0.9.2342.19200300.100.1.1" => "UID",
                other => other,
            };
            let value = attr.as_str().ok()?;
            parts.push(format!("{name}={}", escape(value)));
        }
        rdns.push(parts.join("+"));
    }
    Some(rdns.join(","))
}

/// RFC 2253 escaping of an attribute value.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        let edge = (i == 0 && (c == ' ' || c == '#')) || (i + 1 == value.len() && c == ' ');
        if edge || matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_map_as_kafkas_ssl_principal_mapper() {
        let rules = PrincipalRules::parse(
            "ssl.principal.mapping.rules",
            r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=([^,]*),O=(.*)$/$1@$2/L, DEFAULT",
        )
        .unwrap();
        assert_eq!(
            rules.map("CN=kafka1,OU=ServiceUsers,O=Acme").as_deref(),
            Some("kafka1")
        );
        assert_eq!(rules.map("CN=Alice,O=ACME").as_deref(), Some("alice@acme"));
        assert_eq!(rules.map("C=US").as_deref(), Some("C=US"));
        let strict = PrincipalRules::parse("k", r"RULE:^CN=(.*)$/$1/U").unwrap();
        assert_eq!(strict.map("CN=bob").as_deref(), Some("BOB"));
        assert_eq!(strict.map("O=x"), None, "no rule applies");
        assert!(PrincipalRules::parse("k", "RULE:broken").is_err());
        assert_eq!(
            PrincipalRules::default().map("CN=x").as_deref(),
            Some("CN=x")
        );
    }

    #[test]
    fn values_are_escaped_as_rfc_2253() {
        assert_eq!(escape("a,b+c"), r"a\,b\+c");
        assert_eq!(escape(" x "), r"\ x\ ");
    }
}
