//! A response as a flat list of `path = value` leaves, read from its `Debug` text.
//!
//! `kafka_protocol`'s messages derive `Debug` and nothing else a generic walk could use, so the
//! compact `{:?}` text is parsed back into a tree (structs, tuple structs, lists, maps, scalars).
//! List elements are keyed by what names them where they have it (`[name=foo]`,
//! `[partition_index=0]`), so two lists in different orders, or with one element more, compare
//! element by element instead of shifting.

use std::iter::Peekable;
use std::str::Chars;

use anyhow::{bail, Context};

/// A parsed `Debug` value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `Name { field: value, .. }`
    Struct(Vec<(String, Value)>),
    /// `Name(value, ..)`, `Some(value)`.
    Tuple(String, Vec<Value>),
    /// `[value, ..]`
    List(Vec<Value>),
    /// `{key: value, ..}`
    Map(Vec<(Value, Value)>),
    /// A number, bool, identifier, uuid or string literal (kept quoted).
    Scalar(String),
}

/// One leaf: its path from the root and its value as text.
pub type Leaf = (String, String);

/// Parses a compact `Debug` rendering.
pub fn parse(text: &str) -> anyhow::Result<Value> {
    let mut tokens = Tokens::new(text);
    let value = parse_value(&mut tokens).with_context(|| format!("parsing {text:.200}"))?;
    if tokens.peek().is_some() {
        bail!("trailing text after a value in {text:.200}");
    }
    Ok(value)
}

/// Field names that name a list element, in order of preference. Not node ids, member ids or
/// other values that must be normalised: a path holds no value that differs between brokers.
const ELEMENT_KEYS: &[&str] = &[
    "name",
    "topic_name",
    "topic",
    "partition_index",
    "partition",
    "resource_name",
    "api_key",
    "config_name",
    "group_id",
    "transactional_id",
    "path",
    "key",
    "user",
    "mechanism",
    "entity_type",
];

/// The leaves of `value`, paths rooted at `prefix`.
pub fn flatten(value: &Value, prefix: &str, into: &mut Vec<Leaf>) {
    match value {
        Value::Struct(fields) => {
            for (name, v) in fields {
                flatten(v, &join(prefix, name), into);
            }
        }
        Value::Tuple(name, items) if items.len() == 1 && is_wrapper(name) => {
            flatten(&items[0], prefix, into);
        }
        Value::Tuple(name, items) => {
            into.push((join(prefix, "(variant)"), name.clone()));
            for (i, v) in items.iter().enumerate() {
                flatten(v, &join(prefix, &i.to_string()), into);
            }
        }
        Value::List(items) => flatten_list(items, prefix, into),
        Value::Map(entries) => {
            for (k, v) in entries {
                flatten(v, &format!("{prefix}{{{}}}", scalar_text(k)), into);
            }
        }
        Value::Scalar(s) => into.push((prefix.to_string(), s.clone())),
    }
}

fn flatten_list(items: &[Value], prefix: &str, into: &mut Vec<Leaf>) {
    into.push((format!("{prefix}.len"), items.len().to_string()));
    let keys: Vec<String> = items
        .iter()
        .enumerate()
        .map(|(i, v)| element_key(v, i))
        .collect();
    // Only a key that is unique in this list can stand for its element.
    let unique = keys.iter().enumerate().all(|(i, k)| !keys[..i].contains(k));
    for (i, item) in items.iter().enumerate() {
        let key = if unique {
            keys[i].clone()
        } else {
            i.to_string()
        };
        flatten(item, &format!("{prefix}[{key}]"), into);
    }
}

