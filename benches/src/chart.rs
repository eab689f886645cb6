//! Latency percentile charts (SVG via `plotters`): latency against "nines" (50%, 90%, 99%, …),
//! log scale on both axes, one line per histogram — Rill and the peer broker on one chart.

use std::path::Path;

use hdrhistogram::Histogram;
use plotters::prelude::*;

/// Highest percentile plotted, in nines (5 = 99.999%).
const NINES_MAX: f64 = 5.0;
/// Points per nine.
const STEPS_PER_NINE: u32 = 40;

/// One line's points: (nines, latency µs); empty for an empty histogram.
pub fn percentile_curve(histogram: &Histogram<u64>) -> Vec<(f64, f64)> {
    if histogram.is_empty() {
        return Vec::new();
    }
    let steps = (NINES_MAX * f64::from(STEPS_PER_NINE)) as u32;
    (0..=steps)
        .map(|step| {
            let nines = f64::from(step) / f64::from(STEPS_PER_NINE);
            let quantile = 1.0 - 10f64.powf(-nines);
            (nines, histogram.value_at_quantile(quantile).max(1) as f64)
        })
        .collect()
}

/// "2" → "99%": the label of a nines tick.
fn nines_label(nines: &f64) -> String {
    let percent = 100.0 * (1.0 - 10f64.powf(-nines));
    let decimals = (nines.round() as usize).saturating_sub(2);
    format!("{percent:.decimals$}%")
}

/// Draws the named histograms (µs) into an SVG at `path`.
pub fn latency_chart(
    path: &Path,
    title: &str,
    series: &[(&str, &Histogram<u64>)],
) -> anyhow::Result<()> {
    let curves: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(name, h)| (*name, percentile_curve(h)))
        .collect();
    let values = curves.iter().flat_map(|(_, c)| c.iter().map(|p| p.1));
    let (low, high) = values.fold((f64::MAX, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let y_range = (low.min(high) / 1.5).max(1.0)..(high * 1.5);

    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .margin_right(48)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..NINES_MAX, y_range.log_scale())
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (µs, from intended send time)")
        .x_labels(NINES_MAX as usize + 1)
        .x_label_formatter(&nines_label)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(plot_error)?;
    for (index, (name, curve)) in curves.into_iter().enumerate() {
        let color = series_color(index);
        chart
            .draw_series(LineSeries::new(curve, color.stroke_width(2)))
            .map_err(plot_error)?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(())
}

/// Pairs of dark/light colours (tab10-like): a broker's ack and consume lines share a hue.
fn series_color(index: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(120, 180, 230),
        RGBColor(214, 39, 40),
        RGBColor(250, 140, 140),
        RGBColor(44, 160, 44),
        RGBColor(150, 220, 140),
        RGBColor(148, 103, 189),
        RGBColor(200, 170, 230),
    ];
    COLORS[index % COLORS.len()]
}

fn plot_error<E: std::fmt::Debug>(error: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {error:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_read_as_percentiles() {
        assert_eq!(nines_label(&0.0), "0%");
        assert_eq!(nines_label(&1.0), "90%");
        assert_eq!(nines_label(&2.0), "99%");
        assert_eq!(nines_label(&3.0), "99.9%");
        assert_eq!(nines_label(&4.0), "99.99%");
    }

    #[test]
    fn curve_rises_with_the_percentile() {
        let mut h = crate::report::new_histogram();
        for v in 1..=100_000u64 {
            h.record(v).unwrap();
        }
        let curve = percentile_curve(&h);
        assert!(curve.windows(2).all(|w| w[0].1 <= w[1].1));
        assert!(percentile_curve(&crate::report::new_histogram()).is_empty());
    }

    #[test]
    fn writes_an_svg() {
        let mut h = crate::report::new_histogram();
        for v in [100u64, 200, 400, 10_000] {
            h.record(v).unwrap();
        }
        let path =
            std::env::temp_dir().join(format!("rill-bench-chart-{}.svg", std::process::id()));
        latency_chart(&path, "test", &[("a", &h), ("b", &h)]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(svg.contains("<svg"));
    }
}
