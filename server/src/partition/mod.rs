//! Partitions on their owning shard: the messages they accept ([`ops`]), the actor that alone
//! touches a log ([`actor`]), the long-poll watch ([`watch`]) and the shard's table ([`table`]).
pub mod actor;
pub mod ops;
pub mod table;
pub mod timestamp_lookup;
pub mod watch;

#[cfg(test)]
mod table_tests;
