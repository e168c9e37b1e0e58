//! One point of the sweep: fresh random operands on the device, the six variants it times,
//! the plan each of ours runs, and the error of ours and of cuBLASLt against the f64 reference,
//! all with the run's epilogue form (`GEMM_EPILOGUE_SWEEP_EPILOGUE`; the seed's `v·s + v` by
//! default).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use gemm_epilogue::cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use gemm_epilogue::testbed::reference::{self, HostMatrix, SplitMix64 as Rng};
use gemm_epilogue::testbed::{self, timing, CublasBaseline, CublasLtEpilogue, CublasLtLinear, CublasLtPlan, Form};
use gemm_epilogue::{FusedGemm, Gemm, MatrixMut, MatrixRef, Plan, PreparedWeight};

use crate::points;

/// The seed form's `s`.
pub const SCALE: f32 = 0.5;
/// Rows and columns of `out` compared with the f64 reference per variant of ours.
const CHECK_ROWS: usize = 16;
const CHECK_COLS: usize = 32;
/// All variants in turn for this long before a point's samples (after the soak, a point only
/// has to settle its own clocks and caches).
const WARM_UP_MS: f64 = 10.0;

/// What each point times, in the order of [`Variant::ALL`] (the report's column order). Every
/// variant but [`Variant::CublasAlone`] computes the run's epilogue form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// `FusedGemm` as it comes (`Precision::Tf32`, `Dispatch::Auto`) on the raw W, with the
    /// workspace it asks for: what a new user's first call runs.
    Tf32Raw,
    /// The same handle with W prepared once (`FusedGemm::prepare_weight`): what `Linear` runs.
    Tf32Prepared,
    /// `Precision::Tf32Truncated` (opt-in) on the raw W, with its workspace.
    Truncated,
    /// cuBLAS's TF32 GEMM, no bias, no epilogue: the ceiling to beat.
    CublasAlone,
    /// cuBLAS's TF32 GEMM and the elementwise pass (the form's epilogue in a second pass): what a
    /// user gets without this crate.
    CublasElementwise,
    /// One `cublasLtMatmul` with the bias epilogue, `alpha = 1+s` and the bias pre-scaled by
    /// `1+s`: NVIDIA's own GEMM with a fused epilogue, the like-for-like single kernel (it
    /// rounds differently: `(1+s)·acc + round((1+s)·b)` in place of `v·s + v`). For another
    /// form, cuBLASLt's own epilogue for it where it has one ([`CublasLtEpilogue`]), else none
    /// (its column stays empty).
    CublasLt,
}

impl Variant {
    pub const ALL: [Variant; 6] = [
        Variant::Tf32Raw,
        Variant::Tf32Prepared,
        Variant::Truncated,
        Variant::CublasAlone,
        Variant::CublasElementwise,
        Variant::CublasLt,
    ];
    pub const OURS: [Variant; 3] = [Variant::Tf32Raw, Variant::Tf32Prepared, Variant::Truncated];

    /// Its label in a run of `form`.
    pub fn label(self, form: Form) -> String {
        match self {
            Variant::Tf32Raw => "ours, Tf32 (default), raw W".into(),
            Variant::Tf32Prepared => "ours, Tf32, prepared W (Linear)".into(),
            Variant::Truncated => "ours, Tf32Truncated (opt-in), raw W".into(),
            Variant::CublasAlone => "cuBLAS TF32 GEMM alone".into(),
            Variant::CublasElementwise => "cuBLAS TF32 GEMM + elementwise".into(),
            Variant::CublasLt if form.is_seed() => "cuBLASLt TF32 GEMM + bias epilogue (1 call)".into(),
            Variant::CublasLt => match CublasLtEpilogue::of(&form.epilogue(Some(()))) {
                Ok(e) => format!(
                    "cuBLASLt TF32 GEMM + {} epilogue (1 call)",
                    e.name(true).trim_start_matches("CUBLASLT_EPILOGUE_")
                ),
                Err(_) => "cuBLASLt TF32 GEMM (no epilogue for this form)".into(),
            },
        }
    }
}