/// A client quota entity (`[EntityData { entity_type, entity_name }, ..]`) as a key: its
/// components sorted, so that Kafka's hash-map order of entities and components compares.
fn entity_key(fields: &[(String, Value)]) -> Option<String> {
    let (_, Value::List(parts)) = fields.iter().find(|(name, _)| name == "entity")? else {
        return None;
    };
    let mut texts: Vec<String> = parts
        .iter()
        .map(|part| match part {
            Value::Struct(f) => {
                let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| scalar_text(v));
                Some(format!("{}:{}", get("entity_type")?, get("entity_name")?))
            }
            other => Some(scalar_text(other)),
        })
        .collect::<Option<Vec<String>>>()?;
    texts.sort();
    Some(format!("entity={}", texts.join(",")))
}

/// `name=value` of the element's naming field, else its index.
fn element_key(value: &Value, index: usize) -> String {
    if let Value::Struct(fields) = value {
        if let Some(key) = entity_key(fields) {
            return key;
        }
    }
    match value {
        Value::Struct(fields) => ELEMENT_KEYS
            .iter()
            .find_map(|key| {
                let (_, v) = fields.iter().find(|(name, _)| name == key)?;
                let text = scalar_text(v);
                // A broker resource is named by its node id, which differs between brokers.
                if *key == "resource_name" && !text.is_empty() && text.parse::<i64>().is_ok() {
                    return Some("resource_name=<node>".to_string());
                }
                Some(format!("{key}={text}"))
            })
            .unwrap_or_else(|| index.to_string()),
        _ => index.to_string(),
    }
}

/// Tuple structs that only wrap a value (`TopicName("x")`, `BrokerId(1)`, `Some(..)`).
fn is_wrapper(name: &str) -> bool {
    name != "Err" && name != "Ok"
}

/// A short text for a value used as a key.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::Scalar(s) => s.trim_matches('"').to_string(),
        Value::Tuple(_, items) if items.len() == 1 => scalar_text(&items[0]),
        other => format!("{other:?}"),
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open(char),
    Close(char),
    Comma,
    Colon,
    Word(String),
}

struct Tokens<'a> {
    chars: Peekable<Chars<'a>>,
    peeked: Option<Token>,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        Tokens {
            chars: text.chars().peekable(),
            peeked: None,
        }
    }

    fn peek(&mut self) -> Option<&Token> {
        if self.peeked.is_none() {
            self.peeked = self.read();
        }
        self.peeked.as_ref()
    }

    fn next_token(&mut self) -> Option<Token> {
        self.peek();
        self.peeked.take()
    }

    fn read(&mut self) -> Option<Token> {
        while self.chars.peek().is_some_and(|c| c.is_whitespace()) {
            self.chars.next();
        }
        let c = *self.chars.peek()?;
        let token = match c {
            '{' | '(' | '[' => Token::Open(c),
            '}' | ')' | ']' => Token::Close(c),
            ',' => Token::Comma,
            ':' => Token::Colon,
            '"' => return Some(Token::Word(self.string(String::new()))),
            _ => return Some(Token::Word(self.word())),
        };
        self.chars.next();
        Some(token)
    }

    /// A string literal with its quotes (and a `b` prefix when it had one), escapes kept.
    fn string(&mut self, mut out: String) -> String {
        out.push(self.chars.next().expect("a quote"));
        while let Some(c) = self.chars.next() {
            out.push(c);
            if c == '\\' {
                if let Some(escaped) = self.chars.next() {
                    out.push(escaped);
                }
            } else if c == '"' {
                break;
            }
        }
        out
    }

    fn word(&mut self) -> String {
        let mut out = String::new();
        while let Some(&c) = self.chars.peek() {
            if c == '"' && out == "b" {
                return self.string(out);
            }
            if c.is_whitespace() || "{}()[],:\"".contains(c) {
                break;
            }
            out.push(c);
            self.chars.next();
        }
        out
    }
}

