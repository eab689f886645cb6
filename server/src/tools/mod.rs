//! Offline tools in the `rill` binary, beside the broker (`rill` with no subcommand).
//!
//! - [`dump_log`]: `rill dump-log FILE... [--print-records]`, what is in `.log`, `.index` and
//!   `.timeindex` files, like Kafka's `kafka-dump-log.sh`.
//! - [`check`]: `rill check DATA_DIR [--repair]`, every segment and index verified by the
//!   engine's own code (`rill_engine::verify`), damage named, cut the way recovery cuts.
//! - [`check_remote`]: `rill check DATA_DIR --remote-config FILE`, the remote tier's objects
//!   against each tiered partition's remote log metadata (orphans, dangling records).
//! - [`std_storage`]: the engine's storage trait over blocking `std::fs`, so the tools need no
//!   io_uring, no locked memory and no O_DIRECT-capable file system.

pub mod check;
pub mod check_remote;
pub mod dump_log;
pub mod std_storage;

use std::io::{self, Write};
use std::path::PathBuf;

/// The subcommands of `rill`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// Print the batches of .log files and the entries of .index/.timeindex files.
    DumpLog {
        /// Segment files: <base offset>.log, .index or .timeindex.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        /// Also print every record's offset, timestamp, key and value.
        #[arg(long)]
        print_records: bool,
    },
    /// Verify every segment and index of a data directory offline; exit 1 if any is damaged.
    Check {
        /// The broker's data directory (--data-dir).
        #[arg(value_name = "DATA_DIR")]
        data_dir: PathBuf,
        /// Cut damaged tails the way recovery does, rebuild damaged indexes (broker stopped).
        #[arg(long)]
        repair: bool,
        /// Also check the remote tier: the broker properties file whose `rill.remote.*` name
        /// the object store; every tiered partition's objects against its remote log metadata.
        #[arg(long, value_name = "FILE")]
        remote_config: Option<PathBuf>,
    },
}

/// Runs a tool; returns the process exit status.
pub fn run(command: Command) -> i32 {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let status = match command {
        Command::DumpLog {
            files,
            print_records,
        } => dump_files(&files, print_records, &mut out),
        Command::Check {
            data_dir,
            repair,
            remote_config,
        } => check::run(&data_dir, repair, &mut out).and_then(|status| match remote_config {
            None => Ok(status),
            Some(config) => Ok(status.max(check_remote::run(&data_dir, &config, &mut out)?)),
        }),
    };
    let flushed = out.flush();
    match flushed.and(status) {
        Ok(status) => status,
        // `rill dump-log ... | head` closes the pipe early: not a failure.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("error: {e}");
            check::EXIT_ERROR
        }
    }
}

/// Dumps each file in turn: 0 if all were clean, 1 if any was damaged, 2 if any could not be
/// read (the others are still dumped).
fn dump_files(files: &[PathBuf], print_records: bool, out: &mut dyn Write) -> io::Result<i32> {
    let mut status = check::EXIT_CLEAN;
    for path in files {
        match dump_log::dump_file(path, print_records, out) {
            Ok(dump_log::Verdict::Clean) => {}
            Ok(dump_log::Verdict::Damaged) => status = status.max(check::EXIT_DAMAGED),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Err(e),
            Err(e) => {
                out.flush()?;
                eprintln!("error: {}: {e}", path.display());
                status = check::EXIT_ERROR;
            }
        }
    }
    Ok(status)
}