/// What one point measured.
pub struct Measured {
    pub point: points::Point,
    /// Median ms per call, in the order of [`Variant::ALL`].
    pub median_ms: [f64; 6],
    /// The plan of each variant of ours ([`Variant::OURS`] order); `None`: it planned nothing.
    pub plans: [Option<Plan>; 3],
    /// ‖e‖/‖ref‖ against the f64 reference on sampled elements, per variant of ours.
    pub errors: [f64; 3],
    /// The same for cuBLASLt; `None` when it had no plan for the point (its median is NaN).
    pub lt_error: Option<f64>,
    /// Calls per sample.
    pub batch: u64,
}

/// What [`Case::check`] found: the plans of ours and the errors against f64.
pub struct Checked {
    pub plans: [Option<Plan>; 3],
    pub errors: [f64; 3],
    pub lt_error: Option<f64>,
}

pub struct Case<'g> {
    p: points::Point,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    gemm: &'g FusedGemm,
    truncated: FusedGemm,
    blas: &'g CublasBaseline,
    lt: &'g CublasLtLinear,
    /// `None`: cuBLASLt's heuristic offered nothing for the point (printed by `new`).
    lt_plan: Option<CublasLtPlan>,
    x: CudaSlice<f32>,
    w: CudaSlice<f32>,
    b: CudaSlice<f32>,
    /// The residual C (M × N) of a `+residual` form.
    c: Option<CudaSlice<f32>>,
    out: CudaSlice<f32>,
    prepared: PreparedWeight,
    /// The workspace each variant of ours asks for (`workspace_len`), allocated once.
    workspaces: [Option<CudaSlice<f32>>; 3],
    host: (Vec<f32>, Vec<f32>, Vec<f32>),
    host_c: Option<Vec<f32>>,
    form: Form,
    pub seed: u64,
}

impl<'g> Case<'g> {
    pub fn new(
        gemm: &'g FusedGemm,
        blas: &'g CublasBaseline,
        lt: &'g CublasLtLinear,
        stream: &Arc<CudaStream>,
        p: points::Point,
        form: Form,
    ) -> testbed::Result<Self> {
        let (m, n, k) = (p.m, p.n, p.k);
        let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let seed = t ^ ((m as u64) << 42) ^ ((n as u64) << 21) ^ k as u64;
        let a = 1.0 / (k as f32).sqrt();
        let hx = fill(m * k, seed, |r| r.unit());
        let hw = fill(n * k, seed ^ 0x9e37_79b9_7f4a_7c15, |r| r.sym(a));
        let hb = fill(n, seed ^ 0xbf58_476d_1ce4_e5b9, |r| r.sym(a));
        // The residual: fresh data of v's order of magnitude.
        let hc = form.residual.then(|| fill(m * n, seed ^ 0x94d0_49bb_1331_11eb, |r| r.sym(1.0)));
        let x = stream.clone_htod(&hx)?;
        let w = stream.clone_htod(&hw)?;
        let b = stream.clone_htod(&hb)?;
        let c = hc.as_ref().map(|hc| stream.clone_htod(hc)).transpose()?;
        let mut out = stream.alloc_zeros::<f32>(m * n)?;
        let cr = c.as_ref().map(|c| MatrixRef::from_slice(c, m, n));
        let lt_plan = match lt.prepare_epilogue(
            &MatrixRef::from_slice(&x, m, k),
            &MatrixRef::from_slice(&w, n, k),
            Some(&b.as_view()),
            form.epilogue(cr.as_ref()),
            &MatrixMut::from_slice(&mut out, m, n),
        ) {
            Ok(plan) => Some(plan),
            // The form has no cuBLASLt epilogue: the report says so once.
            Err(testbed::Error::Unsupported { .. }) => None,
            Err(e) => {
                println!("[{}] cuBLASLt: no plan ({e}); its column stays empty", p.id());
                None
            }
        };
        let prepared = gemm.prepare_weight(stream, &MatrixRef::from_slice(&w, n, k))?;
        let truncated = gemm.with_precision(gemm_epilogue::Precision::Tf32Truncated);
        let (xr, wr) = (MatrixRef::from_slice(&x, m, k), MatrixRef::from_slice(&w, n, k));
        let lens = [
            gemm.workspace_len(stream, &xr, &wr)?,
            gemm.workspace_len(stream, &xr, &prepared)?,
            truncated.workspace_len(stream, &xr, &wr)?,
        ];
        let mut workspaces = [None, None, None];
        for (slot, len) in workspaces.iter_mut().zip(lens) {
            if len > 0 {
                *slot = Some(stream.alloc_zeros::<f32>(len)?);
            }
        }
        let ctx = gemm.context().clone();
        Ok(Self {
            p,
            ctx,
            stream: stream.clone(),
            gemm,
            truncated,
            blas,
            lt,
            lt_plan,
            x,
            w,
            b,
            c,
            out,
            prepared,
            workspaces,
            host: (hx, hw, hb),
            host_c: hc,
            form,
            seed,
        })
    }

