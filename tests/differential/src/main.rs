//! `kdiff`: the differential protocol suite. The same request sequences go to Apache Kafka and
//! to Rill; the responses are compared field by field after normalising what must differ (node
//! ids, cluster ids, ports, throttle times: see `normalise.rs`). Every difference must be listed
//! in `known.txt` (and explained in COMPATIBILITY.md) or the run fails.
//!
//! ```text
//! kdiff --kafka 127.0.0.1:PORT --rill 127.0.0.1:PORT [--known tests/differential/known.txt]
//!       [--only SUBSTRING] [--all]
//! ```
//! `tests/differential/run.sh` starts both brokers and runs it (that is what `test.sh` does).
//! `--all` prints listed differences too, not only the unlisted ones; `KDIFF_DUMP=1` prints
//! every normalised leaf of both answers to stderr (`KDIFF_DUMP=raw`: before normalising).

mod cases;
mod known;
mod normalise;
mod pair;
mod records;
mod report;
mod tree;
mod wire;

use std::path::PathBuf;

use anyhow::{bail, Context};

struct Args {
    kafka: String,
    rill: String,
    known: PathBuf,
    only: Option<String>,
    all: bool,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        kafka: String::new(),
        rill: String::new(),
        known: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/known.txt")),
        only: None,
        all: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--kafka" => args.kafka = value()?,
            "--rill" => args.rill = value()?,
            "--known" => args.known = PathBuf::from(value()?),
            "--only" => args.only = Some(value()?),
            "--all" => args.all = true,
            other => bail!("unknown argument {other}"),
        }
    }
    if args.kafka.is_empty() || args.rill.is_empty() {
        bail!(
            "usage: kdiff --kafka HOST:PORT --rill HOST:PORT [--known FILE] [--only NAME] [--all]"
        );
    }
    Ok(args)
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let known = known::load(&args.known)?;
    let mut pair = pair::Pair::new(&args.kafka, &args.rill)?;
    let mut errors = Vec::new();
    let mut ran = Vec::new();
    for (name, case) in cases::all() {
        if args
            .only
            .as_ref()
            .is_some_and(|o| !name.contains(o.as_str()))
        {
            continue;
        }
        pair.begin(name);
        let started = std::time::Instant::now();
        if let Err(error) = case(&mut pair) {
            errors.push((name, format!("{error:#}")));
        }
        ran.push((name, started.elapsed()));
    }
    let summary = report::summarise(&pair, &known, &ran, &errors, args.all);
    std::process::exit(i32::from(!summary.ok()));
}
