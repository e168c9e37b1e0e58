//! Running a case and checking what it produced: [`execute`] (fused and cuBLAS, poison and
//! padding invariants, the plan's contract), [`verify`] (the numbers, against f64 and cuBLAS
//! within the bounds of `bounds`), [`check`] (both), and [`expect_refused`].

use gemm_epilogue::testbed::reference::{self, HostMatrix, RefElement};
use gemm_epilogue::{Dispatch, Error, Kernel, MatrixMut, Plan};

use super::bounds::{
    coeff, norm, norm_tol, unit_roundoff, Norm, ABS_SLACK, FULL_REF_MACS, MIN_NORM_COUNT, NORM_TOL_CUBLAS, U_CUBLAS,
};
use super::case::{out_len, Case};
use super::contract::assert_plan_keeps_the_contract;
use super::gpu::Gpu;
use super::inputs::{par_map, sample_indices, DeviceInputs, Inputs};
use super::poison::{assert_all_poisoned, extent, poisoned, take_view_checked};
use super::rng::{seed, Rng};
use super::weight::CaseWeight;

/// What a case produced.
#[derive(Debug)]
pub struct Outcome {
    pub plan: Option<Plan>,
    /// M × N, dense.
    pub fused: Vec<f32>,
    /// M × N, dense (when asked for).
    pub cublas: Option<Vec<f32>>,
}

/// Runs the fused kernel on a poisoned output buffer, and optionally cuBLAS + elementwise on
/// another; checks the poison/padding invariants and that the plan keeps the crate's contract
/// ([`assert_plan_keeps_the_contract`]: for a forced kernel, that it ran).
pub fn execute(g: &Gpu, case: &Case, inputs: &Inputs, with_cublas: bool) -> Outcome {
    let d = DeviceInputs::upload(g, inputs);
    execute_on(g, case, &d, with_cublas)
}

/// [`execute`] on inputs already on the device. The fused call gets W as the case passes it
/// ([`CaseWeight`]: prepared by the running handle when [`Case::prepared_w`]); cuBLAS always
/// reads the W view.
pub fn execute_on(g: &Gpu, case: &Case, d: &DeviceInputs, with_cublas: bool) -> Outcome {
    let (x, b) = (d.x_view(case), d.b_view(case));
    let olen = extent(case.m, case.n, case.ldo());
    let gemm = case.gemm(&g.gemm);
    let w = CaseWeight::new(&gemm, &g.stream, case, d.w_view(case));

    let mut out = g.stream.clone_htod(&poisoned(out_len(case))).expect("upload poison");
    let plan = {
        let mut o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + olen), case.m, case.n, case.ldo());
        if case.workspace {
            let len = w.workspace_len(&gemm, &g.stream, &x).expect("workspace_len");
            let mut ws = g.stream.clone_htod(&poisoned(len.max(1))).expect("upload workspace");
            w.run_with_workspace(&gemm, &g.stream, &x, b.as_ref(), case.scale, &mut o, &mut ws.as_view_mut())
        } else {
            w.run(&gemm, &g.stream, &x, b.as_ref(), case.scale, &mut o)
        }
        .unwrap_or_else(|e| panic!("fused run failed for {case:?}: {e}"))
    };
    let w_view = d.w_view(case);
    let host = g.stream.clone_dtoh(&out).expect("download out");
    let fused = take_view_checked(&host, case.off_o, case.m, case.n, case.ldo(), &format!("fused {plan:?} {case:?}"));

    match (plan, case.m == 0 || case.n == 0) {
        (None, true) => {}
        (Some(p), false) => assert_plan_keeps_the_contract(g, case, &p),
        (p, _) => panic!("run returned {p:?} for {case:?}"),
    }

    let cublas = with_cublas.then(|| {
        let mut out = g.stream.clone_htod(&poisoned(out_len(case))).expect("upload poison");
        {
            let mut o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + olen), case.m, case.n, case.ldo());
            g.baseline
                .linear_scale_residual(&x, &w_view, b.as_ref(), case.scale, &mut o)
                .unwrap_or_else(|e| panic!("cuBLAS baseline failed for {case:?}: {e}"));
        }
        let host = g.stream.clone_dtoh(&out).expect("download cublas out");
        take_view_checked(&host, case.off_o, case.m, case.n, case.ldo(), &format!("cuBLAS {case:?}"))
    });
    Outcome { plan, fused, cublas }
}

#[derive(Debug, Default)]
struct Stats {
    count: usize,
    diff2: f64,
    ref2: f64,
    /// Σ magnitude² (Σ|x||w| + |b|, times 1 + |s|): what errors are bounded relative to.
    mag2: f64,
    violations: usize,
    /// (excess = |diff| / bound, row, col, got, want, bound)
    worst: Option<(f64, usize, usize, f32, f64, f64)>,
}

