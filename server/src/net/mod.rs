//! Sockets: the per-shard accept loop, the connection quotas it applies, and the
//! per-connection request/response pipeline.
pub mod connection;
pub mod listener;
pub mod quotas;
pub mod socket_io;
pub mod tls;
