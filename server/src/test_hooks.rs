//! Faults the end-to-end tests inject into a running broker, honoured only in debug builds
//! (`cfg(debug_assertions)`: what `./test.sh` runs). A release build refuses the keys at start,
//! so no configuration can turn them on there, and no client can: they are static properties,
//! never dynamic configs.
//!
//! | key                               | value          | what it does |
//! |-----------------------------------|----------------|--------------|
//! | `rill.test.panic.api`             | an API key     | that API's handler panics (`crate::dispatch`) |
//! | `rill.test.panic.group.prefix`    | a prefix       | the group coordinator panics serving a group whose id starts with it, on the group's own shard (which may be another than the request's) |
//! | `rill.test.kill.shard`            | `<shard>:<ms>` | that shard's executor panics outside any request, `<ms>` after it listens |

/// The configured faults (none by default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestHooks {
    /// `rill.test.panic.api`.
    pub panic_api: Option<i16>,
    /// `rill.test.panic.group.prefix`.
    pub panic_group_prefix: Option<String>,
    /// `rill.test.kill.shard`: (shard, delay after it listens in ms).
    pub kill_shard: Option<(usize, u64)>,
}

impl TestHooks {
    /// Applies one `rill.test.*` property; the error says why not (always, in a release
    /// build).
    pub fn apply(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.apply_in(cfg!(debug_assertions), key, value)
    }

    fn apply_in(&mut self, debug_build: bool, key: &str, value: &str) -> Result<(), String> {
        let bad = |reason: &str| reason.to_string();
        if !debug_build {
            return Err(bad("test hooks exist only in debug (test) builds"));
        }
        match key {
            "rill.test.panic.api" => {
                self.panic_api = Some(value.parse().map_err(|_| bad("not an API key"))?)
            }
            "rill.test.panic.group.prefix" => self.panic_group_prefix = Some(value.to_string()),
            "rill.test.kill.shard" => {
                let (shard, ms) = value.split_once(':').ok_or_else(|| bad("<shard>:<ms>"))?;
                let shard = shard.parse().map_err(|_| bad("shard is not a number"))?;
                let ms = ms.parse().map_err(|_| bad("ms is not a number"))?;
                self.kill_shard = Some((shard, ms));
            }
            _ => return Err(bad("unknown test hook")),
        }
        Ok(())
    }
}

#[cfg(debug_assertions)]
static INSTALLED: std::sync::OnceLock<TestHooks> = std::sync::OnceLock::new();

/// Makes `hooks` the process's (the first broker started in a process wins).
pub fn install(hooks: &TestHooks) {
    #[cfg(debug_assertions)]
    if *hooks != TestHooks::default() {
        tracing::warn!(
            ?hooks,
            "test hooks installed: this broker will fail on purpose"
        );
        let _ = INSTALLED.set(hooks.clone());
    }
    #[cfg(not(debug_assertions))]
    let _ = hooks;
}

#[cfg(debug_assertions)]
fn installed() -> Option<&'static TestHooks> {
    INSTALLED.get()
}

#[cfg(not(debug_assertions))]
fn installed() -> Option<&'static TestHooks> {
    None
}

/// Panics if `rill.test.panic.api` names `api_key`.
pub fn maybe_panic_in_handler(api_key: i16) {
    if installed().is_some_and(|h| h.panic_api == Some(api_key)) {
        panic!("injected panic in the handler of API {api_key} (rill.test.panic.api)");
    }
}

/// Panics if `rill.test.panic.group.prefix` is a prefix of `group_id`.
pub fn maybe_panic_in_group(group_id: &str) {
    let hit = installed()
        .and_then(|h| h.panic_group_prefix.as_deref())
        .is_some_and(|prefix| group_id.starts_with(prefix));
    if hit {
        panic!("injected panic serving group {group_id:?} (rill.test.panic.group.prefix)");
    }
}

/// On the shard `rill.test.kill.shard` names, spawns the task that panics outside any request
/// once the delay has passed (the executor then dies as from any other bug).
pub fn maybe_kill_shard_later(shard: usize) {
    let Some((victim, ms)) = installed().and_then(|h| h.kill_shard) else {
        return;
    };
    if victim != shard {
        return;
    }
    glommio::spawn_local(async move {
        glommio::timer::sleep(std::time::Duration::from_millis(ms)).await;
        panic!("injected death of shard {shard} (rill.test.kill.shard)");
    })
    .detach();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_in_test_builds() {
        let mut hooks = TestHooks::default();
        hooks.apply("rill.test.panic.api", "22").unwrap();
        hooks
            .apply("rill.test.panic.group.prefix", "boom-")
            .unwrap();
        hooks.apply("rill.test.kill.shard", "1:500").unwrap();
        assert_eq!(hooks.panic_api, Some(22));
        assert_eq!(hooks.panic_group_prefix.as_deref(), Some("boom-"));
        assert_eq!(hooks.kill_shard, Some((1, 500)));
        assert!(hooks.apply("rill.test.kill.shard", "1").is_err());
        assert!(hooks.apply("rill.test.other", "1").is_err());
    }

    #[test]
    fn a_release_build_refuses_every_hook() {
        let mut hooks = TestHooks::default();
        for (key, value) in [
            ("rill.test.panic.api", "22"),
            ("rill.test.kill.shard", "0:1"),
        ] {
            let e = hooks.apply_in(false, key, value).unwrap_err();
            assert!(e.contains("only in debug"), "{e}");
        }
        assert_eq!(hooks, TestHooks::default());
    }

    #[test]
    fn nothing_panics_without_installed_hooks() {
        maybe_panic_in_handler(22);
        maybe_panic_in_group("boom-1");
    }
}