impl Stats {
    fn add(&mut self, row: usize, col: usize, got: f32, want: f64, magnitude: f64, bound: f64) {
        let diff = got as f64 - want;
        self.count += 1;
        self.diff2 += diff * diff;
        self.ref2 += want * want;
        self.mag2 += magnitude * magnitude;
        let ok = got.is_finite() && approx::abs_diff_eq!(got as f64, want, epsilon = bound);
        if !ok {
            self.violations += 1;
        }
        let excess = if got.is_finite() { diff.abs() / bound } else { f64::INFINITY };
        if self.worst.is_none_or(|w| excess > w.0) {
            self.worst = Some((excess, row, col, got, want, bound));
        }
    }
    fn merge(mut self, o: Stats) -> Stats {
        self.count += o.count;
        self.diff2 += o.diff2;
        self.ref2 += o.ref2;
        self.mag2 += o.mag2;
        self.violations += o.violations;
        if let Some(w) = o.worst {
            if self.worst.is_none_or(|s| w.0 > s.0) {
                self.worst = Some(w);
            }
        }
        self
    }
    /// Every element within its bound and, over enough elements, ‖diff‖/‖want‖ ≤ `norm_tol`, or
    /// with `Norm::Magnitude` ‖diff‖/‖magnitude‖ ≤ `norm_tol`.
    fn assert_within(&self, what: &str, norm_tol: f64, norm: Norm, ctx: &str) {
        assert!(
            self.violations == 0,
            "{what}: {} of {} elements outside the bound; worst (|diff|/bound, row, col, got, want, bound) = {:?}; {ctx}",
            self.violations,
            self.count,
            self.worst
        );
        if self.count >= MIN_NORM_COUNT {
            let (e, of) = match norm {
                Norm::Value => (self.norm_err(), "want"),
                Norm::Magnitude => ((self.diff2 / self.mag2.max(f64::MIN_POSITIVE)).sqrt(), "magnitude"),
            };
            assert!(
                e <= norm_tol,
                "{what}: ‖diff‖/‖{of}‖ = {e:.3e} > {norm_tol:e} over {} elements; {ctx}",
                self.count
            );
        }
    }

