//! Rill storage engine.
