//! The groups' settings (Kafka's `group.*`, `group.consumer.*`, `group.share.*`): plain
//! values with their defaults and their bounds' checks, on the settings floor so that the
//! broker's configuration can hold them; `crate::config` fills them from the properties and
//! flags. The coordinators (`super::consumer`, `super::share`) re-export what they read.

/// Kafka's `group.*` broker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`: the first rebalance of an Empty group waits this long
    /// for more members (and again while members keep arriving, within the rebalance timeout),
    /// so that consumers started together land in one generation instead of two.
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`: members of one group, and member ids one group hands out pending
    /// their rejoin; a JoinGroup past it gets GROUP_MAX_SIZE_REACHED.
    pub max_size: usize,
    /// `rill.shard.groups.max`: groups one shard coordinates; a request that would create one
    /// more gets GROUP_MAX_SIZE_REACHED (groups loaded from the log always load).
    pub shard_groups_max: usize,
    /// `group.min.session.timeout.ms` / `group.max.session.timeout.ms`: a classic JoinGroup's
    /// session timeout outside them gets INVALID_SESSION_TIMEOUT, as Kafka answers.
    pub session_timeout_ms_min: i32,
    /// See `session_timeout_ms_min`.
    pub session_timeout_ms_max: i32,
    /// `offsets.retention.check.interval.ms`: how often groups left with nothing (no members,
    /// no offsets) are forgotten; until then they stay Empty and listed, as in Kafka.
    pub cleanup_interval_ms: rill_types::DurationMs,
    /// `group.consumer.*`: KIP-848 consumer groups.
    pub consumer: ConsumerConfig,
    /// `group.share.*`: KIP-932 share groups.
    pub share: ShareConfig,
}

/// The default `group.max.size`. Kafka's is unbounded for classic groups; each member holds its
/// JoinGroup metadata (up to a whole request), the leader's JoinGroup answer carries every
/// member's, and every rebalance of the classic protocol stops the whole group: a thousand
/// members is past what a classic group rebalances well, and keeps one group's memory bounded.
pub const GROUP_MAX_SIZE_DEFAULT: usize = 1_000;

/// The default `rill.shard.groups.max`: far more groups than a broker's consumers form, a
/// bounded map for clients that invent group ids (Kafka bounds neither).
pub const SHARD_GROUPS_MAX_DEFAULT: usize = 50_000;

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 3_000,
            max_size: GROUP_MAX_SIZE_DEFAULT,
            shard_groups_max: SHARD_GROUPS_MAX_DEFAULT,
            session_timeout_ms_min: 6_000,
            session_timeout_ms_max: 1_800_000,
            cleanup_interval_ms: rill_types::DurationMs(600_000),
            consumer: ConsumerConfig::default(),
            share: ShareConfig::default(),
        }
    }
}

/// Kafka's `group.consumer.*` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// `group.consumer.session.timeout.ms`: a member with no heartbeat for this long is fenced.
    pub session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`: how often members are told to heartbeat.
    pub heartbeat_interval_ms: i32,
    /// `group.consumer.assignors`: the first is the default (`uniform` unless configured).
    pub assignors: [Option<Assignor>; 2],
    /// `group.consumer.max.size`: members of one consumer group.
    pub max_size: usize,
    /// `group.consumer.min.session.timeout.ms`.
    pub session_timeout_min_ms: i32,
    /// `group.consumer.max.session.timeout.ms`.
    pub session_timeout_max_ms: i32,
    /// `group.consumer.min.heartbeat.interval.ms`.
    pub heartbeat_interval_min_ms: i32,
    /// `group.consumer.max.heartbeat.interval.ms`.
    pub heartbeat_interval_max_ms: i32,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            assignors: [Some(Assignor::Uniform), Some(Assignor::Range)],
            max_size: GROUP_MAX_SIZE_DEFAULT,
            session_timeout_min_ms: 45_000,
            session_timeout_max_ms: 60_000,
            heartbeat_interval_min_ms: 5_000,
            heartbeat_interval_max_ms: 15_000,
        }
    }
}

impl ConsumerConfig {
    /// Kafka's startup checks of these settings: each value within its min and max, and the
    /// heartbeat interval below the session timeout. Err: (the property at fault, why).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let within = |key, v: i32, min: i32, max: i32, min_key: &str, max_key: &str| {
            if v < min {
                return Err((key, format!("must be at least {min_key} ({min})")));
            }
            if v > max {
                return Err((key, format!("must be at most {max_key} ({max})")));
            }
            Ok(())
        };
        within(
            "group.consumer.session.timeout.ms",
            self.session_timeout_ms,
            self.session_timeout_min_ms,
            self.session_timeout_max_ms,
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        )?;
        within(
            "group.consumer.heartbeat.interval.ms",
            self.heartbeat_interval_ms,
            self.heartbeat_interval_min_ms,
            self.heartbeat_interval_max_ms,
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        )?;
        if self.heartbeat_interval_ms >= self.session_timeout_ms {
            return Err((
                "group.consumer.heartbeat.interval.ms",
                "must be less than group.consumer.session.timeout.ms".to_string(),
            ));
        }
        Ok(())
    }

    /// The value of a property [`Self::check`] names (for its error).
    pub fn value_of(&self, key: &str) -> String {
        match key {
            "group.consumer.session.timeout.ms" => self.session_timeout_ms.to_string(),
            _ => self.heartbeat_interval_ms.to_string(),
        }
    }
}