    fn norm_err(&self) -> f64 {
        if self.ref2 == 0.0 {
            if self.diff2 == 0.0 {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            (self.diff2 / self.ref2).sqrt()
        }
    }
}

/// Generates inputs for `case`, runs it (fused + cuBLAS) and checks everything. Returns the plan.
pub fn check(g: &Gpu, case: &Case, rng: &mut Rng) -> Option<Plan> {
    let inputs = Inputs::generate(case, rng);
    check_inputs(g, case, &inputs, rng)
}

/// [`check`] with given inputs (finite).
pub fn check_inputs(g: &Gpu, case: &Case, inputs: &Inputs, rng: &mut Rng) -> Option<Plan> {
    let outcome = execute(g, case, inputs, !cublas_skipped());
    verify(case, inputs, &outcome, rng);
    outcome.plan
}

/// True when `GEMM_EPILOGUE_SKIP_CUBLAS=1`: [`check_inputs`] leaves cuBLAS out and checks
/// against f64 only. For sanitizer runs of our kernels: under racecheck, cuBLAS's own kernels
/// (even when `--kernel-name` leaves them uninstrumented) stop on "The Sanitizer failed to
/// handle a hardware exception" (docs/BENCHMARKS.md, "Reliability").
pub fn cublas_skipped() -> bool {
    std::env::var("GEMM_EPILOGUE_SKIP_CUBLAS").is_ok_and(|v| v.trim() == "1")
}

/// The numeric checks of an outcome (see the module docs for the bounds).
pub fn verify(case: &Case, inputs: &Inputs, o: &Outcome, rng: &mut Rng) {
    let Some(plan) = o.plan else {
        assert!(o.fused.is_empty());
        return;
    };
    let (m, n, k) = (case.m, case.n, case.k);
    let (x, w, b) = (inputs.x_host(case), inputs.w_host(case), inputs.b_host(case));
    let u = unit_roundoff(&plan);
    let c = coeff(u, k);
    let ctx = format!("{case:?}, kernel {:?}, seed {:#x}", plan.kernel, seed());

    // (1) vs the f64 reference.
    let full = m.saturating_mul(n).saturating_mul(k.max(1)) <= FULL_REF_MACS;
    let (rows, cols): (Vec<usize>, Vec<usize>) = if full {
        ((0..m).collect(), (0..n).collect())
    } else {
        (sample_indices(m, rng, 24), sample_indices(n, rng, 24))
    };
    let stats = par_map(rows.len(), |range| {
        let mut s = Stats::default();
        for &r in &rows[range] {
            for &col in &cols {
                let RefElement { value, magnitude } = reference::element(x, w, b, case.scale, r, col);
                s.add(r, col, o.fused[r * n + col], value, magnitude, c * magnitude + ABS_SLACK);
            }
        }
        s
    })
    .into_iter()
    .fold(Stats::default(), Stats::merge);
    stats.assert_within(
        &format!("fused vs f64 reference (bound c·u·magnitude, c·u = {c:.3e})"),
        norm_tol(&plan),
        norm(&plan, case.k),
        &ctx,
    );

    // Exact properties of the epilogue.
    if case.scale == -1.0 {
        // t = v·(−1) = −v exactly, t + v = +0 exactly.
        assert!(o.fused.iter().all(|&v| v == 0.0), "s = −1 must give exact zeros; {ctx}");
    }

    // (2) vs cuBLAS + elementwise, every element.
    if let Some(cublas) = &o.cublas {
        let cc = c + coeff(U_CUBLAS, k);
        let xn: Vec<f64> = (0..m).map(|r| row_norm(x, r)).collect();
        let wn: Vec<f64> = (0..n).map(|r| row_norm(w, r)).collect();
        let amp = 1.0 + (case.scale as f64).abs();
        let stats = par_map(m, |range| {
            let mut s = Stats::default();
            for r in range {
                for col in 0..n {
                    let bb = b.map_or(0.0, |b| (b[col] as f64).abs());
                    let mag_ub = amp * (xn[r] * wn[col] + bb);
                    s.add(
                        r,
                        col,
                        o.fused[r * n + col],
                        cublas[r * n + col] as f64,
                        mag_ub,
                        cc * mag_ub + 2.0 * ABS_SLACK,
                    );
                }
            }
            s
        })
        .into_iter()
        .fold(Stats::default(), Stats::merge);
        // Truncated operands: the same coherent bias as against f64 (see `norm_tol`), on top of
        // cuBLAS's own error (measured 2.3e-3 of ‖cuBLAS‖ with N = 1, K = 4).
        stats.assert_within("fused vs cuBLAS+elementwise", NORM_TOL_CUBLAS, norm(&plan, case.k), &ctx);
        if case.scale == -1.0 {
            assert!(cublas.iter().all(|&v| v == 0.0), "cuBLAS+elementwise with s = −1 must give exact zeros; {ctx}");
        }
    }
}

fn row_norm(a: HostMatrix<'_>, r: usize) -> f64 {
    a.data[r * a.ld..r * a.ld + a.cols].iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>().sqrt()
}

/// Host `(v*s) + v` in f32 with two roundings (what the kernels must compute for a given v).
pub fn epilogue_f32(v: f32, s: f32) -> f32 {
    let t = v * s;
    t + v
}

/// Forcing `kernel` on `case` must fail with `KernelUnavailable` for that kernel — in
/// [`gemm_epilogue::FusedGemm::plan`], in [`gemm_epilogue::FusedGemm::workspace_len`] for a case
/// with a workspace, and in the run itself (with a workspace of the length Auto of the same
/// rounding asks for) — and leave the (poisoned) output untouched. W is passed as the case says
/// (prepared by the forcing handle when [`Case::prepared_w`]).
pub fn expect_refused(g: &Gpu, case: &Case, kernel: Kernel, rng: &mut Rng) {
    let inputs = Inputs::generate(case, rng);
    let d = DeviceInputs::upload(g, &inputs);
    let case = &case.force(kernel);
    let (x, b) = (d.x_view(case), d.b_view(case));
    let gemm = case.gemm(&g.gemm);
    let w = CaseWeight::new(&gemm, &g.stream, case, d.w_view(case));
    let mut out = g.stream.clone_htod(&poisoned(out_len(case))).expect("upload poison");
    let len = extent(case.m, case.n, case.ldo());
    let r = {
        let mut o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + len), case.m, case.n, case.ldo());
        let planned = w.plan(&gemm, &g.stream, &x, b.as_ref(), &o);
        assert!(
            is_refused(&planned, kernel),
            "plan: forcing {kernel:?} on {case:?} should be refused, got {planned:?}"
        );
        if case.workspace {
            let wl = w.workspace_len(&gemm, &g.stream, &x);
            assert!(
                is_refused(&wl, kernel),
                "workspace_len: forcing {kernel:?} on {case:?} should be refused, got {wl:?}"
            );
            let auto = gemm.with_dispatch(Dispatch::Auto);
            let ws_len = w.workspace_len(&auto, &g.stream, &x).expect("Auto's workspace_len");
            let mut ws = g.stream.clone_htod(&poisoned(ws_len.max(1))).expect("upload workspace");
            w.run_with_workspace(&gemm, &g.stream, &x, b.as_ref(), case.scale, &mut o, &mut ws.as_view_mut())
        } else {
            w.run(&gemm, &g.stream, &x, b.as_ref(), case.scale, &mut o)
        }
    };
    assert!(is_refused(&r, kernel), "forcing {kernel:?} on {case:?} should be refused, got {r:?}");
    assert_all_poisoned(&g.stream.clone_dtoh(&out).expect("download out"), &format!("refused {case:?}"));
}

/// `KernelUnavailable` naming `kernel`.
fn is_refused<T>(r: &Result<T, Error>, kernel: Kernel) -> bool {
    matches!(r, Err(Error::KernelUnavailable { kernel: k, .. }) if *k == kernel)
}
