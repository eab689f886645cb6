//! Partitions on their owning shard: the messages they accept ([`ops`]), the actor that alone
//! touches a log ([`actor`]), the long-poll watch ([`watch`]), the shard's table ([`table`]) and
//! its open-file budget ([`file_budget`]); [`txn_guard`]: the verification of a transactional
//! producer's first append (KIP-890).
pub mod actor;
pub mod file_budget;
pub mod internal;
pub mod ops;
pub mod table;
pub mod timestamp_lookup;
pub mod txn_guard;
pub mod watch;

#[cfg(test)]
mod replicated_tests;
#[cfg(test)]
mod table_tests;
