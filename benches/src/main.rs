//! `rill-bench`: the Kafka load, latency and comparison tool for Rill (any Kafka broker, in fact).
//!
//! # Client choice
//! It speaks Kafka through **librdkafka via the `rdkafka` crate**, built from the vendored sources
//! (`rdkafka-sys`'s default `./configure && make` build, no cmake) with zlib and zstd compiled
//! in from source (`libz-static`, `zstd`), and TLS through the system OpenSSL (`ssl`, Debian's
//! `libssl-dev`: `-X security.protocol=ssl` measures a TLS listener with the same client; no
//! SASL). Why: librdkafka is the client the
//! broker's users run and the one every published Kafka benchmark (Redpanda, Confluent, tansu's own
//! `perf`) measures with, so figures are comparable; it has a real batching/linger pipeline, all
//! five compression codecs and an admin API. The C build
//! costs about two minutes once on two cores, cached afterwards. The pure-Rust clients were weaker
//! fits: `rskafka` hard-codes acks=all and has no linger pipeline, `kafka` (kafka-rust) is sync
//! and unmaintained.
//!
//! # Map
//! - [`cli`]: the command line (one struct per subcommand).
//! - [`client`]: librdkafka configuration and topic creation through the admin API.
//! - [`pacer`] + [`payload`]: open-loop send schedule and the intended-send-time stamp.
//! - [`latency`]: `rill-bench latency` (produce→ack and produce→consume, HdrHistogram).
//! - [`throughput`]: `rill-bench throughput` (msg/s, MB/s, broker CPU seconds per GB).
//! - [`mixed`]: a producer's latency alone and beside a catch-up consumer (`compare`).
//! - [`mixed_pool`]: `rill-bench mixed-pool`, several such runs of one build merged.
//! - [`report`]: percentile tables, JSON lines and `.hgrm` files.
//! - [`proc_stat`]: CPU time of a local broker from `/proc/<pid>/stat`.
//! - [`machine`]: this machine's limits (O_DIRECT write with `dd`, loopback TCP blast).
//! - [`broker`], [`compare`], [`chart`]: Rill vs a peer broker side by side, with SVG charts.
//! - [`partitions`]: `rill-bench partitions`, what thousands of partitions cost one broker.
//! - [`flamegraph`]: `perf script` output → folded stacks → flame graph SVG + top self costs.

mod broker;
mod chart;
mod cli;
mod client;
mod compare;
mod flamegraph;
mod latency;
mod machine;
mod mixed;
mod mixed_pool;
mod pacer;
mod partitions;
mod payload;
mod proc_stat;
mod report;
mod throughput;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let cli = cli::Cli::parse();
    client::set_extra_config(cli.client_config);
    match cli.command {
        cli::Command::Latency(args) => {
            let result = latency::run(&args)?;
            latency::print(&args, &result)
        }
        cli::Command::Throughput(args) => {
            let result = throughput::run(&args)?;
            throughput::print(&result);
            Ok(())
        }
        cli::Command::Compare(args) => compare::run(&args),
        cli::Command::Machine(args) => machine::run_cli(&args),
        cli::Command::Partitions(args) => partitions::run(&args),
        cli::Command::Flamegraph(args) => flamegraph::run(&args),
        cli::Command::MixedPool(args) => mixed_pool::run(&args),
    }
}
