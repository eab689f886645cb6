//! What one connection's generator knows about the broker: the fixed pools of names it works on,
//! and what the broker's answers taught it (member ids, generations, producer ids), so that a
//! sequence of requests can reach deep states (a joined member syncing and committing, a
//! transaction adding partitions and ending) instead of failing at the first id check.

use bytes::Bytes;
use rill_protocol::kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use rill_protocol::kafka_protocol::protocol::Decodable;

/// Most members and producers remembered (the oldest are forgotten).
const REMEMBERED_MAX: usize = 16;

/// A member id the broker handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The group it belongs to.
    pub group: String,
    /// The id the broker assigned.
    pub member_id: String,
    /// The generation it joined (-1 until a join completed).
    pub generation: i32,
    /// The protocol the group chose (empty until then).
    pub protocol: String,
}

/// A producer id the broker handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Producer {
    /// The transactional id it was initialised with, if any.
    pub transactional_id: Option<String>,
    /// The producer id.
    pub producer_id: i64,
    /// Its epoch.
    pub epoch: i16,
    /// The next base sequence this generator will use.
    pub sequence: i32,
}

/// The names and ids one generator draws on.
#[derive(Clone, Debug)]
pub struct State {
    /// Topics this fuzzer works on (created at start, deleted and re-created by the fuzz).
    pub topics: Vec<String>,
    /// Group ids it works on.
    pub groups: Vec<String>,
    /// Transactional ids it works on.
    pub transactional_ids: Vec<String>,
    /// Members learned from JoinGroup answers.
    pub members: Vec<Member>,
    /// Producers learned from InitProducerId answers.
    pub producers: Vec<Producer>,
    /// The ids a running flow is about (see [`crate::case::Flow`]).
    pub focus: Focus,
}

/// The group, transactional id and topic the current flow is about.
#[derive(Clone, Debug, Default)]
pub struct Focus {
    /// Group id.
    pub group: String,
    /// Transactional id.
    pub transactional_id: String,
    /// Topic.
    pub topic: String,
}

impl State {
    /// The pools of `lane` (one connection): topics shared by all lanes (so that lanes
    /// interfere), groups and transactional ids partly shared, partly the lane's own.
    pub fn new(lane: u64) -> Self {
        let topics = (0..6).map(|i| format!("fz-{i}")).collect::<Vec<_>>();
        let groups = vec![
            "fz-g0".to_owned(),
            "fz-g1".to_owned(),
            format!("fz-g-lane{lane}"),
        ];
        let transactional_ids = vec!["fz-t0".to_owned(), format!("fz-t-lane{lane}")];
        let focus = Focus {
            group: groups[0].clone(),
            transactional_id: transactional_ids[0].clone(),
            topic: topics[0].clone(),
        };
        State {
            topics,
            groups,
            transactional_ids,
            members: Vec::new(),
            producers: Vec::new(),
            focus,
        }
    }

    /// The member most recently learned for `group`.
    pub fn member_of(&self, group: &str) -> Option<&Member> {
        self.members.iter().rev().find(|m| m.group == group)
    }

    /// The producer most recently learned for `transactional_id` (None: idempotent only).
    pub fn producer_for(&self, transactional_id: Option<&str>) -> Option<&Producer> {
        self.producers
            .iter()
            .rev()
            .find(|p| p.transactional_id.as_deref() == transactional_id)
    }

    /// Learns from the answer to `case`: `response` is the frame after its size prefix.
    /// Undecodable answers teach nothing (the harness checks decodability itself).
    pub fn learn(&mut self, api_key: i16, version: i16, picked: &Picked, response: &[u8]) {
        let Ok(api) = ApiKey::try_from(api_key) else {
            return;
        };
        if !matches!(api, ApiKey::JoinGroup | ApiKey::InitProducerId) {
            return;
        }
        let mut buf = Bytes::copy_from_slice(response);
        if ResponseHeader::decode(&mut buf, api.response_header_version(version)).is_err() {
            return;
        }
        match ResponseKind::decode(api, &mut buf, version) {
            Ok(ResponseKind::JoinGroup(r)) if !r.member_id.is_empty() => {
                let Some(group) = picked.group.clone() else {
                    return;
                };
                remember(
                    &mut self.members,
                    Member {
                        group,
                        member_id: r.member_id.to_string(),
                        generation: r.generation_id,
                        protocol: r.protocol_name.map(|p| p.to_string()).unwrap_or_default(),
                    },
                );
            }
            Ok(ResponseKind::InitProducerId(r)) if r.error_code == 0 => remember(
                &mut self.producers,
                Producer {
                    transactional_id: picked.transactional_id.clone(),
                    producer_id: r.producer_id.0,
                    epoch: r.producer_epoch,
                    sequence: 0,
                },
            ),
            _ => {}
        }
    }
}

fn remember<T>(list: &mut Vec<T>, item: T) {
    if list.len() >= REMEMBERED_MAX {
        list.remove(0);
    }
    list.push(item);
}

/// The ids a generated request used (the first of each), for learning from its answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Picked {
    /// The group id written.
    pub group: Option<String>,
    /// The transactional id written.
    pub transactional_id: Option<String>,
}
