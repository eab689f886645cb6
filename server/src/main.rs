//! The `rill` binary: parse flags, resolve config, run the broker until SIGTERM/SIGINT; or run one
//! of the offline tools (`rill dump-log`, `rill check`, see [`rill_server::tools`]).

use anyhow::Context;
use clap::Parser;
use rill_server::cli::Cli;
use rill_server::config::BrokerConfig;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(command) = cli.command {
        // Tools print their findings on stdout; the engine's log lines (a repair's cuts) go to
        // stderr.
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
        let log = tracing_subscriber::fmt().with_env_filter(filter);
        log.with_writer(std::io::stderr).init();
        std::process::exit(rill_server::tools::run(command));
    }
    init_broker_log();
    let config = BrokerConfig::resolve(&cli).context("invalid configuration")?;
    tracing::info!(
        version = rill_server::cli::VERSION,
        listen = %config.listen,
        advertise = format!("{}:{}", config.advertise_host, config.advertise_port),
        data_dir = %config.data_dir.display(),
        shards = config.shards,
        default_partitions = config.default_partitions,
        auto_create_topics = config.auto_create_topics,
        "starting rill"
    );
    log_open_files_limit(&config);
    let stop =
        rill_server::shutdown::install_signal_handlers().context("installing signal handlers")?;
    rill_server::shard::runtime::run(config, stop)?;
    tracing::info!("rill stopped cleanly");
    Ok(())
}

/// Raises RLIMIT_NOFILE to its hard limit (Kafka's documentation asks operators for a high
/// limit; partitions, connections and io_uring all use descriptors) and logs what it is.
fn log_open_files_limit(config: &BrokerConfig) {
    use rill_server::open_files;
    match open_files::raise_to_hard_limit() {
        Ok(limit) => {
            let per_shard =
                open_files::shard_budget(config.shard_open_files_max, limit.now, config.shards);
            if limit.now < limit.hard {
                tracing::warn!(
                    limit = limit.now,
                    hard = limit.hard,
                    "could not raise the open files limit to its hard limit"
                );
            }
            tracing::info!(
                before = limit.before,
                limit = limit.now,
                hard = limit.hard,
                partition_files_per_shard = per_shard,
                "open files limit (RLIMIT_NOFILE)"
            );
        }
        Err(e) => tracing::warn!(error = %e, "cannot read the open files limit"),
    }
}

/// The broker's log: RUST_LOG-filtered lines on stdout, plus every warning and error kept for
/// the admin status page (whatever RUST_LOG says).
fn init_broker_log() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let recent = rill_server::admin::errors::layer()
        .with_filter(tracing_subscriber::filter::LevelFilter::WARN);
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_filter(filter))
        .with(recent)
        .init();
}
