//! A stateful fuzzer for a live broker (issue 26): requests generated from Kafka's JSON message
//! specs for every API and version in the registry, sent over many connections beside a
//! well-behaved producer and consumer (the `livefuzz` binary), and the same generator driven by
//! cargo-fuzz input against the in-process dispatcher (server/fuzz `stateful_sequence`).
//!
//! # Map
//! - [`entropy`]: where choices come from: a seeded PRNG per connection, or fuzz input bytes.
//! - [`wire`]: Kafka's primitive encodings, with lengths that can lie.
//! - [`values`]: field-aware values (pools, learned ids, the hostile classes).
//! - [`records`]: Produce's record batches, valid and corrupt.
//! - [`generate`]: a header and body from the spec of an API at a version.
//! - [`mutate`]: byte-level mutations of a valid body.
//! - [`case`]: the case mix and flows of one connection ([`case::CaseGen`]).
//! - [`state`]: pools and what the broker's answers taught a connection.
//! - [`oracle`]: what a response must look like.

pub mod case;
pub mod entropy;
pub mod generate;
pub mod mutate;
pub mod oracle;
pub mod records;
pub mod state;
pub mod values;
pub mod wire;

#[cfg(test)]
mod tests;
