//! The sweep's markdown: a summary against issue 17's and issue 13's targets, every point's
//! medians and ratios, every point's plans and errors, and the fixed cost of a call.
//! docs/plot_benchmarks.py --sweep draws the heatmap from the `### Points` table: keep its
//! column names. A run of another epilogue form than the seed's (`GEMM_EPILOGUE_SWEEP_EPILOGUE`)
//! keeps every table as it is and names the form in a line of its own, starting `Epilogue: `
//! and the form's name in backticks (tools/sweep_medians.py reads it, to refuse mixing forms).

use std::fmt::Write as _;

use gemm_epilogue::testbed::{CublasLtEpilogue, Form};
use gemm_epilogue::{Family, Plan};

use crate::fixed_cost;
use crate::point::{Measured, Variant};
use crate::points::{self, Point};

/// Issue 13: the default rounding within 3 % of truncation.
const ROUNDING_BUDGET: f64 = 1.03;

/// `Kernel, grid g[, clusters of c][, repack X][, repack W][, rounded on load][, stream-K t tiles over c CTAs]`.
pub fn describe(plan: &Option<Plan>) -> String {
    let Some(p) = plan else { return "nothing to do".into() };
    let mut s = format!("{:?}, grid {}", p.kernel, p.grid);
    if p.cluster > 1 {
        let _ = write!(s, " (clusters of {})", p.cluster);
    }
    if p.repack_x {
        s.push_str(", repack X");
    }
    if p.repack_w {
        s.push_str(", repack W");
    }
    if p.round_on_load {
        s.push_str(", rounded on load");
    }
    if p.stream_k_tiles > 0 {
        let _ = write!(s, ", stream-K {} tiles over {} CTAs", p.stream_k_tiles, p.stream_k_ctas);
    }
    s
}

fn ms(r: &Measured, v: Variant) -> f64 {
    r.median_ms[Variant::ALL.iter().position(|u| *u == v).unwrap_or(0)]
}

fn ratio(r: &Measured, a: Variant, b: Variant) -> f64 {
    ms(r, a) / ms(r, b)
}

fn geomean(v: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x.ln(), n + 1));
    (sum / n.max(1) as f64).exp()
}

fn name(p: Point) -> String {
    format!("{}×{}×{}", p.m, p.n, p.k)
}

fn plan_of(r: &Measured, v: Variant) -> &Option<Plan> {
    &r.plans[Variant::OURS.iter().position(|u| *u == v).unwrap_or(0)]
}

/// The worst (largest) `ratio(r, v, against)` and its point.
fn worst<'a>(rows: impl IntoIterator<Item = &'a Measured>, v: Variant, against: Variant) -> Option<&'a Measured> {
    rows.into_iter().max_by(|a, b| ratio(a, v, against).total_cmp(&ratio(b, v, against)))
}

pub struct Run<'a> {
    pub header: String,
    pub rounds: usize,
    pub soak_s: f64,
    pub sm90: bool,
    /// The epilogue form every variant but cuBLAS alone computed.
    pub form: Form,
    pub rows: &'a [Measured],
    /// Points not measured, and why.
    pub missing: &'a [(Point, String)],
    pub fixed: &'a [fixed_cost::Row],
}

