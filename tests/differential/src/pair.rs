//! Kafka and Rill side by side: every request of a case goes to both, and both answers are
//! flattened, normalised and compared; what differs is kept as a [`Difference`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::RangeInclusive;

use anyhow::Context;
use rill_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::normalise::Normaliser;
use crate::records::batch_leaves;
use crate::tree::{self, Leaf};
use crate::wire::{api_key_of, Answer, Connection};

/// Which broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Peer {
    Kafka,
    Rill,
}

/// One field that differs (or is present on one side only).
#[derive(Debug, Clone)]
pub struct Difference {
    pub case: String,
    pub api: String,
    pub version: i16,
    pub path: String,
    pub kafka: Option<String>,
    pub rill: Option<String>,
}

/// One broker: its connection, its numbering and what its earlier answers handed out.
pub struct Side {
    pub peer: Peer,
    conn: Connection,
    norm: Normaliser,
    /// Values a later request of the case needs (member ids, producer ids, ..), by name.
    pub state: HashMap<String, String>,
}

impl Side {
    fn new(peer: Peer, address: &str) -> Side {
        Side {
            peer,
            conn: Connection::new(address),
            norm: Normaliser::default(),
            state: HashMap::new(),
        }
    }

    /// A saved value, or `default`.
    pub fn get(&self, name: &str, default: &str) -> String {
        self.state
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    /// A saved integer, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.state
            .get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }
}

/// The two brokers, the case being run and what differed so far.
pub struct Pair {
    pub kafka: Side,
    pub rill: Side,
    case: String,
    pub differences: Vec<Difference>,
    /// Each side's advertised ranges, from ApiVersions.
    pub ranges: BTreeMap<Peer, BTreeMap<i16, (i16, i16)>>,
    /// (case, api, version) pairs that were compared.
    pub compared: BTreeSet<(String, String, i16)>,
    /// Path prefixes this case leaves out of every comparison (another case compares them).
    ignored: Vec<String>,
}

impl Pair {
    /// Connects to both (lazily) and reads their ApiVersions.
    pub fn new(kafka: &str, rill: &str) -> anyhow::Result<Pair> {
        let mut pair = Pair {
            kafka: Side::new(Peer::Kafka, kafka),
            rill: Side::new(Peer::Rill, rill),
            case: String::new(),
            differences: Vec::new(),
            ranges: BTreeMap::new(),
            compared: BTreeSet::new(),
            ignored: Vec::new(),
        };
        for peer in [Peer::Kafka, Peer::Rill] {
            let ranges = read_ranges(pair.side(peer))?;
            pair.ranges.insert(peer, ranges);
        }
        Ok(pair)
    }

    /// Starts a case: fresh numbering and state on both sides.
    pub fn begin(&mut self, case: &str) {
        self.case = case.to_string();
        self.ignored.clear();
        for side in [&mut self.kafka, &mut self.rill] {
            side.norm = Normaliser::default();
            side.state.clear();
        }
    }

    /// Leaves paths starting with any of `prefixes` out of this case's comparisons.
    pub fn ignore(&mut self, prefixes: &[&str]) {
        self.ignored.extend(prefixes.iter().map(|p| p.to_string()));
    }

    fn side(&mut self, peer: Peer) -> &mut Side {
        match peer {
            Peer::Kafka => &mut self.kafka,
            Peer::Rill => &mut self.rill,
        }
    }

    /// The versions of `api` both brokers advertise (Rill's range is checked against Kafka's by
    /// the api_versions case).
    pub fn versions(&self, api: ApiKey) -> RangeInclusive<i16> {
        let get = |peer| {
            self.ranges
                .get(&peer)
                .and_then(|r| r.get(&(api as i16)))
                .copied()
        };
        match (get(Peer::Kafka), get(Peer::Rill)) {
            (Some((kmin, kmax)), Some((rmin, rmax))) => kmin.max(rmin)..=kmax.min(rmax),
            #[allow(clippy::reversed_empty_ranges)] // the empty range: not advertised by both
            _ => 1..=0,
        }
    }

    /// Sends the request `build` makes for each side (from that side's state) to both, compares
    /// the answers and returns them (Kafka's first).
    pub fn both(
        &mut self,
        version: i16,
        build: impl Fn(&Side) -> RequestKind,
    ) -> anyhow::Result<[Answer; 2]> {
        let [k, r] = self.send(version, &build)?;
        let api = format!("{:?}", api_key_of(&build(&self.kafka)));
        let kafka_leaves = leaves_of(&mut self.kafka, &api, &k)?;
        let rill_leaves = leaves_of(&mut self.rill, &api, &r)?;
        if std::env::var_os("KDIFF_DUMP").is_some() {
            for (peer, leaves) in [("kafka", &kafka_leaves), ("rill", &rill_leaves)] {
                for (path, value) in leaves {
                    eprintln!("{} {api} v{version} {peer} {path} = {value}", self.case);
                }
            }
        }
        self.compare(&api, version, &kafka_leaves, &rill_leaves);
        self.compared.insert((self.case.clone(), api, version));
        Ok([k, r])
    }

    /// Sends to both without comparing (set-up steps whose answers are not the point).
    pub fn send(
        &mut self,
        version: i16,
        build: &impl Fn(&Side) -> RequestKind,
    ) -> anyhow::Result<[Answer; 2]> {
        let k = self.kafka.conn.call(&build(&self.kafka), version);
        let r = self.rill.conn.call(&build(&self.rill), version);
        let k = k.with_context(|| format!("kafka at {}", self.kafka.conn.address()))?;
        let r = r.with_context(|| format!("rill at {}", self.rill.conn.address()))?;
        Ok([k, r])
    }

