//! raft-rs logs through `slog`; this drain forwards its records to `tracing` (target `raft`), with
//! their key-value pairs, so the metadata quorum logs like the rest of Rill.

use std::fmt::Write as _;

use slog::{Drain, Level, OwnedKVList, Record, KV};

/// The logger handed to raft-rs for one node.
pub fn logger(node: crate::types::NodeId) -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!("node" => node.0))
}

struct TracingDrain;

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        let mut line = record.msg().to_string();
        let mut fields = Fields(&mut line);
        let _ = record.kv().serialize(record, &mut fields);
        let _ = values.serialize(record, &mut fields);
        match record.level() {
            Level::Critical | Level::Error => tracing::error!(target: "raft", "{line}"),
            Level::Warning => tracing::warn!(target: "raft", "{line}"),
            Level::Info => tracing::info!(target: "raft", "{line}"),
            Level::Debug => tracing::debug!(target: "raft", "{line}"),
            Level::Trace => tracing::trace!(target: "raft", "{line}"),
        }
        Ok(())
    }
}

/// Appends ` key=value` for each pair.
struct Fields<'a>(&'a mut String);

impl slog::Serializer for Fields<'_> {
    fn emit_arguments(&mut self, key: slog::Key, value: &std::fmt::Arguments<'_>) -> slog::Result {
        let _ = write!(self.0, " {key}={value}");
        Ok(())
    }
}
