//! The admin listener's settings: where it binds and how many metric series it exports (its
//! label cardinality bounds). Plain values with their defaults, on the settings floor so
//! that the broker's configuration can hold them; `crate::config` fills them from the
//! properties and flags.

use std::net::SocketAddr;

/// The admin HTTP listener (metrics, health, status) and its label cardinality bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminSettings {
    /// `rill.admin.listen` / `--admin-listen`: where it binds; `None` when `off`.
    pub listen: Option<SocketAddr>,
    /// `rill.metrics.partition.series.enable`, `.partition.series.max`, `rill.metrics.topics.max`,
    /// `rill.metrics.groups.max`.
    pub limits: SeriesLimits,
}

impl Default for AdminSettings {
    fn default() -> Self {
        AdminSettings {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 9644))),
            limits: SeriesLimits {
                partition_series: true,
                partition_series_max: 10_000,
                topics_max: 1_000,
                groups_max: 1_000,
            },
        }
    }
}

/// Bounds on metric label cardinality (`rill.metrics.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesLimits {
    /// Whether per-partition series are exported at all.
    pub partition_series: bool,
    /// Per-partition series (of each family) exported at most; the rest are dropped and counted.
    pub partition_series_max: usize,
    /// Topics with their own series; the others are summed under `topic="_other"`.
    pub topics_max: usize,
    /// Groups with their own series; the others are summed under `group="_other"`.
    pub groups_max: usize,
}