pub fn markdown(run: &Run<'_>) -> String {
    let mut s = run.header.clone();
    let mut rows: Vec<&Measured> = run.rows.iter().collect();
    let layer = |p: Point| points::LAYERS.iter().position(|&(n, k, _)| (n, k) == (p.n, p.k)).unwrap_or(usize::MAX);
    rows.sort_by_key(|r| (layer(r.point), r.point.m));
    let all = run.rows;
    let n = all.len();
    let form = run.form;
    let what =
        if form.is_seed() { format!("s = {}", crate::point::SCALE) } else { format!("epilogue `{}`", form.name()) };
    let _ = writeln!(
        s,
        "\n{n} points, each {} interleaved rounds of one sample (≥ 0.5 ms of back-to-back calls) per variant, medians; soak {} s; {what}.",
        run.rounds, run.soak_s
    );
    if !form.is_seed() {
        let lt = match CublasLtEpilogue::of(&form.epilogue(Some(()))) {
            Ok(e) => format!("cuBLASLt's columns its `{}`", e.name(true)),
            Err(why) => format!("cuBLASLt none ({why}): its columns stay empty"),
        };
        let c = if form.residual { ", C a fresh M × N matrix" } else { "" };
        let _ = writeln!(
            s,
            "Epilogue: `{}`, out = {} with y = F.linear(x, w, b){c}: ours fused; cuBLAS + elementwise the same epilogue in a second pass; {lt}; errors against the form's f64 reference.",
            form.name(),
            form.pytorch()
        );
    }
    if !run.missing.is_empty() {
        let list: Vec<String> = run.missing.iter().map(|(p, why)| format!("{} ({why})", name(*p))).collect();
        let _ = writeln!(s, "Not measured: {}.", list.join(", "));
    }
    if n == 0 {
        return s;
    }
    summary(&mut s, all, run.sm90, form);
    let _ = writeln!(s, "\n### Points (ms; ratio < 1: ours is faster)\n");
    let _ = writeln!(s, "| M | N | K | Tf32 raw W | Tf32 prepared W | Tf32Truncated | cuBLAS alone | cuBLAS + elementwise | cuBLASLt + bias | raw / alone | prepared / alone | truncated / alone | raw / (+ew) | prepared / (+ew) | raw / truncated | prepared / truncated | raw / cuBLASLt | cuBLASLt / alone |");
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    use Variant::*;
    for r in &rows {
        let p = r.point;
        let _ = write!(s, "| {} | {} | {} |", p.m, p.n, p.k);
        for v in Variant::ALL {
            let _ = write!(s, " {:.5} |", ms(r, v));
        }
        for (a, b) in [
            (Tf32Raw, CublasAlone),
            (Tf32Prepared, CublasAlone),
            (Truncated, CublasAlone),
            (Tf32Raw, CublasElementwise),
            (Tf32Prepared, CublasElementwise),
            (Tf32Raw, Truncated),
            (Tf32Prepared, Truncated),
            (Tf32Raw, CublasLt),
            (CublasLt, CublasAlone),
        ] {
            let _ = write!(s, " {:.3} |", ratio(r, a, b));
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "\n### Plans and errors (‖e‖/‖ref‖ against f64 on sampled elements)\n");
    let _ = writeln!(s, "| M×N×K | Tf32, raw W | Tf32, prepared W | Tf32Truncated, raw W | ‖e‖/‖ref‖ raw, prepared, truncated | ‖e‖/‖ref‖ cuBLASLt | calls per sample |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---:|");
    let no_lt = if CublasLtEpilogue::of(&form.epilogue(Some(()))).is_ok() { "no plan" } else { "no epilogue" };
    for r in &rows {
        let e = &r.errors;
        let lt = r.lt_error.map_or(no_lt.to_string(), |e| format!("{e:.2e}"));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.2e}, {:.2e}, {:.2e} | {lt} | {} |",
            name(r.point),
            describe(&r.plans[0]),
            describe(&r.plans[1]),
            describe(&r.plans[2]),
            e[0],
            e[1],
            e[2],
            r.batch
        );
    }
    fixed(&mut s, run.fixed);
    s
}

