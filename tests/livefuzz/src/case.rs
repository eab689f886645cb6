//! One fuzz case: which API, version and shape, the frame bytes, and what the broker may do
//! with it. [`CaseGen`] is one connection's generator: a pure function of its entropy and of
//! what the broker answered it, so a seed replays a run.
//!
//! | shape      | share | what it is                                              | the broker must       |
//! |------------|------:|---------------------------------------------------------|-----------------------|
//! | Valid      |   40% | spec-true, plausible values, advertised version         | answer (acks=0: not)  |
//! | Hostile    |   30% | any value, lying lengths, unknown tags                  | answer or close       |
//! | Mutated    |   17% | a Valid body with bytes flipped, cut, repeated          | answer or close       |
//! | OffRange   |    7% | a version just outside (or far outside) the range       | close (ApiVersions: answer) |
//! | UnknownApi |    2% | an api key Rill does not implement                      | close                 |
//! | Torn       |    2% | a frame whose size prefix promises more than is sent    | wait, then see a close|
//! | BadSize    |    2% | a negative, tiny or oversized size prefix               | close                 |
//!
//! Flows (8% of the time one starts): a group's join/sync/heartbeat/commit/leave, a
//! transaction's init/add/produce/commit/end, a topic's create/produce/fetch/alter/delete, each
//! step Valid except one in seven Hostile: a hostile value in a deep state.

use rill_protocol::api_registry::{ApiEntry, ENTRIES};
use rill_protocol::kafka_protocol::messages::ApiKey;

use crate::entropy::Entropy;
use crate::generate::{body, header, is_flexible, BODY_BYTES_MAX};
use crate::mutate::mutate;
use crate::state::{Picked, State};
use crate::values::Mode;
use crate::wire::frame;

/// What kind of case (see the module table).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    /// Spec-true and plausible.
    Valid,
    /// Any value.
    Hostile,
    /// A valid body, mutated.
    Mutated,
    /// A version outside the advertised range.
    OffRange,
    /// An api key Rill does not implement.
    UnknownApi,
    /// A frame cut short; the connection is closed after it.
    Torn,
    /// A size prefix that cannot start a frame.
    BadSize,
}

impl Shape {
    /// Every shape, in table order.
    pub const ALL: [Shape; 7] = [
        Shape::Valid,
        Shape::Hostile,
        Shape::Mutated,
        Shape::OffRange,
        Shape::UnknownApi,
        Shape::Torn,
        Shape::BadSize,
    ];
}

/// One request to send.
#[derive(Clone, Debug)]
pub struct Case {
    /// The api key in the header.
    pub api_key: i16,
    /// The version in the header.
    pub version: i16,
    /// The correlation id in the header.
    pub correlation_id: i32,
    /// What kind of case.
    pub shape: Shape,
    /// The whole frame, size prefix included (for Torn and BadSize, the prefix lies).
    pub frame: Vec<u8>,
    /// Ids it named (to learn from the answer).
    pub picked: Picked,
    /// The Produce acks written (Valid and Hostile shapes).
    pub acks: Option<i16>,
}

impl Case {
    /// Whether a well-behaved broker must answer it: a Valid case other than an acks=0 Produce
    /// (a Valid case's version is advertised and decodable).
    pub fn must_answer(&self) -> bool {
        self.shape == Shape::Valid
            && !(self.api_key == ApiKey::Produce as i16 && self.acks == Some(0))
    }

    /// Whether the broker may answer nothing and keep the connection (an acks=0 Produce, as
    /// far as the generator can tell).
    pub fn may_be_silent(&self) -> bool {
        self.api_key == ApiKey::Produce as i16 && self.shape != Shape::Valid || self.acks == Some(0)
    }
}

/// A running flow: its steps and where it is.
#[derive(Clone, Debug)]
struct Flow {
    steps: &'static [ApiKey],
    next: usize,
}

const GROUP_FLOW: &[ApiKey] = &[
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::DescribeGroups,
    ApiKey::LeaveGroup,
];
const TXN_FLOW: &[ApiKey] = &[
    ApiKey::FindCoordinator,
    ApiKey::InitProducerId,
    ApiKey::AddPartitionsToTxn,
    ApiKey::Produce,
    ApiKey::AddOffsetsToTxn,
    ApiKey::TxnOffsetCommit,
    ApiKey::EndTxn,
    ApiKey::DescribeTransactions,
];
const TOPIC_FLOW: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::Metadata,
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::OffsetForLeaderEpoch,
    ApiKey::DeleteRecords,
    ApiKey::CreatePartitions,
    ApiKey::DescribeConfigs,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::DeleteTopics,
];

