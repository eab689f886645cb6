//! `/`: a read-only HTML status page rendered from the same [`Status`] as `/v1/status`.
//!
//! No JavaScript: the page reloads itself every [`REFRESH_SECONDS`]. Every value comes from the
//! broker's own state; names from clients (topics, group ids, error messages) are escaped by
//! `maud`, the template crate, which escapes every interpolation unless told otherwise — a
//! group id is attacker-chosen text.

use std::time::SystemTime;

use maud::{html, Markup, DOCTYPE};

use super::status::{GroupEntry, Status, TopicEntry};

/// Seconds between reloads of the page.
pub const REFRESH_SECONDS: u32 = 5;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}\
table{border-collapse:collapse;margin-bottom:.5em}th,td{padding:.2em .7em;border-bottom:1px solid #ddd;text-align:right}\
th{background:#f3f3f3}td{white-space:nowrap}td.l,th.l{text-align:left;white-space:normal}.ok{color:#176f2c;font-weight:600}\
.bad{color:#b00020;font-weight:600}.muted{color:#777}code{font-size:12px}";

/// The page.
pub fn render(status: &Status) -> String {
    let page: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="refresh" content=(REFRESH_SECONDS);
                title { "Rill broker " (status.broker.node_id) }
                style { (STYLE) }
            }
            body {
                (summary(status))
                (brokers_and_shards(status))
                h2 { "Topics" }
                (topics(&status.topics))
                h2 { "Consumer groups" }
                (groups(&status.groups, status.shards_not_answering))
                h2 { "Recent warnings and errors" }
                (recent_errors(status))
                p.muted {
                    a href="/metrics" { "/metrics" } " · " a href="/v1/status" { "/v1/status" }
                    " · " a href="/health/ready" { "/health/ready" } " · " a href="/health/live" { "/health/live" }
                }
            }
        }
    };
    page.into_string()
}

fn badge(ok: bool, yes: &str, reason: Option<&str>) -> Markup {
    html! {
        @if ok { span.ok { (yes) } } @else { span.bad { "not " (yes) ": " (reason.unwrap_or("")) } }
    }
}

fn summary(s: &Status) -> Markup {
    html! {
        h1 { "Rill broker " (s.broker.node_id) }
        p {
            (badge(s.ready.ok, "ready", s.ready.reason.as_deref())) " · "
            (badge(s.live.ok, "live", s.live.reason.as_deref())) " · "
            "version " code { (s.broker.version) } " · up " (duration(s.uptime_seconds))
        }
        p.muted {
            "Kafka listener " code { (s.broker.listen) } ", advertised " code { (s.broker.advertise) }
            ", admin " code { (s.broker.admin_listen) } ", data in " code { (s.broker.data_dir) }
        }
    }
}

fn brokers_and_shards(s: &Status) -> Markup {
    html! {
        h2 { "Brokers" }
        table {
            tr { th { "node" } th.l { "address" } th.l { "state" } th.l { "" } }
            @for b in &s.brokers {
                tr {
                    td { (b.node_id) } td.l { (b.address) }
                    td.l { (if b.fenced { "fenced" } else { "live" }) @if b.controller { ", controller" } }
                    td.l { @if b.this_broker { "this broker" } }
                }
            }
        }
        h2 { "Shards" }
        table {
            tr { th { "shard" } th { "listening" } th { "connections" } th { "requests in flight" } th { "busy" } th { "last ran" } }
            @for sh in &s.shards {
                tr {
                    td { (sh.id) } td { (if sh.listening { "yes" } else { "no" }) } td { (sh.connections_open) }
                    td { (sh.requests_in_flight) } td { (format!("{:.1} s", sh.busy_seconds)) }
                    td { (sh.heartbeat_age_ms) " ms ago" }
                }
            }
        }
    }
}

fn topics(topics: &[TopicEntry]) -> Markup {
    html! {
        @if topics.is_empty() { p.muted { "No topics." } } @else {
            table {
                tr {
                    th.l { "topic" } th { "partition" } th.l { "state" } th { "log start" } th { "log end" }
                    th { "high watermark" } th { "last stable" } th { "segments" } th { "size" }
                    th { "local start" } th { "remote segments" } th { "remote size" }
                    th { "messages in" } th { "messages out" }
                }
                @for t in topics {
                    @if t.partitions.is_empty() {
                        tr { td.l { (t.name) } td { "0–" (t.partition_count - 1) } td.l.muted { "not open on this broker" } }
                    }
                    @for p in &t.partitions {
                        tr {
                            td.l { (t.name) } td { (p.partition) } td.l { (p.state) }
                            td { (p.numbers.log_start_offset) } td { (p.numbers.log_end_offset) }
                            td { (p.numbers.high_watermark) } td { (p.numbers.last_stable_offset) }
                            td { (p.numbers.segments) } td { (bytes(p.numbers.log_bytes)) }
                            td { (p.numbers.local_log_start_offset) } td { (p.numbers.remote_segments) }
                            td { (bytes(p.numbers.remote_bytes)) }
                            td { (p.numbers.messages_in) } td { (p.numbers.messages_out) }
                        }
                    }
                }
            }
        }
    }
}