fn summary(s: &mut String, all: &[Measured], sm90: bool, form: Form) {
    use Variant::*;
    let n = all.len();
    let _ = writeln!(s, "\n### Summary\n");
    let _ = writeln!(s, "| ours | geomean / cuBLAS alone | geomean / (cuBLAS + elementwise) | worst / cuBLAS alone, its plan | ahead of cuBLAS alone | ahead of cuBLAS + elementwise | max ‖e‖/‖ref‖ |");
    let _ = writeln!(s, "|---|---:|---:|---|---:|---:|---:|");
    for (i, v) in Variant::OURS.into_iter().enumerate() {
        let g = geomean(all.iter().map(|r| ratio(r, v, CublasAlone)));
        let ge = geomean(all.iter().map(|r| ratio(r, v, CublasElementwise)));
        let w = worst(all, v, CublasAlone).map_or(String::new(), |r| {
            format!("{:.3} at {} ({})", ratio(r, v, CublasAlone), name(r.point), describe(plan_of(r, v)))
        });
        let ahead = all.iter().filter(|r| ratio(r, v, CublasAlone) < 1.0).count();
        let ahead_ew = all.iter().filter(|r| ratio(r, v, CublasElementwise) < 1.0).count();
        let err = all.iter().map(|r| r.errors[i]).fold(0.0, f64::max);
        let _ = writeln!(
            s,
            "| {} | {g:.3} | {ge:.3} | {w} | {ahead} / {n} | {ahead_ew} / {n} | {err:.2e} |",
            v.label(form)
        );
    }
    cublaslt(s, all, form);
    let _ = writeln!(s, "\n**Rounding (issue 13: the default within {:.0} % of Tf32Truncated on every point, no mma.sync fallback on sm_90)**\n", (ROUNDING_BUDGET - 1.0) * 100.0);
    for v in [Tf32Raw, Tf32Prepared] {
        let ok = all.iter().filter(|r| ratio(r, v, Truncated) <= ROUNDING_BUDGET).count();
        let ok13 = all.iter().filter(|r| r.point.in_issue13() && ratio(r, v, Truncated) <= ROUNDING_BUDGET).count();
        let n13 = all.iter().filter(|r| r.point.in_issue13()).count();
        let w = worst(all, v, Truncated).map_or(String::new(), |r| {
            format!(
                "{:.3} at {} ({} against {})",
                ratio(r, v, Truncated),
                name(r.point),
                describe(plan_of(r, v)),
                describe(plan_of(r, Truncated))
            )
        });
        let mma: Vec<String> = all
            .iter()
            .filter(|r| plan_of(r, v).is_some_and(|p| p.kernel.family() == Family::MmaSync))
            .map(|r| name(r.point))
            .collect();
        let mma = if !sm90 {
            "n/a (not sm_90)".to_string()
        } else if mma.is_empty() {
            "none".into()
        } else {
            format!("{} ({})", mma.len(), mma.join(", "))
        };
        let _ = writeln!(s, "- {}: ≤ {ROUNDING_BUDGET:.2}× Truncated on {ok} / {n} points ({ok13} / {n13} of issue 13's); worst {w}; mma.sync plans: {mma}.", v.label(form));
    }
    targets(s, all);
}

