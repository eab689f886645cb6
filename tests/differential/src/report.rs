//! What a run found: differences grouped by (API, path), matched against `known.txt`, the cases
//! that passed, and which advertised (API, version) pairs the run compared.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::known::Known;
use crate::pair::{Difference, Pair, Peer};

/// The outcome.
pub struct Summary {
    failed_cases: usize,
}

impl Summary {
    /// Whether every case passed.
    pub fn ok(&self) -> bool {
        self.failed_cases == 0
    }
}

/// One difference across versions and cases.
struct Group<'a> {
    versions: BTreeSet<i16>,
    cases: BTreeSet<&'a str>,
    /// Cases in which no known.txt line covers it.
    unlisted_cases: BTreeSet<&'a str>,
    example: &'a Difference,
    known: Option<&'a Known>,
}

/// A path with this run's topic names generalised, so one difference seen on many topics is one.
fn general_path(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(at) = rest.find("=kd") {
        out.push_str(&rest[..at]);
        out.push_str("=kd-*");
        let end = rest[at..].find(']').map_or(rest.len(), |e| at + e);
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn show(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("(absent)")
}

/// Prints the report and returns its outcome.
pub fn summarise(
    pair: &Pair,
    known: &[Known],
    ran: &[(&str, Duration)],
    errors: &[(&str, String)],
    all: bool,
) -> Summary {
    let groups = group(pair, known);
    let unlisted: Vec<_> = groups
        .iter()
        .filter(|(_, g)| !g.unlisted_cases.is_empty())
        .collect();
    println!("== differences not listed in known.txt: {}", unlisted.len());
    for ((api, path), g) in &unlisted {
        print_group(api, path, g);
    }
    if all {
        println!("== listed differences");
        for ((api, path), g) in groups.iter().filter(|(_, g)| g.unlisted_cases.is_empty()) {
            print!("[{}] ", g.known.map_or("", |k| k.id.as_str()));
            print_group(api, path, g);
        }
    }
    for k in known.iter().filter(|k| {
        !groups
            .iter()
            .any(|((api, path), g)| g.cases.iter().any(|c| k.matches(c, api, path)))
    }) {
        println!(
            "stale known.txt line (matched nothing this run): {} {} {} {}",
            k.id, k.case, k.api, k.glob
        );
    }
    print_coverage(pair);
    let failing: BTreeSet<&str> = unlisted
        .iter()
        .flat_map(|(_, g)| g.unlisted_cases.iter().copied())
        .collect();
    let failed_cases = print_cases(ran, errors, &failing);
    let ids: BTreeSet<&str> = groups
        .values()
        .filter(|g| g.unlisted_cases.is_empty())
        .filter_map(|g| g.known.map(|k| k.id.as_str()))
        .collect();
    println!(
        "kdiff: {} differences found ({} listed, under {} COMPATIBILITY.md ids; {} unlisted)",
        groups.len(),
        groups.len() - unlisted.len(),
        ids.len(),
        unlisted.len()
    );
    println!(
        "kdiff: {} passed, {} failed",
        ran.len() - failed_cases,
        failed_cases
    );
    Summary { failed_cases }
}

/// The differences grouped by (API, generalised path), each matched against known.txt.
fn group<'a>(pair: &'a Pair, known: &'a [Known]) -> BTreeMap<(String, String), Group<'a>> {
    let mut groups: BTreeMap<(String, String), Group> = BTreeMap::new();
    for d in &pair.differences {
        let path = general_path(&d.path);
        let line = known.iter().find(|k| k.matches(&d.case, &d.api, &path));
        let g = groups
            .entry((d.api.clone(), path))
            .or_insert_with(|| Group {
                versions: BTreeSet::new(),
                cases: BTreeSet::new(),
                unlisted_cases: BTreeSet::new(),
                example: d,
                known: None,
            });
        g.versions.insert(d.version);
        g.cases.insert(d.case.as_str());
        match line {
            None => {
                g.unlisted_cases.insert(d.case.as_str());
            }
            Some(line) => g.known = g.known.or(Some(line)),
        }
    }
    groups
}

fn print_group(api: &str, path: &str, g: &Group) {
    let versions: Vec<String> = g.versions.iter().map(i16::to_string).collect();
    println!(
        "  {api} v{} {path}: kafka={} rill={}  ({})",
        versions.join(","),
        show(&g.example.kafka),
        show(&g.example.rill),
        g.cases.iter().copied().collect::<Vec<_>>().join(", ")
    );
}

/// Every (API, version) Rill advertises that no case compared.
fn print_coverage(pair: &Pair) {
    let compared: BTreeSet<(&str, i16)> = pair
        .compared
        .iter()
        .map(|(_, api, v)| (api.as_str(), *v))
        .collect();
    let mut missing = Vec::new();
    let mut total = 0;
    for (&key, &(min, max)) in &pair.ranges[&Peer::Rill] {
        let Ok(api) = rill_protocol::kafka_protocol::messages::ApiKey::try_from(key) else {
            continue;
        };
        let name = format!("{api:?}");
        for v in min..=max {
            total += 1;
            if !compared.contains(&(name.as_str(), v)) {
                missing.push(format!("{name} v{v}"));
            }
        }
    }
    println!(
        "coverage: {} of the {total} (API, version) pairs Rill advertises were compared",
        total - missing.len()
    );
    if !missing.is_empty() {
        println!("  not compared: {}", missing.join(", "));
    }
}

fn print_cases(
    ran: &[(&str, Duration)],
    errors: &[(&str, String)],
    unlisted: &BTreeSet<&str>,
) -> usize {
    let mut failed = 0;
    for (name, took) in ran {
        let error = errors.iter().find(|(n, _)| n == name);
        let verdict = if let Some((_, e)) = error {
            format!("ERROR {e}")
        } else if unlisted.contains(name) {
            "FAIL (unlisted differences)".to_string()
        } else {
            "ok".to_string()
        };
        if verdict != "ok" {
            failed += 1;
        }
        println!("case {name}: {verdict} ({:.1}s)", took.as_secs_f64());
    }
    failed
}
