//! A TLS listener's stores, read again when their files change, so a renewed certificate or a
//! changed trust store is used without a restart: each handshake looks at the file's
//! modification time (at most once per [`CHECK_EVERY`]) and, when it changed, reads it again. A
//! file that no longer reads (or a key that does not match its certificate) keeps what is in
//! service and is warned about (once per change).
//!
//! - [`ReloadingKeyStore`]: `ssl.keystore.location`, the certificate served.
//! - [`ReloadingServerConfig`]: `ssl.truststore.location`: the whole rustls configuration is
//!   built again (its client verifier and the CA names it offers), over the same key store.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

use super::BadSetting;

/// How often a handshake may look at a store's file.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Builds the value from the store as configured (the file read afresh).
type Load<T> = dyn Fn() -> Result<T, BadSetting> + Send + Sync;

/// A value built from a file, built again when the file changes.
pub struct Reloading<T> {
    /// What the file is, for the logs ("key store", "trust store").
    what: &'static str,
    /// The file, when there is one (inline PEM cannot change).
    file: Option<PathBuf>,
    load: Box<Load<T>>,
    state: Mutex<State<T>>,
}

/// The certificate a listener serves, reloaded when its key store file changes.
pub type ReloadingKeyStore = Reloading<CertifiedKey>;

/// A listener's rustls configuration, built again when its trust store file changes.
pub type ReloadingServerConfig = Reloading<ServerConfig>;

struct State<T> {
    current: Arc<T>,
    /// The modification time the current value was read at (or the last one refused).
    seen: Option<SystemTime>,
    checked: Instant,
}

impl<T> std::fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading")
            .field("what", &self.what)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

fn modified(file: &PathBuf) -> Option<SystemTime> {
    std::fs::metadata(file).and_then(|m| m.modified()).ok()
}

impl<T> Reloading<T> {
    /// Builds the value now (a failure stops the start, as before any reload).
    pub fn new(
        what: &'static str,
        file: Option<PathBuf>,
        load: Box<Load<T>>,
    ) -> Result<Self, BadSetting> {
        let seen = file.as_ref().and_then(modified);
        let current = Arc::new(load()?);
        Ok(Self {
            what,
            file,
            load,
            state: Mutex::new(State {
                current,
                seen,
                checked: Instant::now(),
            }),
        })
    }

    /// The value to use now, built again first if its file changed.
    pub fn current(&self) -> Arc<T> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(file) = &self.file else {
            return state.current.clone();
        };
        if state.checked.elapsed() < CHECK_EVERY {
            return state.current.clone();
        }
        state.checked = Instant::now();
        let now = modified(file);
        if now.is_none() || now == state.seen {
            return state.current.clone();
        }
        state.seen = now;
        match (self.load)() {
            Ok(value) => {
                tracing::info!(file = %file.display(), "{} changed: in service from the next handshake", self.what);
                state.current = Arc::new(value);
            }
            Err(e) => tracing::warn!(
                file = %file.display(),
                error = %e,
                "{} changed but cannot be used: the previous one stays in service",
                self.what
            ),
        }
        state.current.clone()
    }
}

impl ResolvesServerCert for Reloading<CertifiedKey> {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn bad() -> BadSetting {
        super::super::bad("ssl.truststore.location", "", "unreadable")
    }

    #[test]
    fn a_changed_file_is_read_again_and_a_bad_one_keeps_the_current_value() {
        let dir = std::env::temp_dir().join(format!("rill-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("store.pem");
        std::fs::write(&file, "1").unwrap();
        let path = file.clone();
        let loads = Arc::new(AtomicU32::new(0));
        let counted = loads.clone();
        let load = move || {
            counted.fetch_add(1, Ordering::SeqCst);
            let text = std::fs::read_to_string(&path).map_err(|_| bad())?;
            text.trim().parse::<u32>().map_err(|_| bad())
        };
        let store = Reloading::new("trust store", Some(file.clone()), Box::new(load)).unwrap();
        assert_eq!(*store.current(), 1);
        // Within CHECK_EVERY nothing is looked at, even if the file changed.
        std::fs::write(&file, "2").unwrap();
        assert_eq!(*store.current(), 1);
        let later = |store: &Reloading<u32>| {
            store.state.lock().unwrap().checked -= CHECK_EVERY;
            store.seen_reset();
            *store.current()
        };
        assert_eq!(later(&store), 2);
        std::fs::write(&file, "garbage").unwrap();
        assert_eq!(
            later(&store),
            2,
            "a file that does not load keeps the current value"
        );
        assert_eq!(loads.load(Ordering::SeqCst), 3);
        // Unchanged since: not loaded again.
        store.state.lock().unwrap().checked -= CHECK_EVERY;
        assert_eq!(*store.current(), 2);
        assert_eq!(loads.load(Ordering::SeqCst), 3);
        std::fs::remove_dir_all(&dir).ok();
    }

    impl<T> Reloading<T> {
        /// Forgets the modification time seen (a test writes faster than the clock ticks).
        fn seen_reset(&self) {
            self.state.lock().unwrap().seen = None;
        }
    }
}
