//! The shape sweep (issue 17): ours against cuBLAS over M × (N, K) of real transformer layers.
//!
//! Each point ([`points`]: M ∈ {1 … 16384} × nine (N, K) of real models, 108 points, issue 13's
//! 35 first) gets fresh random operands and times six variants interleaved on one stream with
//! CUDA events (`testbed::timing`: warm-up, then rounds of one ≥ 0.5 ms sample of back-to-back
//! calls per variant, in orders where each variant follows every other equally often; medians):
//! - ours as it comes (`Precision::Tf32`, `Dispatch::Auto`) on the raw W, with its workspace;
//! - the same with W prepared once (`FusedGemm::prepare_weight`, what `Linear` does);
//! - ours with `Precision::Tf32Truncated` on the raw W, with its workspace;
//! - cuBLAS's TF32 GEMM alone (no bias, no epilogue: the ceiling to beat);
//! - cuBLAS's TF32 GEMM + the elementwise pass (what a user gets without this crate);
//! - cuBLASLt's TF32 GEMM with its bias epilogue, `alpha = 1+s` (one library call with a fused
//!   epilogue: what a like-for-like single kernel costs NVIDIA; it rounds differently).
//!
//! That is the seed form, `v·s + v` (s = 0.5). `GEMM_EPILOGUE_SWEEP_EPILOGUE=FORM` runs another
//! epilogue form instead (`testbed::Form`: `identity`, `relu`, `gelu`, `gelu_tanh`, `silu`,
//! `residual` = `identity+residual`, or any of them `+residual`: `+ C`, C a fresh M × N matrix,
//! β = 1): ours (all three) fused with that `Epilogue`, cuBLAS's GEMM + the elementwise pass
//! applying the same epilogue, and cuBLASLt with its own epilogue for the form where it has one
//! (`BIAS` for identity and residual, `RELU_BIAS`, `GELU_BIAS` for gelu_tanh; none for gelu,
//! silu or an activation + residual: its columns stay empty); cuBLAS's GEMM alone as ever. The
//! errors are against the form's f64 reference, and the report names the form in a line of its
//! own (`Epilogue: FORM, ...`); its tables keep their columns.
//!
//! Before timing, one call of each variant of ours gives its plan (kernel, repacks, stream-K),
//! and one call of each of ours and of cuBLASLt, into an output poisoned with NaN, its error
//! against the f64 reference on sampled elements. After the points, the fixed
//! cost of a call is measured on its own ([`fixed_cost`]).
//!
//! Output: a markdown report ([`report`]: summary against issues 17 and 13, every point's
//! medians and ratios, plans, fixed cost), printed and written to `$GEMM_EPILOGUE_BENCH_OUT`
//! (default `target/sweep.md`, relative to where it runs, overwritten each run).
//! `python3 docs/plot_benchmarks.py --sweep FILE > docs/sweep.svg` draws the heatmap from it.
//!
//! Run: `cargo bench --bench sweep` (about a minute on an H200 after the 15 s soak: the run
//! times in docs/BENCHMARKS.md; the budget below caps it), or with a filter, a substring of the ids
//! `sweep/MxNxK` and `sweep/fixed_cost`: `cargo bench --bench sweep -- sweep/1x`. Under
//! `bash .gpu/run bench FILTER` every bench gets the filter: `sweep` selects this bench alone
//! (the other benches' ids do not contain it, and none of ours contain theirs).
//!
//! Environment:
//! - `GEMM_EPILOGUE_SWEEP_POINTS`: `all` (default, 108), `issue13` (its 35) or n (the first n in
//!   the priority order of [`points`]);
//! - `GEMM_EPILOGUE_SWEEP_ROUNDS`: interleaved rounds per point (default 30);
//! - `GEMM_EPILOGUE_SWEEP_BUDGET_S`: seconds from start after which the points left are skipped
//!   (and listed as not measured), so a run fits one device command (default 360);
//! - `GEMM_EPILOGUE_SOAK_S`: seconds of load before the first point (default 15; 0 = none): a
//!   cold H200 runs at its top clock until its power cap catches up (docs/BENCHMARKS.md);
//! - `GEMM_EPILOGUE_SWEEP_EPILOGUE`: the epilogue form (default `seed`; above);
//! - `GEMM_EPILOGUE_BENCH_OUT`: where the report goes.
//!
//! Without `--bench` (`cargo test --benches`) it times the first point with one round and
//! writes nothing. Without a GPU it prints `skipped: <reason>` and exits 0, unless
//! `GEMM_EPILOGUE_REQUIRE_GPU=1`, then it exits 1.

#[path = "../common/mod.rs"]
mod common;
mod fixed_cost;
mod point;
mod points;
mod report;

use std::io::Write as _;
use std::time::Instant;

use gemm_epilogue::testbed::{CublasBaseline, CublasLtEpilogue, CublasLtLinear, Form};
use point::{Case, Variant, SCALE};

const FIXED_COST_ID: &str = "sweep/fixed_cost";
/// The point the soak runs: large enough to hold the card at its power cap.
const SOAK_POINT: points::Point = points::Point { m: 8192, n: 4096, k: 4096 };

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

