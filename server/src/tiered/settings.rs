//! The broker's tiered-storage settings: Kafka's `remote.log.storage.system.enable`, and the
//! object store Rill's own remote storage manager talks to (`rill.remote.*`; Kafka leaves these
//! to its storage plugin's properties).

/// What `rill.remote.*` and `remote.log.storage.system.enable` say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteStorageSettings {
    /// `remote.log.storage.system.enable`: whether topics may set `remote.storage.enable`.
    pub system_enable: bool,
    /// `rill.remote.endpoint`: the S3 endpoint (`http://127.0.0.1:9000`); `None`: AWS's.
    pub endpoint: Option<String>,
    /// `rill.remote.bucket`: the bucket every segment goes to.
    pub bucket: String,
    /// `rill.remote.region`.
    pub region: String,
    /// `rill.remote.access.key.id` (`None`: the environment's credentials).
    pub access_key_id: Option<String>,
    /// `rill.remote.secret.access.key` (never shown by DescribeConfigs).
    pub secret_access_key: Option<String>,
    /// `rill.remote.prefix`: the key prefix of every object (see `tiered::keys`).
    pub prefix: String,
    /// `rill.remote.upload.concurrency`: object-store requests in flight per shard at once
    /// (uploads and remote reads together), 1 to [`REMOTE_REQUESTS_MAX`].
    pub requests_per_shard: usize,
    /// `rill.remote.retry.backoff.ms`: first pause after a failed copy; doubled on each
    /// further failure up to `rill.remote.retry.backoff.max.ms`.
    pub retry_backoff_ms: u64,
    /// `rill.remote.retry.backoff.max.ms`.
    pub retry_backoff_max_ms: u64,
    /// `remote.log.manager.copy.max.bytes.per.second` (Kafka's, per broker; split evenly
    /// among the shards): bytes a broker's copies put per second at most (`None`: no bound).
    pub copy_bytes_per_second: Option<u64>,
    /// `rill.remote.task.interval.ms`: how often a tiered partition looks for segments to copy
    /// or delete (Kafka's `remote.log.manager.task.interval.ms`, 30 s by default).
    pub task_interval_ms: u64,
}

/// Most object-store requests a shard keeps in flight (each holds a tokio blocking thread).
pub const REMOTE_REQUESTS_MAX: usize = 16;

impl Default for RemoteStorageSettings {
    fn default() -> Self {
        RemoteStorageSettings {
            system_enable: false,
            endpoint: None,
            bucket: String::new(),
            region: "us-east-1".into(),
            access_key_id: None,
            secret_access_key: None,
            prefix: "rill".into(),
            requests_per_shard: 4,
            retry_backoff_ms: 500,
            retry_backoff_max_ms: 30_000,
            copy_bytes_per_second: None,
            task_interval_ms: 30_000,
        }
    }
}

impl RemoteStorageSettings {
    /// Applies one property; `Ok(false)` if the key is not one of these, `Err(reason)` for a
    /// bad value.
    pub fn apply_property(&mut self, key: &str, v: &str) -> Result<bool, String> {
        let text = || (!v.is_empty()).then(|| v.to_string());
        match key {
            "remote.log.storage.system.enable" => self.system_enable = boolean(v)?,
            "rill.remote.endpoint" => self.endpoint = text(),
            "rill.remote.bucket" => self.bucket = v.to_string(),
            "rill.remote.region" => self.region = v.to_string(),
            "rill.remote.access.key.id" => self.access_key_id = text(),
            "rill.remote.secret.access.key" => self.secret_access_key = text(),
            "rill.remote.prefix" => self.prefix = v.trim_matches('/').to_string(),
            "rill.remote.upload.concurrency" => {
                self.requests_per_shard = number(v, 1, REMOTE_REQUESTS_MAX as u64)? as usize
            }
            "rill.remote.retry.backoff.ms" => self.retry_backoff_ms = number(v, 1, u64::MAX)?,
            "rill.remote.retry.backoff.max.ms" => {
                self.retry_backoff_max_ms = number(v, 1, u64::MAX)?
            }
            "rill.remote.task.interval.ms" => self.task_interval_ms = number(v, 1, u64::MAX)?,
            // Kafka's default is Long.MAX_VALUE: no bound.
            "remote.log.manager.copy.max.bytes.per.second" => {
                let rate = number(v, 1, i64::MAX as u64)?;
                self.copy_bytes_per_second = (rate < i64::MAX as u64).then_some(rate);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether the settings can run: the system enabled needs a bucket.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if self.system_enable && self.bucket.is_empty() {
            return Err((
                "rill.remote.bucket",
                "remote.log.storage.system.enable=true needs a bucket".into(),
            ));
        }
        Ok(())
    }
}

fn boolean(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

fn number(v: &str, min: u64, max: u64) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a number in [{min}, {max}]")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_apply_and_bad_values_are_refused() {
        let mut s = RemoteStorageSettings::default();
        assert_eq!(
            s.apply_property("remote.log.storage.system.enable", "true"),
            Ok(true)
        );
        assert_eq!(s.check().unwrap_err().0, "rill.remote.bucket");
        assert_eq!(s.apply_property("rill.remote.bucket", "b"), Ok(true));
        assert_eq!(s.apply_property("rill.remote.prefix", "/a/b/"), Ok(true));
        assert_eq!(s.prefix, "a/b");
        assert!(s
            .apply_property("rill.remote.upload.concurrency", "0")
            .is_err());
        assert_eq!(s.apply_property("log.dirs", "x"), Ok(false));
        assert!(s.check().is_ok());
    }
}