/// Extra weight for the APIs the known crash classes go through (ids into record writers).
fn api_weight(api: ApiKey) -> usize {
    match api {
        ApiKey::Produce
        | ApiKey::JoinGroup
        | ApiKey::OffsetCommit
        | ApiKey::TxnOffsetCommit
        | ApiKey::InitProducerId => 3,
        ApiKey::Fetch | ApiKey::SyncGroup | ApiKey::AddOffsetsToTxn | ApiKey::Metadata => 2,
        _ => 1,
    }
}

/// One connection's case generator.
pub struct CaseGen {
    /// What it knows (pools, learned ids).
    pub state: State,
    flow: Option<Flow>,
    next_correlation_id: i32,
    client_id: String,
    /// The largest request body the broker accepts (`socket.request.max.bytes`).
    pub request_bytes_max: usize,
}

impl CaseGen {
    /// The generator of connection `lane`.
    pub fn new(lane: u64) -> Self {
        CaseGen {
            state: State::new(lane),
            flow: None,
            next_correlation_id: 1,
            client_id: format!("livefuzz-{lane}"),
            request_bytes_max: rill_protocol::frame::REQUEST_BYTES_MAX_DEFAULT,
        }
    }

    /// Forgets the running flow (its connection closed: the member ids it learned stay).
    pub fn interrupt(&mut self) {
        self.flow = None;
    }

    /// The next case.
    pub fn next<E: Entropy>(&mut self, e: &mut E) -> Case {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        if let Some((api, mode)) = self.flow_step(e) {
            let version = advertised_version(e, entry(api));
            return self.spec_case(e, api, version, mode, correlation_id);
        }
        let shape = Shape::ALL[e.weighted(&[40, 30, 17, 7, 2, 2, 2])];
        let weights: Vec<usize> = ENTRIES.iter().map(|x| api_weight(x.api_key)).collect();
        let entry = &ENTRIES[e.weighted(&weights)];
        match shape {
            Shape::Valid | Shape::Hostile | Shape::Mutated => {
                let mode = if shape == Shape::Valid {
                    Mode::Valid
                } else {
                    Mode::Hostile
                };
                let mode = if shape == Shape::Mutated {
                    Mode::Valid
                } else {
                    mode
                };
                let version = advertised_version(e, entry);
                let mut case = self.spec_case(e, entry.api_key, version, mode, correlation_id);
                if shape == Shape::Mutated {
                    let mut body = case.frame.split_off(4);
                    mutate(e, &mut body, 8);
                    case.frame = frame(&body);
                    case.shape = Shape::Mutated;
                    case.acks = None;
                } else {
                    case.shape = shape;
                }
                case
            }
            Shape::OffRange => {
                let version = off_range_version(e, entry);
                let mode = if e.chance(50) {
                    Mode::Valid
                } else {
                    Mode::Hostile
                };
                let mut case = self.spec_case(e, entry.api_key, version, mode, correlation_id);
                case.shape = Shape::OffRange;
                case.acks = None;
                case
            }
            Shape::UnknownApi => self.unknown_api(e, correlation_id),
            Shape::Torn => {
                let mut case = self.spec_case(
                    e,
                    entry.api_key,
                    entry.advertised_max,
                    Mode::Valid,
                    correlation_id,
                );
                let cut = 4 + e.below(case.frame.len() - 4);
                case.frame.truncate(cut);
                case.shape = Shape::Torn;
                case.acks = None;
                case
            }
            Shape::BadSize => self.bad_size(e, correlation_id),
        }
    }

