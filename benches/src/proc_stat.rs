//! CPU time of a local process (the broker) from `/proc/<pid>/stat`, so throughput runs can say
//! what each GB cost the broker in CPU seconds.

use anyhow::{bail, Context};

/// Resident set size of process `pid` now, in KiB (`VmRSS` in `/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/<pid>/status")
}

/// User + system CPU seconds consumed so far by all threads of `pid`.
pub fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let ticks = parse_cpu_ticks(&text).with_context(|| format!("parsing {path}"))?;
    Ok(ticks as f64 / clock_ticks_per_second())
}

/// utime + stime (fields 14 and 15) from a `/proc/<pid>/stat` line, in clock ticks.
fn parse_cpu_ticks(stat: &str) -> anyhow::Result<u64> {
    // The command name (field 2) is in parentheses and may contain spaces or ')': fields after the
    // LAST ')' are plain numbers, starting with field 3 (state).
    let Some(close) = stat.rfind(')') else {
        bail!("no ')' in stat line");
    };
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    const UTIME_AFTER_COMM: usize = 14 - 3;
    const STIME_AFTER_COMM: usize = 15 - 3;
    if fields.len() <= STIME_AFTER_COMM {
        bail!("stat line has too few fields");
    }
    let utime: u64 = fields[UTIME_AFTER_COMM].parse()?;
    let stime: u64 = fields[STIME_AFTER_COMM].parse()?;
    Ok(utime + stime)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no memory-safety preconditions; it only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as f64
    } else {
        100.0
    }
}

/// CPU seconds between two readings of a broker pid, if one was given.
#[derive(Debug, Clone, Copy)]
pub struct CpuMeter {
    pid: Option<u32>,
    start_seconds: f64,
}

impl CpuMeter {
    /// Starts metering `pid` (no-op for `None` or an unreadable pid).
    pub fn start(pid: Option<u32>) -> CpuMeter {
        let start_seconds = pid.and_then(|p| cpu_seconds(p).ok()).unwrap_or(0.0);
        CpuMeter { pid, start_seconds }
    }

    /// CPU seconds used since [`CpuMeter::start`], or `None` without a readable pid.
    pub fn elapsed_seconds(&self) -> Option<f64> {
        let now = cpu_seconds(self.pid?).ok()?;
        Some(now - self.start_seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utime_and_stime_even_with_odd_names() {
        let line =
            "4242 (we) ird (name) S 1 4242 4242 0 -1 4194560 500 0 0 0 1234 567 0 0 20 0 9 0 \
                    100 1000000 200 18446744073709551615";
        assert_eq!(parse_cpu_ticks(line).unwrap(), 1234 + 567);
    }

    #[test]
    fn rejects_a_truncated_line() {
        assert!(parse_cpu_ticks("1 (x) S 1 2").is_err());
        assert!(parse_cpu_ticks("garbage").is_err());
    }

    #[test]
    fn reads_our_own_process() {
        let seconds = cpu_seconds(std::process::id()).unwrap();
        assert!(seconds >= 0.0);
    }
}
