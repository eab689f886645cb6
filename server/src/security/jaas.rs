//! Kafka's `sasl.jaas.config` value, read as Kafka's `JaasConfig` reads it: one or more
//! `<LoginModuleClass> <flag> [key=value ...];` entries, a value a bare word or a double-quoted
//! string (`\` escapes the next character inside quotes, as Java's StreamTokenizer does), `//`
//! and `/* */` comments skipped.
//!
//! The text comes from the operator's properties, never from the network; it is still read
//! with bounds (no recursion, each character looked at once).

use std::collections::BTreeMap;

/// One login module entry.
#[derive(Clone, PartialEq, Eq)]
pub struct LoginModule {
    /// Its class name (`org.apache.kafka.common.security.plain.PlainLoginModule`).
    pub class: String,
    /// `required`, `requisite`, `sufficient` or `optional`.
    pub flag: String,
    /// Its options, in order of name.
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for LoginModule {
    // Options hold passwords: never logged.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginModule")
            .field("class", &self.class)
            .field("flag", &self.flag)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Kafka's flags (`JaasConfig.loginModuleControlFlag`).
const FLAGS: [&str; 4] = ["required", "requisite", "sufficient", "optional"];

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '=' => out.push(Token::Equals),
            ';' => out.push(Token::Semicolon),
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                let mut closed = false;
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        closed = true;
                        break;
                    }
                    last = c;
                }
                if !closed {
                    return Err("unterminated comment".into());
                }
            }
            '"' | '\'' => {
                let quote = c;
                let mut value = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => match chars.next() {
                            Some('n') => value.push('\n'),
                            Some('t') => value.push('\t'),
                            Some('r') => value.push('\r'),
                            Some(other) => value.push(other),
                            None => break,
                        },
                        c if c == quote => {
                            closed = true;
                            break;
                        }
                        c => value.push(c),
                    }
                }
                if !closed {
                    return Err("unterminated quoted value".into());
                }
                out.push(Token::Quoted(value));
            }
            c => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if next.is_whitespace() || matches!(next, '=' | ';' | '"' | '\'') {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                out.push(Token::Word(word));
            }
        }
    }
    Ok(out)
}

/// The login modules of a `sasl.jaas.config` value; `Err` says what is wrong, as Kafka's
/// "Invalid JAAS config" does.
pub fn parse(text: &str) -> Result<Vec<LoginModule>, String> {
    let tokens = tokens(text)?;
    let mut modules = Vec::new();
    let mut it = tokens.into_iter().peekable();
    while it.peek().is_some() {
        let class = match it.next() {
            Some(Token::Word(w)) => w,
            other => return Err(format!("expected a login module class, found {other:?}")),
        };
        let flag = match it.next() {
            Some(Token::Word(w)) if FLAGS.contains(&w.to_ascii_lowercase().as_str()) => {
                w.to_ascii_lowercase()
            }
            _ => {
                return Err(format!(
                    "{class}: expected a control flag ({})",
                    FLAGS.join(", ")
                ))
            }
        };
        let mut options = BTreeMap::new();
        loop {
            match it.next() {
                Some(Token::Semicolon) => break,
                Some(Token::Word(key)) => {
                    if it.next() != Some(Token::Equals) {
                        return Err(format!("{class}: option {key} has no '='"));
                    }
                    let value = match it.next() {
                        Some(Token::Word(v)) | Some(Token::Quoted(v)) => v,
                        _ => return Err(format!("{class}: option {key} has no value")),
                    };
                    options.insert(key, value);
                }
                None => return Err(format!("{class}: the entry does not end with ';'")),
                Some(other) => return Err(format!("{class}: unexpected {other:?}")),
            }
        }
        modules.push(LoginModule {
            class,
            flag,
            options,
        });
    }
    if modules.is_empty() {
        return Err("no login module".into());
    }
    Ok(modules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kafkas_plain_example() {
        let text = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="admin-secret"
            user_admin="admin-secret" user_alice='alice "quoted"' user_bob=bare;"#;
        let m = parse(text).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].class,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(m[0].flag, "required");
        assert_eq!(m[0].options["user_admin"], "admin-secret");
        assert_eq!(m[0].options["user_alice"], "alice \"quoted\"");
        assert_eq!(m[0].options["user_bob"], "bare");
        assert!(
            !format!("{m:?}").contains("admin-secret"),
            "no secret logged"
        );
    }

    #[test]
    fn refuses_what_kafka_refuses() {
        for bad in [
            "",
            "Module;",
            "Module required user_a=\"x\"",
            "Module required user_a;",
            "Module maybe;",
            "Module required a=\"open;",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        let two = parse("A required; /* c */ B optional x=1; // end").unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(two[1].options["x"], "1");
    }
}
