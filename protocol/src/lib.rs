//! Rill wire protocol.