fn main() {
    let start = Instant::now();
    if let Err(e) = points::check() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
    let args = common::args::parse();
    let form = match std::env::var("GEMM_EPILOGUE_SWEEP_EPILOGUE") {
        Err(_) => Form::seed(SCALE),
        Ok(name) => match Form::parse(&name, SCALE) {
            Some(form) => form,
            None => {
                eprintln!("error: GEMM_EPILOGUE_SWEEP_EPILOGUE={name:?}: expected one of {}", Form::NAMES);
                std::process::exit(1);
            }
        },
    };
    let chosen = match points::selected(std::env::var("GEMM_EPILOGUE_SWEEP_POINTS").ok().as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let mut todo: Vec<points::Point> = chosen.into_iter().filter(|p| args.selects(&p.id())).collect();
    let mut fixed_cost_too = args.selects(FIXED_COST_ID);
    if args.list {
        todo.iter().for_each(|p| println!("{}: benchmark", p.id()));
        if fixed_cost_too {
            println!("{FIXED_COST_ID}: benchmark");
        }
        return;
    }
    if todo.is_empty() && !fixed_cost_too {
        println!("sweep: no benchmark id matches the filter {:?}", args.filter);
        return;
    }
    let Some((ctx, gemm, device)) = common::open_gpu() else { return };
    let stream = ctx.default_stream();
    let blas = CublasBaseline::new(&gemm, stream.clone()).expect("cuBLAS handle");
    let lt = CublasLtLinear::new(&gemm, stream.clone()).expect("cuBLASLt handle");
    println!("device: {device}");
    if !form.is_seed() {
        println!("epilogue: {} (out = {})", form.name(), form.pytorch());
        if let Err(why) = CublasLtEpilogue::of(&form.epilogue(Some(()))) {
            println!("cuBLASLt: no epilogue for this form ({why}); its columns stay empty");
        }
    }

    let (mut rounds, mut soak_s) =
        (env("GEMM_EPILOGUE_SWEEP_ROUNDS", 30usize).max(1), env("GEMM_EPILOGUE_SOAK_S", 15.0f64));
    let budget_s = env("GEMM_EPILOGUE_SWEEP_BUDGET_S", 360.0f64);
    if !args.bench_mode {
        (rounds, soak_s, fixed_cost_too) = (1, 0.0, false);
        todo.truncate(1);
    }
    if soak_s > 0.0 {
        let soaked = Case::new(&gemm, &blas, &lt, &stream, SOAK_POINT, form).and_then(|mut c| c.soak(soak_s));
        match soaked {
            Ok(calls) => println!("soaked {calls} calls of {} in {soak_s} s", SOAK_POINT.id()),
            Err(e) => println!("soak failed: {e}"),
        }
    }

    let (mut rows, mut missing) = (Vec::new(), Vec::new());
    for p in todo {
        if start.elapsed().as_secs_f64() > budget_s {
            missing.push((p, format!("past the {budget_s} s budget")));
            continue;
        }
        let t = Instant::now();
        match Case::new(&gemm, &blas, &lt, &stream, p, form).and_then(|mut c| c.measure(rounds).map(|r| (r, c.seed))) {
            Ok((r, seed)) => {
                let alone = r.median_ms[3];
                let ratios: Vec<String> = Variant::ALL
                    .iter()
                    .zip(r.median_ms)
                    .map(|(v, ms)| format!("{} {ms:.4} ms ({:.3})", v.label(form), ms / alone))
                    .collect();
                println!("[{}] seed {seed:#x}, {:.1} s; {}", p.id(), t.elapsed().as_secs_f64(), ratios.join("; "));
                println!(
                    "[{}] plans: raw W {}; prepared W {}; truncated {}",
                    p.id(),
                    report::describe(&r.plans[0]),
                    report::describe(&r.plans[1]),
                    report::describe(&r.plans[2])
                );
                rows.push(r);
            }
            Err(e) => {
                println!("[{}] failed: {e}", p.id());
                missing.push((p, format!("failed: {e}")));
            }
        }
        let _ = std::io::stdout().flush();
    }
    let fixed = if fixed_cost_too {
        fixed_cost::measure(&gemm, &blas, &stream).unwrap_or_else(|e| {
            println!("fixed cost failed: {e}");
            Vec::new()
        })
    } else {
        Vec::new()
    };

    let header = common::run_info::header("sweep run", &device);
    let text = report::markdown(&report::Run {
        header,
        rounds,
        soak_s,
        sm90: gemm.device().is_hopper(),
        form,
        rows: &rows,
        missing: &missing,
        fixed: &fixed,
    });
    println!("{text}");
    println!("sweep: {:.0} s in all", start.elapsed().as_secs_f64());
    if args.bench_mode {
        let path = std::env::var("GEMM_EPILOGUE_BENCH_OUT").unwrap_or_else(|_| "target/sweep.md".into());
        let path = std::path::Path::new(&path);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        match std::fs::write(path, &text) {
            Ok(()) => println!("sweep: report written to {}", path.display()),
            Err(e) => eprintln!("could not write {}: {e}", path.display()),
        }
    }
}