    /// Records a difference found outside a response comparison (e.g. in ApiVersions ranges).
    pub fn note(
        &mut self,
        api: &str,
        version: i16,
        path: &str,
        kafka: Option<String>,
        rill: Option<String>,
    ) {
        self.differences.push(Difference {
            case: self.case.clone(),
            api: api.to_string(),
            version,
            path: path.to_string(),
            kafka,
            rill,
        });
    }

    fn compare(&mut self, api: &str, version: i16, kafka: &[Leaf], rill: &[Leaf]) {
        let kept = |(p, _): &&Leaf| !self.ignored.iter().any(|i| p.starts_with(i.as_str()));
        let k: BTreeMap<&str, &str> = kafka
            .iter()
            .filter(kept)
            .map(|(p, v)| (p.as_str(), v.as_str()))
            .collect();
        let r: BTreeMap<&str, &str> = rill
            .iter()
            .filter(kept)
            .map(|(p, v)| (p.as_str(), v.as_str()))
            .collect();
        let mut reported_absent: Vec<String> = Vec::new();
        for (path, kv) in &k {
            match r.get(path) {
                Some(rv) if rv == kv => {}
                Some(rv) => self.note(
                    api,
                    version,
                    path,
                    Some(kv.to_string()),
                    Some(rv.to_string()),
                ),
                None => {
                    let top = absent_top(path, &r);
                    if !reported_absent.contains(&top) {
                        reported_absent.push(top.clone());
                        self.note(api, version, &top, Some(summary(&top, &k)), None);
                    }
                }
            }
        }
        for path in r.keys().filter(|p| !k.contains_key(*p)) {
            let top = absent_top(path, &k);
            if !reported_absent.contains(&top) {
                reported_absent.push(top.clone());
                self.note(api, version, &top, None, Some(summary(&top, &r)));
            }
        }
    }
}

/// The outermost list element (or the path itself) of `path` that `other` has no leaf under.
fn absent_top(path: &str, other: &BTreeMap<&str, &str>) -> String {
    let mut end = 0;
    while let Some(i) = path[end..].find(']') {
        let prefix = &path[..end + i + 1];
        if !other.keys().any(|p| p.starts_with(prefix)) {
            return prefix.to_string();
        }
        end += i + 1;
    }
    path.to_string()
}

/// What one side has under `top`: its value, or how many leaves.
fn summary(top: &str, leaves: &BTreeMap<&str, &str>) -> String {
    match leaves.get(top) {
        Some(v) => v.to_string(),
        None => {
            let under: Vec<String> = leaves
                .iter()
                .filter(|(p, _)| p.starts_with(top))
                .take(4)
                .map(|(p, v)| format!("{}={v}", &p[top.len()..]))
                .collect();
            format!("{{{}}}", under.join(" "))
        }
    }
}

/// An answer as normalised leaves.
fn leaves_of(side: &mut Side, api: &str, answer: &Answer) -> anyhow::Result<Vec<Leaf>> {
    let raw = match answer {
        Answer::Closed => vec![("(connection)".to_string(), "closed".to_string())],
        Answer::NoResponse => vec![("(connection)".to_string(), "no response".to_string())],
        Answer::Response(response) => response_leaves(response)?,
    };
    if std::env::var("KDIFF_DUMP").as_deref() == Ok("raw") {
        return Ok(raw);
    }
    Ok(side.norm.apply(api, raw))
}

fn response_leaves(response: &ResponseKind) -> anyhow::Result<Vec<Leaf>> {
    let mut leaves = Vec::new();
    if let ResponseKind::Fetch(fetch) = response {
        // Records are compared batch by batch (records.rs), the rest as text.
        let mut stripped = fetch.clone();
        for topic in &mut stripped.responses {
            for partition in &mut topic.partitions {
                if let Some(records) = partition.records.take() {
                    let prefix = format!(
                        "responses[topic={}].partitions[partition_index={}]",
                        topic.topic.0.as_str(),
                        partition.partition_index
                    );
                    leaves.extend(batch_leaves(&prefix, &records));
                }
            }
        }
        let mut rest = Vec::new();
        tree::flatten(&tree::parse(&format!("{stripped:?}"))?, "", &mut rest);
        rest.extend(leaves);
        return Ok(rest);
    }
    tree::flatten(&tree::parse(&format!("{response:?}"))?, "", &mut leaves);
    Ok(leaves)
}

/// A broker's advertised ranges, by api key.
fn read_ranges(side: &mut Side) -> anyhow::Result<BTreeMap<i16, (i16, i16)>> {
    use rill_protocol::kafka_protocol::messages::ApiVersionsRequest;
    use rill_protocol::kafka_protocol::protocol::StrBytes;
    let request = RequestKind::ApiVersions(
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("rill-kdiff"))
            .with_client_software_version(StrBytes::from_static_str("1")),
    );
    match side.conn.call(&request, 3)? {
        Answer::Response(response) => match *response {
            ResponseKind::ApiVersions(r) => Ok(r
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect()),
            other => anyhow::bail!("ApiVersions answered {other:?}"),
        },
        other => anyhow::bail!("ApiVersions: {other:?} from {:?}", side.peer),
    }
}
