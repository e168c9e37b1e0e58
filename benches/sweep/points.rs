//! Which (M, N, K) the sweep measures, and in which order.
//!
//! The grid: M from decoding (1) to prefill and training (16384), crossed with the (N, K) of
//! real layers. 12 × 9 = 108 points; the whole grid is the default, because it should fit one
//! device command with room to spare: estimated from the roofline (370 TFLOP/s, 3.5 TB/s, 8 µs
//! per call), the timed samples of all 108 points add up to ~15 s at 30 rounds, and generating
//! and copying the 5.2 G random input floats to well under a minute (not yet measured; a run's
//! last line, `sweep: N s in all`, says). Subsampling is by priority instead: the points run in
//! the order below, so `GEMM_EPILOGUE_SWEEP_POINTS=n` (the first n) and the time budget
//! (`GEMM_EPILOGUE_SWEEP_BUDGET_S`, which skips what is left when it runs out) drop the least
//! informative points first:
//! 1. issue 13's sweep, M ∈ {1, 16, 64, 256, 1024, 4096, 16384} × the five layers it names
//!    (35 points: the default rounding must stay within 3 % of truncation on all of them);
//! 2. the other five M on those five layers (60 in all: every M on one layer of each kind —
//!    square, wide N, long K, narrow N, small square);
//! 3. issue 13's M on the four other layers (88): wider/longer versions of those kinds, where
//!    only the tile count and the K loop change;
//! 4. the rest (108).

/// Rows of X: 1 (decoding one sequence) to 16384 (prefill, training batches), ×2 or ×4 apart.
pub const MS: [usize; 12] = [1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384];

/// (N, K, layer): nn.Linear(K → N) of a real model.
pub const LAYERS: [(usize, usize, &str); 9] = [
    (4096, 4096, "Llama-2-7B attention q/k/v/o projections"),
    (11008, 4096, "Llama-2-7B MLP up/gate"),
    (4096, 11008, "Llama-2-7B MLP down"),
    (14336, 4096, "Llama-3-8B / Mistral-7B MLP up/gate"),
    (4096, 14336, "Llama-3-8B / Mistral-7B MLP down"),
    (3072, 768, "BERT-base / GPT-2 MLP up"),
    (768, 3072, "BERT-base / GPT-2 MLP down"),
    (8192, 8192, "Llama-2-70B attention q/o projections"),
    (1024, 1024, "BERT-large attention q/k/v/o projections"),
];

/// Issue 13's sweep: these M ...
const ISSUE13_MS: [usize; 7] = [1, 16, 64, 256, 1024, 4096, 16384];
/// ... on these (N, K).
const ISSUE13_LAYERS: [(usize, usize); 5] = [(4096, 4096), (11008, 4096), (4096, 11008), (768, 3072), (1024, 1024)];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl Point {
    /// The benchmark id a filter matches: `sweep/MxNxK`.
    pub fn id(self) -> String {
        format!("sweep/{}x{}x{}", self.m, self.n, self.k)
    }

    pub fn in_issue13(self) -> bool {
        ISSUE13_MS.contains(&self.m) && ISSUE13_LAYERS.contains(&(self.n, self.k))
    }
}

/// The whole grid in priority order (see the module docs).
pub fn all() -> Vec<Point> {
    let tier = |p: &Point| {
        let (m13, l13) = (ISSUE13_MS.contains(&p.m), ISSUE13_LAYERS.contains(&(p.n, p.k)));
        match (l13, m13) {
            (true, true) => 0,
            (true, false) => 1,
            (false, true) => 2,
            (false, false) => 3,
        }
    };
    let mut points: Vec<Point> =
        LAYERS.iter().flat_map(|&(n, k, _)| MS.iter().map(move |&m| Point { m, n, k })).collect();
    // Stable: within a tier, layer by layer, M ascending.
    points.sort_by_key(tier);
    points
}

/// The points `GEMM_EPILOGUE_SWEEP_POINTS` asks for: `all` (default), `issue13`, or a number n
/// (the first n of [`all`]).
pub fn selected(spec: Option<&str>) -> Result<Vec<Point>, String> {
    let all = all();
    match spec.map(str::trim) {
        None | Some("") | Some("all") => Ok(all),
        Some("issue13") => Ok(all.into_iter().filter(|p| p.in_issue13()).collect()),
        Some(n) => match n.parse::<usize>() {
            Ok(n) => Ok(all.into_iter().take(n).collect()),
            Err(_) => Err(format!("GEMM_EPILOGUE_SWEEP_POINTS={n:?}: expected all, issue13 or a number")),
        },
    }
}

/// The invariants the module docs promise, checked at every start (the bench has no test
/// harness): the whole grid once, issue 13's sweep first and whole.
pub fn check() -> Result<(), String> {
    let all = all();
    let once = LAYERS
        .iter()
        .all(|&(n, k, _)| MS.iter().all(|&m| all.iter().filter(|p| **p == Point { m, n, k }).count() == 1));
    let issue13 = all.iter().filter(|p| p.in_issue13()).count();
    if all.len() != MS.len() * LAYERS.len() || !once {
        return Err("the sweep's grid is not the cross product".into());
    }
    if issue13 != ISSUE13_MS.len() * ISSUE13_LAYERS.len() || !all[..issue13].iter().all(|p| p.in_issue13()) {
        return Err("issue 13's sweep does not come first, whole".into());
    }
    Ok(())
}