    /// The API and mode of the running flow's next step (starting one now and then).
    fn flow_step<E: Entropy>(&mut self, e: &mut E) -> Option<(ApiKey, Mode)> {
        if self.flow.is_none() && e.chance(8) {
            let steps = [GROUP_FLOW, TXN_FLOW, TOPIC_FLOW][e.below(3)];
            let s = &mut self.state;
            // Mostly the lane's own group (rebalances with no stale members finish at once).
            s.focus.group = s.groups[if e.chance(70) {
                s.groups.len() - 1
            } else {
                e.below(s.groups.len())
            }]
            .clone();
            s.focus.transactional_id =
                s.transactional_ids[e.below(s.transactional_ids.len())].clone();
            s.focus.topic = s.topics[e.below(s.topics.len())].clone();
            self.flow = Some(Flow { steps, next: 0 });
        }
        let flow = self.flow.as_mut()?;
        let api = flow.steps[flow.next];
        flow.next += 1;
        if flow.next == flow.steps.len() {
            self.flow = None;
        }
        let mode = if e.chance(14) {
            Mode::Hostile
        } else {
            Mode::Valid
        };
        Some((api, mode))
    }

    fn spec_case<E: Entropy>(
        &mut self,
        e: &mut E,
        api: ApiKey,
        version: i16,
        mode: Mode,
        correlation_id: i32,
    ) -> Case {
        let flexible = is_flexible(api, version);
        let mut bytes = header(
            e,
            mode,
            api as i16,
            version,
            correlation_id,
            flexible,
            &self.client_id,
        );
        let generated = body(e, &mut self.state, mode, api, version);
        bytes.extend_from_slice(&generated.bytes);
        Case {
            api_key: api as i16,
            version,
            correlation_id,
            shape: if mode == Mode::Valid {
                Shape::Valid
            } else {
                Shape::Hostile
            },
            frame: frame(&bytes),
            picked: generated.picked,
            acks: generated.acks,
        }
    }

    fn unknown_api<E: Entropy>(&mut self, e: &mut E, correlation_id: i32) -> Case {
        let any = e.take(2) as i16;
        let api_key = e.pick(&[-1, 17, 36, 57, 68, 76, 1000, i16::MAX, i16::MIN, any]);
        // A key the registry gained since this list was written is not unknown.
        let known = ENTRIES.iter().any(|x| x.api_key as i16 == api_key);
        let api_key = if known { -1 } else { api_key };
        let version = e.pick(&[0, 1, 3, -1]);
        let mut bytes = header(
            e,
            Mode::Valid,
            api_key,
            version,
            correlation_id,
            false,
            &self.client_id,
        );
        let n = e.below(200);
        bytes.extend_from_slice(&e.bytes(n));
        Case {
            api_key,
            version,
            correlation_id,
            shape: Shape::UnknownApi,
            frame: frame(&bytes),
            picked: Picked::default(),
            acks: None,
        }
    }

    fn bad_size<E: Entropy>(&mut self, e: &mut E, correlation_id: i32) -> Case {
        let over = self.request_bytes_max as i64 + 1;
        let size = e.pick(&[
            -1,
            i64::from(i32::MIN),
            0,
            3,
            7,
            over,
            over + 1000,
            i64::from(i32::MAX),
        ]);
        let mut frame = (size as i32).to_be_bytes().to_vec();
        let n = if (0..8).contains(&size) {
            size as usize
        } else {
            e.below(64).min(BODY_BYTES_MAX)
        };
        frame.extend_from_slice(&e.bytes(n));
        Case {
            api_key: -1,
            version: -1,
            correlation_id,
            shape: Shape::BadSize,
            frame,
            picked: Picked::default(),
            acks: None,
        }
    }
}

fn entry(api: ApiKey) -> &'static ApiEntry {
    rill_protocol::api_registry::entry(api).expect("flows use registry APIs")
}

/// A version the broker advertises and decodes.
fn advertised_version<E: Entropy>(e: &mut E, entry: &ApiEntry) -> i16 {
    let span = (entry.advertised_max - entry.decodable_min) as usize + 1;
    entry.decodable_min + e.below(span) as i16
}

/// A version outside what the broker decodes: one below or above the range mostly (a Produce
/// v0-2 is advertised yet undecodable: also outside), far outside sometimes.
fn off_range_version<E: Entropy>(e: &mut E, entry: &ApiEntry) -> i16 {
    match e.below(6) {
        0 | 1 => entry.decodable_min - 1,
        2 | 3 => entry.advertised_max + 1,
        4 => entry.advertised_max + 2,
        _ => {
            let any = e.take(2) as i16;
            e.pick(&[-1, i16::MIN, i16::MAX, any])
        }
    }
}