fn groups(groups: &[GroupEntry], not_answering: usize) -> Markup {
    html! {
        @if not_answering > 0 {
            p.bad { (not_answering) " shard(s) did not answer in time: their groups are missing." }
        }
        @if groups.is_empty() { p.muted { "No consumer groups." } } @else {
            table {
                tr {
                    th.l { "group" } th.l { "state" } th { "members" } th.l { "topic" } th { "partition" }
                    th { "committed" } th { "high watermark" } th { "lag" }
                }
                @for g in groups {
                    tr {
                        td.l { (g.group) } td.l { (g.state) } td { (g.members) } td.l { "all" } td {}
                        td {} td {} td { strong { (g.lag) } }
                    }
                    @for o in &g.offsets {
                        tr {
                            td {} td {} td {} td.l { (o.topic) } td { (o.partition) } td { (o.committed_offset) }
                            td { (opt(o.high_watermark)) } td { (opt(o.lag)) }
                        }
                    }
                }
            }
        }
    }
}

fn recent_errors(s: &Status) -> Markup {
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    html! {
        @if s.recent_errors.is_empty() { p.muted { "None since start." } } @else {
            table {
                tr { th { "when" } th.l { "level" } th.l { "where" } th.l { "message" } }
                @for e in s.recent_errors.iter().rev() {
                    tr {
                        td { (duration(now_ms.saturating_sub(e.time_ms) / 1000)) " ago" }
                        td.l { (e.level) } td.l { code { (e.target) } } td.l { (e.message) }
                    }
                }
            }
        }
    }
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "–".to_string(), |v| v.to_string())
}

/// 93784 → "1d 2h 3m 4s"; leading zero units are left out.
fn duration(seconds: u64) -> String {
    let parts = [
        (seconds / 86_400, "d"),
        (seconds / 3600 % 24, "h"),
        (seconds / 60 % 60, "m"),
    ];
    let mut out: String = parts
        .iter()
        .skip_while(|(n, _)| *n == 0)
        .map(|(n, unit)| format!("{n}{unit} "))
        .collect();
    out.push_str(&format!("{}s", seconds % 60));
    out
}

/// 1536 → "1.5 KiB".
fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::state::{BrokerInfo, PartitionView};
    use crate::admin::status::*;

    fn status() -> Status {
        Status {
            broker: BrokerInfo {
                node_id: 0,
                version: "0.1.0 (git abc)".into(),
                listen: "127.0.0.1:9092".into(),
                advertise: "127.0.0.1:9092".into(),
                admin_listen: "127.0.0.1:9644".into(),
                data_dir: "./rill-data".into(),
                shards: 1,
            },
            uptime_seconds: 61,
            ready: Ok(()).into(),
            live: Err("shard 0 has not run for 20000 ms".to_string()).into(),
            brokers: vec![],
            shards: vec![],
            topics: vec![TopicEntry {
                name: "orders".into(),
                partition_count: 1,
                partitions: vec![PartitionEntry {
                    partition: 0,
                    state: "online",
                    numbers: PartitionView {
                        high_watermark: 42,
                        ..PartitionView::default()
                    },
                }],
            }],
            groups: vec![GroupEntry {
                group: "<script>alert(1)</script>".into(),
                state: "Stable".into(),
                members: 1,
                protocol_type: "consumer".into(),
                lag: 2,
                offsets: vec![],
            }],
            shards_not_answering: 0,
            recent_errors: vec![],
        }
    }

    #[test]
    fn names_from_clients_are_escaped_and_numbers_shown() {
        let page = render(&status());
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("<td>42</td>"));
        assert!(page.contains("not live: shard 0 has not run"));
    }

    #[test]
    fn units() {
        assert_eq!(duration(93_784), "1d 2h 3m 4s");
        assert_eq!(duration(61), "1m 1s");
        assert_eq!(duration(5), "5s");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(12), "12 B");
    }
}
