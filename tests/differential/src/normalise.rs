//! What must differ between two brokers, made equal before the comparison.
//!
//! | leaf (last field name)                                   | becomes                         |
//! |----------------------------------------------------------|---------------------------------|
//! | `throttle_time_ms`                                       | dropped                         |
//! | node ids (`node_id`, `leader_id`, `*_nodes` items, ..)   | `node#N`, N by first appearance |
//! | `cluster_id`, `host`, `port`, topic ids, producer ids, member ids, fetch session ids, log dirs | `<class>#N` likewise |
//! | timestamps                                               | `ts` (or `-1` when unset)       |
//! | error messages, config documentation                     | `"<text>"` when non-empty       |
//!
//! Sentinels (-1, a fetch session id 0, nil uuids, null, "") are kept as they are: their presence is what a
//! client reads. The numbering lives in the [`Normaliser`] of one broker for one case, so a
//! member id that comes back in a later response of the same case keeps its number.

use std::collections::HashMap;

use crate::tree::Leaf;

/// Per-broker, per-case state of the numbering.
#[derive(Debug, Default)]
pub struct Normaliser {
    seen: HashMap<(&'static str, String), usize>,
    counts: HashMap<&'static str, usize>,
}

/// The class a field's values are numbered in, if any.
fn ordinal_class(field: &str, parent: &str) -> Option<&'static str> {
    let class = match field {
        "node_id" | "leader_id" | "controller_id" | "broker_id" | "coordinator_id" | "leader"
            if parent != "JoinGroup" =>
        {
            "node"
        }
        "cluster_id" => "cluster",
        "host" | "client_host" => "host",
        "port" => "port",
        "topic_id" => "topic_id",
        "producer_id" => "producer_id",
        "member_id" | "leader" | "committed_leader_id" => "member",
        "session_id" => "session",
        "log_dir" | "path" => "log_dir",
        "resource_name" if parent.contains("resource_name=<node>") => "node",
        "incarnation_id" => "incarnation",
        _ => return None,
    };
    Some(class)
}

const NODE_LISTS: &[&str] = &[
    "replica_nodes",
    "isr_nodes",
    "offline_replicas",
    "eligible_leader_replicas",
    "last_known_elr",
    "replicas",
    "isr",
    "adding_replicas",
    "removing_replicas",
];

const TIMESTAMPS: &[&str] = &[
    "timestamp",
    "log_append_time_ms",
    "transaction_start_time_ms",
    "last_timestamp",
    "max_timestamp",
    "base_timestamp",
];

const TEXTS: &[&str] = &["error_message", "documentation"];

/// Values that mean "none" and are compared as they are.
fn is_sentinel(value: &str) -> bool {
    matches!(
        value,
        "-1" | "None" | "\"\"" | "00000000-0000-0000-0000-000000000000"
    )
}

impl Normaliser {
    /// Rewrites `leaves` in place (and drops what is never compared). `api` is the API's name.
    pub fn apply(&mut self, api: &str, leaves: Vec<Leaf>) -> Vec<Leaf> {
        leaves
            .into_iter()
            .filter_map(|(path, value)| {
                let (parent, field) = last_field(&path);
                if field == "throttle_time_ms" {
                    return None;
                }
                let value = self.normalise(api, parent, field, value);
                Some((path, value))
            })
            .collect()
    }

    fn normalise(&mut self, api: &str, parent: &str, field: &str, value: String) -> String {
        if is_sentinel(&value) && !TEXTS.contains(&field) {
            return value;
        }
        let list_field = parent.rsplit('.').next().unwrap_or("");
        if field.parse::<usize>().is_ok() && NODE_LISTS.iter().any(|l| list_field.starts_with(l)) {
            return self.number("node", value);
        }
        let scope = if api == "JoinGroup" {
            "JoinGroup"
        } else {
            parent
        };
        if let Some(class) = ordinal_class(field, scope) {
            if class == "session" && value == "0" {
                return value; // no fetch session
            }
            return self.number(class, value);
        }
        if TIMESTAMPS.contains(&field) {
            return "ts".to_string();
        }
        if TEXTS.contains(&field) && value != "None" && value != "\"\"" {
            return "\"<text>\"".to_string();
        }
        value
    }

    fn number(&mut self, class: &'static str, value: String) -> String {
        let next = self.counts.get(class).copied().unwrap_or(0);
        let n = *self.seen.entry((class, value)).or_insert(next);
        if n == next {
            self.counts.insert(class, next + 1);
        }
        format!("{class}#{n}")
    }
}

/// (the path before the last field, the last field), list keys stripped from the field.
fn last_field(path: &str) -> (&str, &str) {
    let (parent, last) = path.rsplit_once('.').unwrap_or(("", path));
    // `replica_nodes[1]` is an item of a scalar list: its field is the index, its parent the list.
    if let Some((list, index)) = last.split_once('[') {
        let index = index.trim_end_matches(']');
        return (
            &path[..parent.len() + usize::from(!parent.is_empty()) + list.len()],
            index,
        );
    }
    (parent, last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_are_numbered_by_first_appearance_and_sentinels_kept() {
        let mut n = Normaliser::default();
        let leaves = vec![
            ("brokers[0].node_id".to_string(), "7".to_string()),
            (
                "topics[name=t].partitions[partition_index=0].leader_id".into(),
                "7".into(),
            ),
            (
                "topics[name=t].partitions[partition_index=0].replica_nodes[0]".into(),
                "7".into(),
            ),
            ("controller_id".into(), "-1".into()),
            ("throttle_time_ms".into(), "5".into()),
            ("topics[name=t].error_message".into(), "\"\"".into()),
            ("error_message".into(), "\"boom\"".into()),
        ];
        let got = n.apply("Metadata", leaves);
        let values: Vec<&str> = got.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(
            values,
            ["node#0", "node#0", "node#0", "-1", "\"\"", "\"<text>\""]
        );
    }

    #[test]
    fn join_group_leader_is_a_member() {
        let mut n = Normaliser::default();
        let got = n.apply(
            "JoinGroup",
            vec![
                ("member_id".into(), "\"m-1\"".into()),
                ("leader".into(), "\"m-1\"".into()),
            ],
        );
        assert_eq!(got[0].1, "member#0");
        assert_eq!(got[1].1, "member#0");
    }
}
