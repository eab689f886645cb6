//! The `rill` binary: parse flags, resolve config, run the broker until SIGTERM/SIGINT.

use anyhow::Context;
use clap::Parser;
use rill_server::cli::Cli;
use rill_server::config::BrokerConfig;

fn main() -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let cli = Cli::parse();
    let config = BrokerConfig::resolve(&cli).context("invalid configuration")?;
    tracing::info!(
        listen = %config.listen,
        advertise = format!("{}:{}", config.advertise_host, config.advertise_port),
        data_dir = %config.data_dir.display(),
        shards = config.shards,
        default_partitions = config.default_partitions,
        auto_create_topics = config.auto_create_topics,
        "starting rill"
    );
    let stop =
        rill_server::shutdown::install_signal_handlers().context("installing signal handlers")?;
    rill_server::shard::runtime::run(config, stop)?;
    tracing::info!("rill stopped cleanly");
    Ok(())
}
