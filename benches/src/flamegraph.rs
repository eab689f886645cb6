//! `rill-bench flamegraph`: `perf script` text → folded stacks → flame graph SVG (the `inferno`
//! library, so profiling needs no separately installed tool), plus a ranked list of the functions
//! where samples land (self cost), which is what "the top costs" of a flame graph means.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};

use anyhow::Context;
use inferno::collapse::perf::Folder;
use inferno::collapse::Collapse;

use crate::cli::FlamegraphArgs;

/// A function and the share of all samples in which it was the leaf (running) frame.
#[derive(Debug, Clone, PartialEq)]
pub struct SelfCost {
    pub function: String,
    pub samples: u64,
    pub percent: f64,
}

/// Ranks leaf frames of folded stacks (`a;b;c 42` lines) by samples, highest first.
pub fn top_self_costs(folded: &str, top: usize) -> Vec<SelfCost> {
    let mut by_leaf: HashMap<&str, u64> = HashMap::new();
    let mut total = 0u64;
    for line in folded.lines() {
        let Some((stack, count)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        let leaf = stack.rsplit(';').next().unwrap_or(stack);
        *by_leaf.entry(leaf).or_default() += count;
        total += count;
    }
    let mut ranked: Vec<SelfCost> = by_leaf
        .into_iter()
        .map(|(function, samples)| SelfCost {
            function: function.to_string(),
            samples,
            percent: 100.0 * samples as f64 / total.max(1) as f64,
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.function.cmp(&b.function))
    });
    ranked.truncate(top);
    ranked
}

/// Collapses `args.perf_script`, writes the SVG (and folded stacks), prints the top self costs.
pub fn run(args: &FlamegraphArgs) -> anyhow::Result<()> {
    let input = File::open(&args.perf_script)
        .with_context(|| format!("opening {}", args.perf_script.display()))?;
    let mut folded = Vec::new();
    Folder::default()
        .collapse(BufReader::new(input), &mut folded)
        .context("collapsing perf script output")?;
    if let Some(path) = &args.folded {
        std::fs::write(path, &folded).with_context(|| format!("writing {}", path.display()))?;
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = args.title.clone();
    options.count_name = "samples".to_string();
    let out =
        File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    inferno::flamegraph::from_reader(&mut options, folded.as_slice(), BufWriter::new(out))
        .context("rendering the flame graph")?;
    println!("top self costs (leaf frames):");
    for cost in top_self_costs(&String::from_utf8_lossy(&folded), args.top) {
        println!(
            "{:>6.2}%  {:>8}  {}",
            cost.percent, cost.samples, cost.function
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_leaf_frames_by_samples() {
        let folded = "main;a;memcpy 30\nmain;b;memcpy 10\nmain;b;crc32c 50\nmain 10\nnot a line\n";
        let top = top_self_costs(folded, 2);
        assert_eq!(top.len(), 2);
        assert_eq!(top[0].function, "crc32c");
        assert_eq!(top[0].samples, 50);
        assert_eq!(top[1].function, "memcpy");
        assert_eq!(top[1].samples, 40);
        assert!((top[1].percent - 40.0).abs() < 1e-9);
    }
}