    /// Enqueues one call of `v`; for ours, returns its plan.
    pub fn launch(&mut self, v: Variant) -> testbed::Result<Option<Plan>> {
        let (m, n, k) = (self.p.m, self.p.n, self.p.k);
        let x = MatrixRef::from_slice(&self.x, m, k);
        let w = MatrixRef::from_slice(&self.w, n, k);
        let b = self.b.as_view();
        let c = self.c.as_ref().map(|c| MatrixRef::from_slice(c, m, n));
        let epilogue = self.form.epilogue(c.as_ref());
        let mut out = MatrixMut::from_slice(&mut self.out, m, n);
        let s = &self.stream;
        let (gemm, slot) = match v {
            Variant::CublasAlone => return self.blas.gemm(&x, &w, &mut out).map(|_| None),
            Variant::CublasElementwise => {
                return self.blas.linear_epilogue(&x, &w, Some(&b), epilogue, &mut out).map(|_| None)
            }
            Variant::CublasLt => {
                return self
                    .lt_plan
                    .as_ref()
                    .map_or(Ok(()), |plan| self.lt.run_with(plan, &x, &w, c.as_ref(), &mut out))
                    .map(|_| None)
            }
            Variant::Tf32Raw => (self.gemm, 0),
            Variant::Tf32Prepared => (self.gemm, 1),
            Variant::Truncated => (&self.truncated, 2),
        };
        // Ours: the handle, W as given or prepared, and the workspace it asked for.
        let mut ws = self.workspaces[slot].as_mut().map(|ws| ws.as_view_mut());
        let (bias, out, workspace) = (Some(&b), &mut out, ws.as_mut());
        let plan = match v {
            Variant::Tf32Prepared => {
                gemm.run_gemm(s, Gemm { x: &x, w: &self.prepared, bias, epilogue, out, workspace })
            }
            _ => gemm.run_gemm(s, Gemm { x: &x, w: &w, bias, epilogue, out, workspace }),
        };
        Ok(plan?)
    }

