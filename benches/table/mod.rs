//! One machine-readable line per benchmark figure, for `scripts/bench` to collect into its table:
//!
//! `bench-result<TAB>metric<TAB>figure<TAB>unit<TAB>target<TAB>baseline<TAB>ratio<TAB>ratio target`
//!
//! Targets are `>=N` or `<=N` (or `-` for a figure printed for information); baseline and ratio
//! are `-` when the figure has no same-run baseline. The ratio is the one the benchmark's own
//! lines print (figure / baseline unless the metric name says otherwise).

// Each benchmark uses the part it needs.
#![allow(dead_code)]

/// What a figure or ratio should be.
#[derive(Clone, Copy)]
pub enum Target {
    /// At least this much (rates, speed-ups).
    AtLeast(f64),
    /// At most this much (latencies, times).
    AtMost(f64),
    /// Printed for information only.
    None,
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::AtLeast(v) => write!(f, ">={v}"),
            Target::AtMost(v) => write!(f, "<={v}"),
            Target::None => f.write_str("-"),
        }
    }
}

/// A figure compared with a baseline measured in the same run: (baseline in the figure's unit,
/// the ratio, the ratio's target).
pub struct SameRun {
    /// The baseline, in the figure's unit.
    pub baseline: f64,
    /// The ratio the benchmark reports.
    pub ratio: f64,
    /// What the ratio should be.
    pub target: Target,
}

/// Prints one `bench-result` line (see the module comment).
pub fn row(metric: &str, figure: f64, unit: &str, target: Target, same_run: Option<SameRun>) {
    let (baseline, ratio, ratio_target) = match same_run {
        Some(s) => (
            format!("{:.4}", s.baseline),
            format!("{:.4}", s.ratio),
            s.target.to_string(),
        ),
        None => ("-".into(), "-".into(), "-".into()),
    };
    println!(
        "bench-result\t{metric}\t{figure:.4}\t{unit}\t{target}\t{baseline}\t{ratio}\t{ratio_target}"
    );
}

/// `--quick` was given: the benchmark runs its reduced sizes (see `scripts/bench`).
pub fn quick() -> bool {
    std::env::args().any(|a| a == "--quick")
}

/// The value after `--<name>` on the command line, if any.
pub fn arg<T: std::str::FromStr>(name: &str) -> Option<T> {
    let flag = format!("--{name}");
    std::env::args()
        .skip_while(|a| *a != flag)
        .nth(1)
        .and_then(|n| n.parse().ok())
}
