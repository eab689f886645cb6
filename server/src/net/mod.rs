//! Sockets: the per-shard accept loop and the per-connection request/response pipeline.
pub mod connection;
pub mod listener;
pub mod socket_io;