    /// One call of each variant of ours and of cuBLASLt (also a warm-up): the plans of ours, and
    /// each one's error on `CHECK_ROWS` × `CHECK_COLS` sampled elements against the form's f64
    /// reference (cuBLASLt's last; `None` without a plan).
    pub fn check(&mut self) -> testbed::Result<Checked> {
        let (m, n, k) = (self.p.m, self.p.n, self.p.k);
        let mut plans = [None, None, None];
        let mut errors = [0.0; 4];
        let mut rng = Rng::new(self.seed ^ 0x5eed);
        let rows: Vec<usize> = (0..CHECK_ROWS.min(m)).map(|_| rng.below(m)).collect();
        let cols: Vec<usize> = (0..CHECK_COLS.min(n)).map(|_| rng.below(n)).collect();
        // The form's f64 reference: Epilogue::reference(v, C) of the f64 v (for the seed form,
        // reference::element's v·s + v).
        let reference = self.form.epilogue(Some(()));
        // NaN first, so that an element a variant did not write cannot pass for one it did.
        let poison = vec![f32::NAN; m * n];
        let checked = Variant::OURS.into_iter().chain(self.lt_plan.is_some().then_some(Variant::CublasLt));
        for (i, v) in checked.enumerate() {
            self.stream.memcpy_htod(&poison, &mut self.out)?;
            let plan = self.launch(v)?;
            if let Some(slot) = plans.get_mut(i) {
                *slot = plan;
            }
            let (hx, hw, hb) = &self.host;
            let hc = self.host_c.as_deref();
            let (xm, wm) = (HostMatrix::new(hx, m, k), HostMatrix::new(hw, n, k));
            let got: Vec<Vec<f32>> = rows
                .iter()
                .map(|&r| self.stream.clone_dtoh(&self.out.slice(r * n..(r + 1) * n)))
                .collect::<Result<_, _>>()?;
            self.stream.synchronize()?;
            let reference = &reference;
            let pairs = rows.iter().zip(&got).flat_map(|(&r, got)| {
                cols.iter().map(move |&c| {
                    let c_value = hc.map_or(0.0, |hc| hc[r * n + c] as f64);
                    (got[c], reference::epilogue_element(xm, wm, Some(hb), reference, c_value, r, c).value)
                })
            });
            errors[i] = reference::relative_error(pairs);
        }
        let lt_error = self.lt_plan.is_some().then_some(errors[3]);
        Ok(Checked { plans, errors: [errors[0], errors[1], errors[2]], lt_error })
    }

    /// Every variant `secs` seconds in turn: brings a cold card to its power cap first.
    pub fn soak(&mut self, secs: f64) -> testbed::Result<u64> {
        let start = std::time::Instant::now();
        let mut calls = 0;
        while start.elapsed().as_secs_f64() < secs {
            for v in Variant::ALL {
                self.launch(v)?;
                calls += 1;
            }
            self.stream.synchronize()?;
        }
        Ok(calls)
    }

    /// The interleaved medians (`testbed::timing`: `WARM_UP_MS` of warm-up, then `rounds`
    /// rounds of one ≥ 0.5 ms sample per variant, in balanced orders).
    pub fn measure(&mut self, rounds: usize) -> testbed::Result<Measured> {
        let Checked { plans, errors, lt_error } = self.check()?;
        let (ctx, stream) = (self.ctx.clone(), self.stream.clone());
        let no_lt = self.lt_plan.is_none();
        let skip = |i: usize| no_lt && Variant::ALL[i] == Variant::CublasLt;
        let t = timing::interleaved(&ctx, &stream, Variant::ALL.len(), skip, rounds, WARM_UP_MS, |i| {
            self.launch(Variant::ALL[i]).map(|_| ())
        })?;
        let mut median_ms = [f64::NAN; 6];
        for (slot, ms) in median_ms.iter_mut().zip(&t.median_ms) {
            *slot = ms.unwrap_or(f64::NAN);
        }
        Ok(Measured { point: self.p, median_ms, plans, errors, lt_error, batch: t.batch })
    }
}

/// `len` values of `f` from a generator per chunk, on every core: the large points need up to
/// 235 M random floats, ~1 s on one core.
fn fill(len: usize, seed: u64, f: impl Fn(&mut Rng) -> f32 + Copy + Send) -> Vec<f32> {
    let mut v = vec![0.0f32; len];
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = len.div_ceil(threads).max(1 << 16);
    std::thread::scope(|s| {
        for (i, c) in v.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                let mut rng = Rng::new(seed ^ (i as u64).wrapping_mul(0x94d0_49bb_1331_11eb));
                c.iter_mut().for_each(|x| *x = f(&mut rng));
            });
        }
    });
    v
}