fn parse_value(tokens: &mut Tokens) -> anyhow::Result<Value> {
    match tokens.next_token() {
        Some(Token::Open('[')) => Ok(Value::List(parse_items(tokens, ']')?)),
        Some(Token::Open('{')) => parse_map(tokens),
        Some(Token::Word(word)) => match tokens.peek() {
            Some(Token::Open('{')) => {
                tokens.next_token();
                parse_struct(tokens)
            }
            Some(Token::Open('(')) => {
                tokens.next_token();
                Ok(Value::Tuple(word, parse_items(tokens, ')')?))
            }
            _ => Ok(Value::Scalar(word)),
        },
        other => bail!("unexpected {other:?}"),
    }
}

fn parse_items(tokens: &mut Tokens, close: char) -> anyhow::Result<Vec<Value>> {
    let mut items = Vec::new();
    loop {
        if tokens.peek() == Some(&Token::Close(close)) {
            tokens.next_token();
            return Ok(items);
        }
        items.push(parse_value(tokens)?);
        match tokens.next_token() {
            Some(Token::Comma) => {}
            Some(Token::Close(c)) if c == close => return Ok(items),
            other => bail!("expected , or {close}, got {other:?}"),
        }
    }
}

fn parse_struct(tokens: &mut Tokens) -> anyhow::Result<Value> {
    let mut fields = Vec::new();
    loop {
        match tokens.next_token() {
            Some(Token::Close('}')) => return Ok(Value::Struct(fields)),
            Some(Token::Word(name)) => {
                if tokens.next_token() != Some(Token::Colon) {
                    bail!("expected : after field {name}");
                }
                fields.push((name, parse_value(tokens)?));
                match tokens.next_token() {
                    Some(Token::Comma) => {}
                    Some(Token::Close('}')) => return Ok(Value::Struct(fields)),
                    other => bail!("expected , or }} after a field, got {other:?}"),
                }
            }
            other => bail!("expected a field name, got {other:?}"),
        }
    }
}

fn parse_map(tokens: &mut Tokens) -> anyhow::Result<Value> {
    let mut entries = Vec::new();
    loop {
        if tokens.peek() == Some(&Token::Close('}')) {
            tokens.next_token();
            return Ok(Value::Map(entries));
        }
        let key = parse_value(tokens)?;
        if tokens.next_token() != Some(Token::Colon) {
            bail!("expected : in a map");
        }
        entries.push((key, parse_value(tokens)?));
        match tokens.next_token() {
            Some(Token::Comma) => {}
            Some(Token::Close('}')) => return Ok(Value::Map(entries)),
            other => bail!("expected , or }} in a map, got {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(text: &str) -> Vec<Leaf> {
        let mut out = Vec::new();
        flatten(&parse(text).unwrap(), "", &mut out);
        out
    }

    #[test]
    fn structs_lists_wrappers_and_strings() {
        let text = r#"R { a: 1, t: [T { name: TopicName("x,y"), e: Some("") }], m: {}, b: None }"#;
        let got = leaves(text);
        assert_eq!(
            got,
            vec![
                ("a".into(), "1".into()),
                ("t.len".into(), "1".into()),
                ("t[name=x,y].name".into(), "\"x,y\"".into()),
                ("t[name=x,y].e".into(), "\"\"".into()),
                ("b".into(), "None".into()),
            ]
        );
    }

    #[test]
    fn byte_strings_uuids_and_duplicate_keys() {
        let text = r#"R { r: Some(b"\x00\"q"), id: 5ec1b5c6-0000-4000-8000-000000000001, l: [P { name: "a" }, P { name: "a" }] }"#;
        let got = leaves(text);
        assert_eq!(got[0], ("r".into(), r#"b"\x00\"q""#.into()));
        assert_eq!(got[1].1, "5ec1b5c6-0000-4000-8000-000000000001");
        assert_eq!(got[3].0, "l[0].name");
        assert_eq!(got[4].0, "l[1].name");
    }

    #[test]
    fn empty_and_nested_empty() {
        assert_eq!(
            leaves("R { l: [], s: S {} }"),
            vec![("l.len".into(), "0".into())]
        );
    }
}
