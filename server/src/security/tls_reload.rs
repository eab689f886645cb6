//! A TLS listener's key store, read again when its file changes, so a renewed certificate is
//! served without a restart: each handshake looks at the file's modification time (at most once
//! per [`CHECK_EVERY`]) and, when it changed, reads the key and chain again. A file that no
//! longer reads, or whose key does not match its certificate, keeps the previous certificate in
//! service and is warned about (every check until fixed is quiet: once per change).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::BadSetting;

/// How often a handshake may look at the key store file.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Builds the certified key from the key store as configured (the file read afresh).
type Load = dyn Fn() -> Result<CertifiedKey, BadSetting> + Send + Sync;

/// The certificate a listener serves, reloaded when its key store file changes.
pub struct ReloadingKeyStore {
    /// `ssl.keystore.location`, when the key store is a file (inline PEM cannot change).
    file: Option<PathBuf>,
    load: Box<Load>,
    state: Mutex<State>,
}

struct State {
    current: Arc<CertifiedKey>,
    /// The modification time the current key was read at (or the last one refused).
    seen: Option<SystemTime>,
    checked: Instant,
}

impl std::fmt::Debug for ReloadingKeyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingKeyStore")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

fn modified(file: &PathBuf) -> Option<SystemTime> {
    std::fs::metadata(file).and_then(|m| m.modified()).ok()
}

impl ReloadingKeyStore {
    /// Loads the key store now (a failure stops the start, as before any reload).
    pub fn new(file: Option<PathBuf>, load: Box<Load>) -> Result<Self, BadSetting> {
        let seen = file.as_ref().and_then(modified);
        let current = Arc::new(load()?);
        Ok(Self {
            file,
            load,
            state: Mutex::new(State {
                current,
                seen,
                checked: Instant::now(),
            }),
        })
    }

    /// The certificate to serve now, read again first if its file changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
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
            Ok(key) => {
                tracing::info!(file = %file.display(), "key store changed: serving its certificate");
                state.current = Arc::new(key);
            }
            Err(e) => tracing::warn!(
                file = %file.display(),
                error = %e,
                "key store changed but cannot be used: the previous certificate stays in service"
            ),
        }
        state.current.clone()
    }
}

impl ResolvesServerCert for ReloadingKeyStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}
