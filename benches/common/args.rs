//! The command line every bench sees: `cargo bench` and `.gpu/run bench` pass `--bench`, a
//! filter and criterion's own flags to every bench executable, so each one has to find the
//! filter among flags it does not use (and do nothing when the filter names none of its ids).

/// Criterion's options that take a value (criterion 0.7).
const VALUE_OPTIONS: &[&str] = &[
    "--color",
    "-c",
    "--save-baseline",
    "-s",
    "--baseline",
    "-b",
    "--baseline-lenient",
    "--format",
    "--profile-time",
    "--load-baseline",
    "--sample-size",
    "--warm-up-time",
    "--measurement-time",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--plotting-backend",
    "--output-format",
];

pub struct Args {
    /// The first positional argument: a substring of the benchmark ids to run.
    pub filter: Option<String>,
    /// `--bench`: a measurement run (without it, `cargo test --benches` runs a quick check).
    pub bench_mode: bool,
    /// `--list`: print the benchmark ids and exit.
    pub list: bool,
}

impl Args {
    /// Whether `id` is selected: no filter, or the filter is a substring of `id`.
    pub fn selects(&self, id: &str) -> bool {
        self.filter.as_deref().is_none_or(|f| id.contains(f))
    }
}

pub fn parse() -> Args {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut filter = None;
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a.starts_with('-') {
            if VALUE_OPTIONS.contains(&a.as_str()) {
                i += 1;
            }
        } else if filter.is_none() {
            filter = Some(a.clone());
        }
        i += 1;
    }
    Args { filter, bench_mode: args.iter().any(|a| a == "--bench"), list: args.iter().any(|a| a == "--list") }
}
