//! `rill-bench mixed-pool`: one build's `compare --workloads mixed` runs merged. Each run's
//! results.json carries its per-condition histograms (HdrHistogram V2, base64) and per-phase
//! p99s; builds measured in turn within one window (one `compare` per run) are pooled here,
//! the producer's acks per condition over every phase of every run.

use anyhow::Context;
use hdrhistogram::Histogram;

use crate::cli::MixedPoolArgs;
use crate::report;

/// The conditions' histograms pooled, and every phase's p99.
struct Pooled {
    runs: usize,
    alone: Histogram<u64>,
    beside: Histogram<u64>,
    device_alone: Histogram<u64>,
    device_beside: Histogram<u64>,
    alone_phase_p99_us: Vec<u64>,
    beside_phase_p99_us: Vec<u64>,
}

impl Pooled {
    /// Nothing pooled yet.
    fn empty() -> Pooled {
        Pooled {
            runs: 0,
            alone: report::new_histogram(),
            beside: report::new_histogram(),
            device_alone: report::new_histogram(),
            device_beside: report::new_histogram(),
            alone_phase_p99_us: Vec::new(),
            beside_phase_p99_us: Vec::new(),
        }
    }
}

/// Reads, merges and prints (markdown, then one JSON line).
pub fn run(args: &MixedPoolArgs) -> anyhow::Result<()> {
    let mut pooled = Pooled::empty();
    for path in &args.results {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let json: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let key = format!("mixed-acks-all/{}", args.broker);
        let runs = json["mixed_runs"][&key]
            .as_array()
            .with_context(|| format!("{}: no mixed runs of {}", path.display(), args.broker))?;
        for run in runs {
            add_run(&mut pooled, run).with_context(|| format!("in {}", path.display()))?;
        }
    }
    print(&pooled);
    Ok(())
}

fn add_run(pooled: &mut Pooled, run: &serde_json::Value) -> anyhow::Result<()> {
    let histogram = |name: &str| -> anyhow::Result<Histogram<u64>> {
        let text = run["histograms"][name].as_str().with_context(|| {
            format!("no {name} histogram (written by rill-bench before it had them?)")
        })?;
        report::histogram_from_base64(text)
    };
    pooled.alone.add(histogram("alone")?)?;
    pooled.beside.add(histogram("beside")?)?;
    pooled.device_alone.add(histogram("device_alone")?)?;
    pooled.device_beside.add(histogram("device_beside")?)?;
    let phases = |name: &str| -> Vec<u64> {
        run[name]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_u64).collect())
            .unwrap_or_default()
    };
    pooled
        .alone_phase_p99_us
        .extend(phases("alone_phase_p99_us"));
    pooled
        .beside_phase_p99_us
        .extend(phases("beside_phase_p99_us"));
    pooled.runs += 1;
    Ok(())
}

/// The lowest, median and highest of `values` ("-" when empty).
fn spread(values: &[u64]) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    match (sorted.first(), sorted.last()) {
        (Some(low), Some(high)) => format!("{low} / {} / {high}", sorted[sorted.len() / 2]),
        _ => "-".to_string(),
    }
}

fn print(p: &Pooled) {
    let q = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q);
    let ratio = q(&p.beside, 0.99) as f64 / q(&p.alone, 0.99).max(1) as f64;
    println!(
        "{} run(s), {} alone and {} beside phases\n",
        p.runs,
        p.alone_phase_p99_us.len(),
        p.beside_phase_p99_us.len()
    );
    println!("| | alone | beside the reader |\n|---|---:|---:|");
    println!("| producer acks | {} | {} |", p.alone.len(), p.beside.len());
    for (name, quantile) in [("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)] {
        println!(
            "| producer {name} µs | {} | {} |",
            q(&p.alone, quantile),
            q(&p.beside, quantile)
        );
    }
    println!(
        "| p99 of one phase µs, lowest / median / highest | {} | {} |",
        spread(&p.alone_phase_p99_us),
        spread(&p.beside_phase_p99_us)
    );
    println!(
        "| device 4 KiB O_DSYNC append p99 µs | {} | {} |",
        q(&p.device_alone, 0.99),
        q(&p.device_beside, 0.99)
    );
    println!("\nproducer p99 beside / alone: {ratio:.2}");
    let line = serde_json::json!({
        "runs": p.runs,
        "alone": report::Percentiles::of(&p.alone),
        "beside": report::Percentiles::of(&p.beside),
        "p99_ratio": ratio,
        "device_alone_p99_us": q(&p.device_alone, 0.99),
        "device_beside_p99_us": q(&p.device_beside, 0.99),
    });
    println!("{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_lowest_median_highest() {
        assert_eq!(spread(&[900, 700, 3000]), "700 / 900 / 3000");
        assert_eq!(spread(&[]), "-");
    }

    #[test]
    fn runs_pool_their_histograms_and_phases() {
        let encoded = |values: &[u64]| {
            let mut h = report::new_histogram();
            for v in values {
                h.record(*v).unwrap();
            }
            report::histogram_to_base64(&h).unwrap()
        };
        let run = |alone: &[u64], beside: &[u64]| {
            serde_json::json!({
                "histograms": {
                    "alone": encoded(alone), "beside": encoded(beside),
                    "device_alone": encoded(&[100]), "device_beside": encoded(&[300]),
                },
                "alone_phase_p99_us": [alone[0]],
                "beside_phase_p99_us": [beside[0]],
            })
        };
        let mut pooled = Pooled::empty();
        add_run(&mut pooled, &run(&[200, 210], &[300])).unwrap();
        add_run(&mut pooled, &run(&[220], &[310, 320])).unwrap();
        assert_eq!(
            (pooled.runs, pooled.alone.len(), pooled.beside.len()),
            (2, 3, 3)
        );
        assert_eq!(pooled.alone_phase_p99_us, vec![200, 220]);
        assert_eq!(pooled.device_beside.len(), 2);
        assert!(add_run(&mut pooled, &serde_json::json!({})).is_err());
    }
}
