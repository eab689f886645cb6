//! The differences that are known and listed in COMPATIBILITY.md, one per line of `known.txt`:
//!
//! ```text
//! # id  case glob        api              path glob ('*' matches any text)
//! C3    describe_*       DescribeConfigs  results[*].configs[name=advertised.listeners].read_only
//! ```
//!
//! A found difference that no line matches fails the suite; a line that matched nothing is
//! reported as stale (the difference is gone: take it out of COMPATIBILITY.md too).

use std::path::Path;

use anyhow::{bail, Context};

/// One line of `known.txt`.
#[derive(Debug, Clone)]
pub struct Known {
    pub id: String,
    pub case: String,
    pub api: String,
    pub glob: String,
}

/// Reads `known.txt`.
pub fn load(path: &Path) -> anyhow::Result<Vec<Known>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut known = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [id, case, api, glob] = parts[..] else {
            bail!(
                "{}:{}: expected `ID CASE-GLOB API PATH-GLOB`",
                path.display(),
                n + 1
            );
        };
        known.push(Known {
            id: id.into(),
            case: case.into(),
            api: api.into(),
            glob: glob.into(),
        });
    }
    Ok(known)
}

impl Known {
    /// Whether this line covers a difference at `path` of `api` in `case`.
    pub fn matches(&self, case: &str, api: &str, path: &str) -> bool {
        glob(&self.case, case) && (self.api == "*" || self.api == api) && glob(&self.glob, path)
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob("a*c", "abc"));
        assert!(glob("a*c", "ac"));
        assert!(!glob("a*c", "acb"));
        assert!(glob(
            "topics[*].error_message",
            "topics[name=kd-x].error_message"
        ));
        assert!(glob("*", "anything"));
        assert!(glob("exact", "exact"));
        assert!(!glob("exact", "exactly"));
        assert!(glob("a*b*c", "a-b-b-c"));
    }
}
