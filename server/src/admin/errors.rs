//! Recent warnings and errors for the status page: a `tracing` layer keeps the last
//! [`RECENT_EVENTS_MAX`] WARN/ERROR events (each cut to [`EVENT_BYTES_MAX`]) in a ring.
//!
//! It is process-wide, like the log it listens to: [`layer`] goes into the subscriber `main`
//! installs, [`recent`] reads the ring.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::SystemTime;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Events kept.
pub const RECENT_EVENTS_MAX: usize = 100;
/// Longest message kept per event (longer ones are cut at a character boundary).
pub const EVENT_BYTES_MAX: usize = 1024;

/// One WARN or ERROR event.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RecentEvent {
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// `WARN` or `ERROR`.
    pub level: String,
    /// The module that logged it.
    pub target: String,
    /// The message and its fields, `key=value`.
    pub message: String,
}

static RECENT: Mutex<VecDeque<RecentEvent>> = Mutex::new(VecDeque::new());

/// The events kept, oldest first.
pub fn recent() -> Vec<RecentEvent> {
    RECENT
        .lock()
        .map(|r| r.iter().cloned().collect())
        .unwrap_or_default()
}

fn push(event: RecentEvent) {
    if let Ok(mut recent) = RECENT.lock() {
        if recent.len() == RECENT_EVENTS_MAX {
            recent.pop_front();
        }
        recent.push_back(event);
    }
}

/// The layer that records WARN and ERROR events.
pub fn layer<S: Subscriber>() -> impl Layer<S> {
    RecentErrors
}

struct RecentErrors;

impl<S: Subscriber> Layer<S> for RecentErrors {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let level = *event.metadata().level();
        if level > Level::WARN {
            return; // INFO and finer: Level orders ERROR < WARN < INFO
        }
        let mut message = Message::default();
        event.record(&mut message);
        let time_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        push(RecentEvent {
            time_ms,
            level: level.to_string(),
            target: event.metadata().target().to_string(),
            message: message.text,
        });
    }
}

/// Formats an event's fields: the message first, then `key=value` pairs, bounded.
#[derive(Default)]
struct Message {
    text: String,
}

impl Message {
    fn append(&mut self, piece: std::fmt::Arguments<'_>) {
        if self.text.len() >= EVENT_BYTES_MAX {
            return;
        }
        if !self.text.is_empty() {
            self.text.push(' ');
        }
        let _ = self.text.write_fmt(piece);
        if self.text.len() > EVENT_BYTES_MAX {
            let mut cut = EVENT_BYTES_MAX;
            while !self.text.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.truncate(cut);
        }
    }
}

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.append(format_args!("{value}"));
        } else {
            self.append(format_args!("{}={value}", field.name()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.append(format_args!("{value:?}"));
        } else {
            self.append(format_args!("{}={value:?}", field.name()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn warnings_and_errors_are_kept_bounded_info_is_not() {
        let subscriber = tracing_subscriber::registry().with(layer());
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!("not kept");
            tracing::warn!(topic = "t", partition = 3, "cannot open partition log");
            tracing::error!("{}", "é".repeat(2000));
            for i in 0..RECENT_EVENTS_MAX {
                tracing::warn!(i, "filler");
            }
        });
        let recent = recent();
        assert_eq!(recent.len(), RECENT_EVENTS_MAX);
        assert!(recent.iter().all(|e| e.message.len() <= EVENT_BYTES_MAX));
        assert!(recent.iter().all(|e| !e.message.contains("not kept")));
        assert_eq!(recent.last().unwrap().level, "WARN");
    }

    #[test]
    fn fields_follow_the_message() {
        let mut m = Message::default();
        m.append(format_args!("cannot open"));
        m.append(format_args!("topic=t"));
        assert_eq!(m.text, "cannot open topic=t");
    }
}