/// cuBLASLt's one call with a bias epilogue (or the form's): what a fused GEMM costs NVIDIA's
/// library against its GEMM alone, and ours against it, over the points where it had a plan.
fn cublaslt(s: &mut String, all: &[Measured], form: Form) {
    use Variant::*;
    let with: Vec<&Measured> = all.iter().filter(|r| r.lt_error.is_some() && ms(r, CublasLt).is_finite()).collect();
    let n = with.len();
    let how = match CublasLtEpilogue::of(&form.epilogue(Some(()))) {
        _ if form.is_seed() => {
            "`alpha = 1+s`, the bias pre-scaled by 1+s: the same math in one library kernel, rounded differently"
                .to_string()
        }
        Ok(e) => format!("`{}`: the same math in one library kernel, rounded differently", e.name(true)),
        Err(why) => {
            let _ = writeln!(s, "\n**{}**: {why}.", CublasLt.label(form));
            return;
        }
    };
    let _ =
        writeln!(s, "\n**{}** ({how}), on the {n} / {} points it had a plan for:\n", CublasLt.label(form), all.len());
    let Some(w_lt) = worst(with.iter().copied(), CublasLt, CublasAlone) else {
        let _ = writeln!(s, "- no plan on any point.");
        return;
    };
    let g = geomean(with.iter().map(|r| ratio(r, CublasLt, CublasAlone)));
    let over = with.iter().filter(|r| ratio(r, CublasLt, CublasAlone) > 1.03).count();
    let err = with.iter().filter_map(|r| r.lt_error).fold(0.0, f64::max);
    let _ = writeln!(s, "- cuBLASLt / cuBLAS alone: geomean {g:.3}, worst {:.3} at {}, above 1.03 on {over} / {n}; max ‖e‖/‖ref‖ {err:.2e}.", ratio(w_lt, CublasLt, CublasAlone), name(w_lt.point));
    for v in [Tf32Raw, Tf32Prepared] {
        let g = geomean(with.iter().map(|r| ratio(r, v, CublasLt)));
        let ahead = with.iter().filter(|r| ratio(r, v, CublasLt) < 1.0).count();
        let w = worst(with.iter().copied(), v, CublasLt)
            .map_or(String::new(), |r| format!("{:.3} at {}", ratio(r, v, CublasLt), name(r.point)));
        let _ = writeln!(s, "- {} / cuBLASLt: geomean {g:.3}, ahead on {ahead} / {n}, worst {w}.", v.label(form));
    }
}

/// Issue 17's targets, for the default handle with a raw and with a prepared W.
fn targets(s: &mut String, all: &[Measured]) {
    use Variant::*;
    let at = |m: usize, n: usize, k: usize| all.iter().find(|r| r.point == Point { m, n, k });
    let mark = |ok: bool| if ok { "yes" } else { "**no**" };
    let _ = writeln!(s, "\n**Issue 17's targets** (ratios to cuBLAS alone unless named)\n");
    let _ = writeln!(s, "| target | Tf32, raw W | Tf32, prepared W |");
    let _ = writeln!(s, "|---|---|---|");
    let mut line = |what: &str, f: &dyn Fn(Variant) -> String| {
        let _ = writeln!(s, "| {what} | {} | {} |", f(Tf32Raw), f(Tf32Prepared));
    };
    line("< cuBLAS + elementwise on every point", &|v| {
        let behind = all.iter().filter(|r| ratio(r, v, CublasElementwise) >= 1.0).count();
        format!("{} ({behind} behind)", mark(behind == 0))
    });
    line("geomean ≤ 0.92", &|v| {
        let g = geomean(all.iter().map(|r| ratio(r, v, CublasAlone)));
        format!("{} ({g:.3})", mark(g <= 0.92))
    });
    line("worst point ≤ 1.03", &|v| {
        worst(all, v, CublasAlone).map_or("–".into(), |r| {
            format!("{} ({:.3})", mark(ratio(r, v, CublasAlone) <= 1.03), ratio(r, v, CublasAlone))
        })
    });
    for (m, n, k, bound) in [(1, 4096, 4096, 1.00), (16, 4096, 4096, 1.00), (1, 768, 3072, 1.10)] {
        line(&format!("{m}×{n}×{k} ≤ {bound:.2}"), &|v| {
            at(m, n, k).map_or("not measured".into(), |r| {
                format!("{} ({:.3})", mark(ratio(r, v, CublasAlone) <= bound), ratio(r, v, CublasAlone))
            })
        });
    }
}

fn fixed(s: &mut String, rows: &[fixed_cost::Row]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n### Fixed cost of a call (µs; medians; see benches/sweep/fixed_cost.rs)\n");
    let _ = writeln!(s, "| what | plan | host, per call | back to back (events), per call | one call alone (events) |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|");
    let us = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.2}"));
    for r in rows {
        let plan = if r.plan.is_some() { describe(&r.plan) } else { "–".into() };
        let _ =
            writeln!(s, "| {} | {plan} | {:.2} | {} | {} |", r.what, r.host_us, us(r.back_to_back_us), us(r.alone_us));
    }
}