/// A server-side assignor, as the client names it in `group.remote.assignor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    /// Kafka's UniformAssignor: partitions spread evenly over the members, sticky.
    Uniform,
    /// Kafka's RangeAssignor: per topic, contiguous ranges in member order.
    Range,
}

impl Assignor {
    /// The name clients send (`uniform`, `range`).
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    /// The assignor named `name` (Kafka also takes the class names in `group.consumer.assignors`).
    pub fn from_name(name: &str) -> Option<Assignor> {
        match name {
            "uniform" | "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => {
                Some(Assignor::Uniform)
            }
            "range" | "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => {
                Some(Assignor::Range)
            }
            _ => None,
        }
    }
}

/// Kafka's `group.share.*` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareConfig {
    /// `group.share.session.timeout.ms`.
    pub session_timeout_ms: i32,
    /// `group.share.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
    /// `group.share.max.size`: members of one share group.
    pub max_size: usize,
    /// `group.share.record.lock.duration.ms`, `group.share.delivery.count.limit`,
    /// `group.share.partition.max.record.locks`.
    pub partition: PartitionSettings,
    /// `group.share.{min,max}.session.timeout.ms`.
    pub session_timeout_bounds: (i32, i32),
    /// `group.share.{min,max}.heartbeat.interval.ms`.
    pub heartbeat_interval_bounds: (i32, i32),
    /// `group.share.{min,max}.record.lock.duration.ms`.
    pub lock_duration_bounds: (i32, i32),
}

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 200,
            partition: PartitionSettings::default(),
            session_timeout_bounds: (45_000, 60_000),
            heartbeat_interval_bounds: (5_000, 15_000),
            lock_duration_bounds: (15_000, 60_000),
        }
    }
}

/// `group.share.delivery.count.limit`'s range in Kafka.
pub const DELIVERY_COUNT_LIMIT_RANGE: (i16, i16) = (2, 10);
/// `group.share.partition.max.record.locks`'s range in Kafka.
pub const MAX_RECORD_LOCKS_RANGE: (usize, usize) = (100, 10_000);
/// `group.share.max.size`'s upper bound in Kafka.
pub const MAX_SIZE_MAX: usize = 1_000;

impl ShareConfig {
    /// Kafka's startup checks of these settings: each within its min and max, the heartbeat
    /// interval below the session timeout. Err: (the property at fault, why).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let within = |key: &'static str, v: i64, (min, max): (i64, i64)| {
            if v < min || v > max {
                return Err((key, format!("must be between {min} and {max}")));
            }
            Ok(())
        };
        let wide = |(a, b): (i32, i32)| (i64::from(a), i64::from(b));
        within(
            "group.share.session.timeout.ms",
            self.session_timeout_ms.into(),
            wide(self.session_timeout_bounds),
        )?;
        within(
            "group.share.heartbeat.interval.ms",
            self.heartbeat_interval_ms.into(),
            wide(self.heartbeat_interval_bounds),
        )?;
        within(
            "group.share.record.lock.duration.ms",
            self.partition.lock_duration_ms.0,
            wide(self.lock_duration_bounds),
        )?;
        let (lo, hi) = DELIVERY_COUNT_LIMIT_RANGE;
        within(
            "group.share.delivery.count.limit",
            self.partition.delivery_count_limit.into(),
            (lo.into(), hi.into()),
        )?;
        let (lo, hi) = MAX_RECORD_LOCKS_RANGE;
        within(
            "group.share.partition.max.record.locks",
            self.partition.max_record_locks as i64,
            (lo as i64, hi as i64),
        )?;
        within(
            "group.share.max.size",
            self.max_size as i64,
            (1, MAX_SIZE_MAX as i64),
        )?;
        if self.heartbeat_interval_ms >= self.session_timeout_ms {
            return Err((
                "group.share.heartbeat.interval.ms",
                "must be less than group.share.session.timeout.ms".to_string(),
            ));
        }
        Ok(())
    }

    /// The value of a property [`Self::check`] names (for its error).
    pub fn value_of(&self, key: &str) -> String {
        match key {
            "group.share.session.timeout.ms" => self.session_timeout_ms.to_string(),
            "group.share.heartbeat.interval.ms" => self.heartbeat_interval_ms.to_string(),
            "group.share.record.lock.duration.ms" => self.partition.lock_duration_ms.to_string(),
            "group.share.delivery.count.limit" => self.partition.delivery_count_limit.to_string(),
            "group.share.partition.max.record.locks" => self.partition.max_record_locks.to_string(),
            _ => self.max_size.to_string(),
        }
    }
}

/// The share-group settings one share-partition obeys (Kafka's `group.share.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionSettings {
    /// `group.share.record.lock.duration.ms`: how long an acquired record stays locked.
    pub lock_duration_ms: rill_types::DurationMs,
    /// `group.share.delivery.count.limit`: deliveries before a record is archived.
    pub delivery_count_limit: i16,
    /// `group.share.partition.max.record.locks`: the in-flight window's length bound.
    pub max_record_locks: usize,
}

impl Default for PartitionSettings {
    fn default() -> Self {
        PartitionSettings {
            lock_duration_ms: rill_types::DurationMs(30_000),
            delivery_count_limit: 5,
            max_record_locks: 2_000,
        }
    }
}
