//! The `rill` binary: parse flags, resolve config, run the broker until SIGTERM/SIGINT.
fn main() {}
