//! Latency reporting: percentile summaries, the printed table, and HdrHistogram's standard
//! percentile-distribution (`.hgrm`) text files.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use hdrhistogram::Histogram;
use serde::Serialize;

/// Significant digits kept by every latency histogram (0.1% value resolution).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A new latency histogram in microseconds, 1 µs .. 1 h, auto-resizing beyond.
pub fn new_histogram() -> Histogram<u64> {
    let mut histogram = Histogram::new_with_bounds(1, 3_600_000_000, SIGNIFICANT_DIGITS)
        .expect("static histogram bounds are valid");
    histogram.auto(true);
    histogram
}

/// `histogram` in HdrHistogram's compressed V2 encoding, as base64 text (for JSON files whose
/// runs are merged later, e.g. by `rill-bench mixed-pool`).
pub fn histogram_to_base64(histogram: &Histogram<u64>) -> anyhow::Result<String> {
    use base64::Engine;
    use hdrhistogram::serialization::Serializer;
    let mut bytes = Vec::new();
    hdrhistogram::serialization::V2DeflateSerializer::new()
        .serialize(histogram, &mut bytes)
        .map_err(|e| anyhow::anyhow!("encoding a histogram: {e:?}"))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// The histogram [`histogram_to_base64`] wrote.
pub fn histogram_from_base64(text: &str) -> anyhow::Result<Histogram<u64>> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .context("a histogram's base64")?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| anyhow::anyhow!("decoding a histogram: {e:?}"))
}

/// The percentiles every report quotes, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub p9999_us: u64,
    pub max_us: u64,
}

impl Percentiles {
    /// Summarises `histogram` (all zeros when it is empty).
    pub fn of(histogram: &Histogram<u64>) -> Percentiles {
        if histogram.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: histogram.len(),
            mean_us: histogram.mean(),
            p50_us: histogram.value_at_quantile(0.5),
            p90_us: histogram.value_at_quantile(0.9),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            p9999_us: histogram.value_at_quantile(0.9999),
            max_us: histogram.max(),
        }
    }
}

/// Prints one row per named histogram: count then p50 .. max, in µs.
pub fn print_table(rows: &[(&str, Percentiles)]) {
    println!(
        "{:<18} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "latency (µs)", "count", "p50", "p90", "p99", "p99.9", "p99.99", "max"
    );
    for (name, p) in rows {
        println!(
            "{:<18} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            name, p.count, p.p50_us, p.p90_us, p.p99_us, p.p999_us, p.p9999_us, p.max_us
        );
    }
}

/// `dir/name.hgrm` → `dir/name.<tag>.hgrm` (a sibling file for a second histogram).
pub fn sibling_path(path: &Path, tag: &str) -> PathBuf {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("latency");
    let name = match path.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}.{tag}.{ext}"),
        None => format!("{stem}.{tag}"),
    };
    path.with_file_name(name)
}

/// Writes `histogram` (µs) as HdrHistogram's percentile distribution in milliseconds, five ticks
/// per half-distance, the format HdrHistogram's plotter and wrk2 read.
pub fn write_hgrm(path: &Path, histogram: &Histogram<u64>) -> anyhow::Result<()> {
    let mut out = Vec::new();
    render_hgrm(&mut out, histogram)?;
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))
}

fn render_hgrm(out: &mut impl Write, histogram: &Histogram<u64>) -> std::io::Result<()> {
    const US_PER_MS: f64 = 1000.0;
    writeln!(
        out,
        "{:>12} {:>14} {:>10} {:>14}\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    )?;
    let mut total = 0u64;
    for step in histogram.iter_quantiles(5) {
        total += step.count_since_last_iteration();
        let value_ms = step.value_iterated_to() as f64 / US_PER_MS;
        let quantile = step.quantile_iterated_to();
        if quantile < 1.0 {
            let inverse = 1.0 / (1.0 - quantile);
            writeln!(
                out,
                "{value_ms:>12.3} {quantile:>14.12} {total:>10} {inverse:>14.2}"
            )?;
        } else {
            writeln!(out, "{value_ms:>12.3} {quantile:>14.12} {total:>10}")?;
        }
    }
    let mean_ms = histogram.mean() / US_PER_MS;
    let stdev_ms = histogram.stdev() / US_PER_MS;
    let max_ms = histogram.max() as f64 / US_PER_MS;
    writeln!(
        out,
        "#[Mean    = {mean_ms:>12.3}, StdDeviation   = {stdev_ms:>12.3}]"
    )?;
    writeln!(
        out,
        "#[Max     = {max_ms:>12.3}, Total count    = {:>12}]",
        histogram.len()
    )?;
    writeln!(
        out,
        "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
        histogram.buckets(),
        sub_bucket_count(SIGNIFICANT_DIGITS)
    )
}

/// HdrHistogram's sub-bucket count for a precision: the power of two covering 2 * 10^digits.
fn sub_bucket_count(significant_digits: u8) -> u64 {
    (2 * 10u64.pow(u32::from(significant_digits))).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_uniform_histogram() {
        let mut h = new_histogram();
        for v in 1..=10_000u64 {
            h.record(v).unwrap();
        }
        let p = Percentiles::of(&h);
        assert_eq!(p.count, 10_000);
        assert!((4_990..=5_010).contains(&p.p50_us), "{p:?}");
        assert!((9_890..=9_910).contains(&p.p99_us), "{p:?}");
        assert_eq!(p.max_us, h.max());
    }

    #[test]
    fn empty_histogram_gives_zeros() {
        assert_eq!(Percentiles::of(&new_histogram()), Percentiles::default());
    }

    #[test]
    fn hgrm_has_header_rows_and_footer() {
        let mut h = new_histogram();
        for v in [100u64, 200, 300, 5_000] {
            h.record(v).unwrap();
        }
        let mut out = Vec::new();
        render_hgrm(&mut out, &h).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("       Value     Percentile"));
        assert!(
            text.contains("#[Max     =        5.003, Total count    =            4]"),
            "{text}"
        );
        let last_row = text
            .lines()
            .rfind(|l| !l.starts_with('#') && !l.is_empty())
            .unwrap();
        assert!(last_row.contains("1.000000000000"), "{last_row}");
    }

    #[test]
    fn a_histogram_survives_its_base64_encoding() {
        let mut histogram = new_histogram();
        for v in [1, 250, 251, 9_000, 1_500_000] {
            histogram.record(v).unwrap();
        }
        let back = histogram_from_base64(&histogram_to_base64(&histogram).unwrap()).unwrap();
        assert_eq!(back.len(), 5);
        assert_eq!(
            back.value_at_quantile(0.5),
            histogram.value_at_quantile(0.5)
        );
        assert_eq!(back.max(), histogram.max());
        assert!(histogram_from_base64("not base64!").is_err());
    }

    #[test]
    fn sibling_path_inserts_the_tag() {
        assert_eq!(
            sibling_path(Path::new("/x/lat.hgrm"), "e2e"),
            Path::new("/x/lat.e2e.hgrm")
        );
        assert_eq!(sibling_path(Path::new("lat"), "e2e"), Path::new("lat.e2e"));
    }
}
