//! What this build is: a leaf that the flags (`rill --version`) and the admin listener's status
//! (`crate::admin::state::BrokerInfo`) both name.

/// `rill --version`: the crate version and the git commit it was built from (see build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("RILL_GIT_COMMIT"),
    ")"
);
