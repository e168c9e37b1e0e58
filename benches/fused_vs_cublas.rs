//! The fused kernel against cuBLAS, per shape, on one stream timed with CUDA events.
//!
//! Four variants, each computing (or, for the last, bounding) `out = (v·s) + v`, `v = x·wᵀ + b`:
//! - `fused`: our one kernel, `Dispatch::Auto` (the kernel it picked is printed once per shape);
//! - `cublas_plus_elementwise`: cuBLAS TF32 GEMM (`cublasGemmEx`) + our vectorised elementwise
//!   pass: what you get without this crate (same math and roundings, one extra pass over `out`);
//! - `cublaslt_bias_alpha`: one `cublasLtMatmul` with the bias epilogue, `alpha = 1+s` and a
//!   bias pre-scaled by `1+s` (the best single library call; rounds differently);
//! - `cublas_gemm_alone`: cuBLAS TF32 GEMM, no bias, no epilogue: the ceiling to beat.
//!
//! On the reference shape, 4096³, 8192³ and the M ≤ 256 shapes one more row times the sm_90
//! 128×128 ping-pong kernel forced (`sm90_pingpong`, [`Kernel::Sm90Pingpong128x128SmemA`]): on the
//! H200 `Dispatch::Auto` picks the cooperative cluster kernel for the large shapes, a 64-row
//! ping-pong ([`Kernel::Sm90Pingpong64x128SmemA`], [`Kernel::Sm90Pingpong64x64SmemA`]) when its tiles fit
//! in one wave, and the 128×128 ping-pong in between. On the reference shape two more rows time
//! the mma.sync path forced (it is the fallback on sm_90 and the default before it):
//! `mma_sync_128x256_trunc` ([`Kernel::Sm80Mma128x256Vec4Trunc`], operands truncated to TF32 by
//! the tensor cores) and `mma_sync_128x256_round` ([`Kernel::Sm80Mma128x256Vec4`], rounded to
//! nearest in registers).
//!
//! Throughput is `Throughput::Elements(2·M·N·K)`: criterion's "elements" are FLOP here, so its
//! `elem/s` column reads as FLOP/s.
//!
//! Criterion runs the four functions one after the other; clocks drift with power (700 W cap), so
//! for ratios each shape ALSO gets an interleaved measurement outside criterion: after warm-up,
//! `ROUNDS` rounds, each timing every variant once, in orders where each variant follows every
//! other equally often (`testbed::timing::round_order`), each sample being a batch of calls sized to ≥ ~0.5 ms. The medians, TFLOP/s and ratios are printed
//! and appended as markdown to `target/interleaved.md` (path relative to where it runs: the
//! repository root under `cargo bench`).
//!
//! Run: `cargo bench --bench fused_vs_cublas` (all shapes, ~3–4 min on an H200), or with a filter:
//! `cargo bench --bench fused_vs_cublas -- reference` (a shape is run, criterion and interleaved
//! parts, when the filter is a substring of one of its benchmark ids `group/function`; a filter
//! matching none, such as `sweep`, runs nothing).
//! `GEMM_EPILOGUE_ROUNDS=n` changes the interleaved rounds (default 30).
//!
//! Shapes of at least 0.3 ms per call get a second interleaved measurement with **sustained**
//! samples: each at least 200 ms of back-to-back calls of one variant,
//! `GEMM_EPILOGUE_SUSTAINED_ROUNDS` rounds (default 10; 0 skips it). On a power-capped card a
//! one-call sample starts at the clock its predecessor left, so a kernel drawing more power than
//! its neighbours borrows their headroom; a sustained sample runs each variant in its own steady
//! state, as a program calling only it would (docs/BENCHMARKS.md has both).
//!
//! Before the first shape it runs all of the shape's variants for `GEMM_EPILOGUE_SOAK_S`
//! seconds (default 15): a cold H200 first runs at its top clock and only settles at its power
//! cap after seconds of GEMM load, and cuBLAS gains more from the cold clock than our kernel
//! does (docs/BENCHMARKS.md), so unsoaked first shapes measure a state no sustained workload
//! sees. `GEMM_EPILOGUE_SOAK_S=0` measures the card as it comes.
//!
//! Without a GPU it prints `skipped: <reason>` and exits 0, unless `GEMM_EPILOGUE_REQUIRE_GPU=1`,
//! then it exits 1.

mod common;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use criterion::{Criterion, Throughput};
use gemm_epilogue::cudarc::driver::sys::CUevent_flags;
use gemm_epilogue::cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream};
use gemm_epilogue::testbed::reference::SplitMix64 as Rng;
use gemm_epilogue::testbed::reference::{self, HostMatrix};
use gemm_epilogue::testbed::{self, timing, CublasBaseline, CublasCompute, CublasLtLinear, CublasLtPlan};
use gemm_epilogue::{Dispatch, Epilogue, FusedGemm, Kernel, MatrixMut, MatrixRef, Plan, Precision, PreparedWeight};

const SCALE: f32 = 0.5;
const REFERENCE: &str = "reference_16384x4096x4096";
/// Minimum length of a sustained sample, ms (the second interleaved measurement).
const SUSTAINED_SAMPLE_MS: f64 = 200.0;
/// Output elements compared with the f64 reference per variant (the accuracy columns).
const SAMPLES: usize = 4096;

/// (criterion group name, M, N, K).
const SHAPES: &[(&str, usize, usize, usize)] = &[
    ("reference_16384x4096x4096", 16384, 4096, 4096),
    ("square_4096", 4096, 4096, 4096),
    ("square_8192", 8192, 8192, 8192),
    ("m1_4096x4096", 1, 4096, 4096),
    ("m16_4096x4096", 16, 4096, 4096),
    ("m128_4096x4096", 128, 4096, 4096),
    ("m256_4096x4096", 256, 4096, 4096),
    ("odd_1000x3000x777", 1000, 3000, 777),
    ("unaligned_16383x4095x4097", 16383, 4095, 4097),
];

// ---------------------------------------------------------------------------------------------
// Data

fn fresh_seed(m: usize, n: usize, k: usize) -> u64 {
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    t ^ ((m as u64) << 42) ^ ((n as u64) << 21) ^ k as u64
}

// ---------------------------------------------------------------------------------------------
// One shape: buffers and the four variants.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// `Dispatch::Auto` with the default rounding (to nearest) on the raw W, with the workspace
    /// it asks for (on sm_90 W is rounded into it on every call).
    Fused,
    /// The same with a `PreparedWeight` (W rounded once, outside timing).
    FusedPrepared,
    /// `Dispatch::Auto` with `Precision::Tf32Truncated` (opt-in), raw W, its workspace.
    FusedTruncate,
    CublasElementwise,
    CublasLt,
    CublasGemm,
    /// `Precision::Tf32x3` (3xTF32) with its prepared (split) W and workspace.
    FusedTf32x3,
    /// cuBLAS's GEMM alone in `CUBLAS_COMPUTE_32F` (its accuracy: that GEMM + our elementwise).
    CublasFp32,
    /// The same in `CUBLAS_COMPUTE_32F_EMULATED_16BFX9` (plain FP32 on sm_90: see the label).
    CublasBf16x9,
    /// Our fused call with this kernel forced.
    Forced(Kernel),
}
const VARIANTS: [Variant; 6] = [
    Variant::Fused,
    Variant::CublasElementwise,
    Variant::CublasLt,
    Variant::CublasGemm,
    Variant::FusedPrepared,
    Variant::FusedTruncate,
];
/// The FP32-accurate rows: ours 3xTF32 against cuBLAS's FP32 paths, on the reference, square and
/// odd-K shapes (`ours / this` compares with the Tf32 default; the line below the table, with ours
/// Tf32x3).
const FP32_ACCURATE: [Variant; 3] = [Variant::FusedTf32x3, Variant::CublasFp32, Variant::CublasBf16x9];
const FP32_ACCURATE_SHAPES: [&str; 4] = [REFERENCE, "square_4096", "square_8192", "odd_1000x3000x777"];
/// The mma.sync rows of the reference shape.
const MMA_SYNC: [Variant; 2] =
    [Variant::Forced(Kernel::Sm80Mma128x256Vec4Trunc), Variant::Forced(Kernel::Sm80Mma128x256Vec4)];
/// Shapes that also time the 128×128 ping-pong kernel forced: the large square-ish ones, where
/// `Dispatch::Auto` picks the cooperative cluster kernel on the H200, and the small-M ones, where
/// it picks the 64-row ping-pong (the 128-row one is Auto's pick in between).
const PINGPONG_TOO: [&str; 7] =
    [REFERENCE, "square_4096", "square_8192", "m1_4096x4096", "m16_4096x4096", "m128_4096x4096", "m256_4096x4096"];

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Fused => "ours (fused), Nearest (default), raw W",
            Variant::FusedPrepared => "ours, Nearest, prepared W",
            Variant::FusedTruncate => "ours, Truncate (opt-in), raw W",
            Variant::CublasElementwise => "cuBLAS GEMM + elementwise",
            Variant::CublasLt => "cuBLASLt bias+alpha (1 call)",
            Variant::CublasGemm => "cuBLAS GEMM alone (no bias/epilogue)",
            Variant::FusedTf32x3 => "ours, Tf32x3 (3xTF32), prepared W",
            Variant::CublasFp32 => "cuBLAS FP32 GEMM alone (COMPUTE_32F)",
            Variant::CublasBf16x9 => "cuBLAS COMPUTE_32F_EMULATED_16BFX9 alone (FP32 on sm_90)",
            Variant::Forced(Kernel::Sm80Mma128x256Vec4Trunc) => "ours, mma.sync 128×256, truncated operands",
            Variant::Forced(Kernel::Sm80Mma128x256Vec4) => "ours, mma.sync 128×256, rounded operands",
            Variant::Forced(Kernel::Sm90Pingpong128x128SmemA) => "ours, sm90 ping-pong 128×128 (forced)",
            Variant::Forced(_) => "ours, forced kernel",
        }
    }

    /// criterion's function name.
    fn function(self) -> &'static str {
        match self {
            Variant::Fused => "fused",
            Variant::FusedPrepared => "fused_prepared_w",
            Variant::FusedTruncate => "fused_truncate",
            Variant::CublasElementwise => "cublas_plus_elementwise",
            Variant::CublasLt => "cublaslt_bias_alpha",
            Variant::CublasGemm => "cublas_gemm_alone",
            Variant::FusedTf32x3 => "fused_tf32x3",
            Variant::CublasFp32 => "cublas_fp32_alone",
            Variant::CublasBf16x9 => "cublas_bf16x9_alone",
            Variant::Forced(Kernel::Sm80Mma128x256Vec4Trunc) => "mma_sync_128x256_trunc",
            Variant::Forced(Kernel::Sm80Mma128x256Vec4) => "mma_sync_128x256_round",
            Variant::Forced(Kernel::Sm90Pingpong128x128SmemA) => "sm90_pingpong",
            Variant::Forced(_) => "forced",
        }
    }
}

/// The variants timed on a shape.
fn variants(group: &str) -> Vec<Variant> {
    let mut v = VARIANTS.to_vec();
    if PINGPONG_TOO.contains(&group) {
        v.push(Variant::Forced(Kernel::Sm90Pingpong128x128SmemA));
    }
    if group == REFERENCE {
        v.extend(MMA_SYNC);
    }
    if FP32_ACCURATE_SHAPES.contains(&group) {
        v.extend(FP32_ACCURATE);
    }
    v
}

struct Case<'g> {
    m: usize,
    n: usize,
    k: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    gemm: &'g FusedGemm,
    blas: &'g CublasBaseline,
    lt: &'g CublasLtLinear,
    lt_plan: Option<CublasLtPlan>,
    x: CudaSlice<f32>,
    w: CudaSlice<f32>,
    b: CudaSlice<f32>,
    out: CudaSlice<f32>,
    /// Host copies of the inputs, for the accuracy columns.
    host: (Vec<f32>, Vec<f32>, Vec<f32>),
    /// W prepared by the default (precision) handle.
    prepared: PreparedWeight,
    /// The truncating handle.
    truncate: FusedGemm,
    /// The Tf32x3 handle and W prepared (split) by it.
    x3: FusedGemm,
    prepared_x3: PreparedWeight,
    /// The workspace `workspace_len` asks for (repacking operands whose rows are not 16-byte
    /// aligned, stream-K partial tiles): what a user who cares about speed passes to
    /// `run_with_workspace`. Allocated once, outside timing.
    workspace: Option<CudaSlice<f32>>,
    /// The same for each other variant of ours (index: position in `variants`).
    forced_workspace: Vec<Option<CudaSlice<f32>>>,
    /// What the fused call runs (from a first, untimed call).
    plan: Option<Plan>,
    /// What this shape times, in table order.
    variants: Vec<Variant>,
    /// Forced kernels that cannot run this shape on this device.
    refused: Vec<Variant>,
}

impl<'g> Case<'g> {
    #[allow(clippy::too_many_arguments)]
    fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        gemm: &'g FusedGemm,
        blas: &'g CublasBaseline,
        lt: &'g CublasLtLinear,
        (m, n, k): (usize, usize, usize),
        variants: Vec<Variant>,
    ) -> testbed::Result<Self> {
        let seed = fresh_seed(m, n, k);
        let mut rng = Rng::new(seed);
        let a = 1.0 / (k as f32).sqrt();
        let hx: Vec<f32> = (0..m * k).map(|_| rng.unit()).collect();
        let hw: Vec<f32> = (0..n * k).map(|_| rng.sym(a)).collect();
        let hb: Vec<f32> = (0..n).map(|_| rng.sym(a)).collect();
        let x = stream.clone_htod(&hx)?;
        let w = stream.clone_htod(&hw)?;
        let b = stream.clone_htod(&hb)?;
        let mut out = stream.alloc_zeros::<f32>(m * n)?;
        let prepared = gemm.prepare_weight(stream, &MatrixRef::from_slice(&w, n, k))?;
        let truncate = gemm.with_precision(Precision::Tf32Truncated);
        let x3 = gemm.with_precision(Precision::Tf32x3);
        let prepared_x3 = x3.prepare_weight(stream, &MatrixRef::from_slice(&w, n, k))?;
        let workspace_len =
            gemm.workspace_len(stream, &MatrixRef::from_slice(&x, m, k), &MatrixRef::from_slice(&w, n, k))?;
        let workspace = if workspace_len > 0 { Some(stream.alloc_zeros::<f32>(workspace_len)?) } else { None };
        if workspace_len > 0 {
            println!(
                "[{m}x{n}x{k}] fused: rows not 16-byte aligned; repacks through a {} MiB workspace",
                (workspace_len * 4) >> 20
            );
        }
        let mut workspace = workspace;
        // One real call (also a warm-up) reports what the timed calls run.
        let plan = {
            let (xr, wr) = (MatrixRef::from_slice(&x, m, k), MatrixRef::from_slice(&w, n, k));
            let mut o = MatrixMut::from_slice(&mut out, m, n);
            match workspace.as_mut() {
                Some(ws) => {
                    gemm.run_with_workspace(stream, &xr, &wr, Some(&b.as_view()), SCALE, &mut o, &mut ws.as_view_mut())?
                }
                None => gemm.run(stream, &xr, &wr, Some(&b.as_view()), SCALE, &mut o)?,
            }
        };
        match plan {
            Some(p) => println!(
                "[{m}x{n}x{k}] seed {seed:#x}; fused (Auto) runs {} (grid {}, block {}, smem {} B, repack x {} w {}, stream-K tiles {}, TMA store {})",
                p.kernel, p.grid, p.block, p.smem_bytes, p.repack_x, p.repack_w, p.stream_k_tiles, p.tma_store
            ),
            None => println!("[{m}x{n}x{k}] seed {seed:#x}; fused: nothing to do"),
        }
        let lt_plan = match lt.prepare(
            &MatrixRef::from_slice(&x, m, k),
            &MatrixRef::from_slice(&w, n, k),
            Some(&b.as_view()),
            SCALE,
            &MatrixMut::from_slice(&mut out, m, n),
        ) {
            Ok(p) => {
                println!("[{m}x{n}x{k}] cuBLASLt: algorithm chosen once, workspace {} B", p.workspace_bytes());
                Some(p)
            }
            Err(e) => {
                println!("[{m}x{n}x{k}] cuBLASLt variant unavailable: {e}");
                None
            }
        };
        let mut refused = Vec::new();
        let mut forced_workspace = Vec::new();
        for &v in &variants {
            let mut ws = None;
            let handle = match v {
                Variant::Forced(kernel) => Some(gemm.with_dispatch(Dispatch::Force(kernel))),
                Variant::FusedPrepared => Some(gemm.clone()),
                Variant::FusedTruncate => Some(truncate.clone()),
                Variant::FusedTf32x3 => Some(x3.clone()),
                _ => None,
            };
            if let Some(h) = handle {
                let xr = MatrixRef::from_slice(&x, m, k);
                let wr = MatrixRef::from_slice(&w, n, k);
                let len = match v {
                    Variant::FusedPrepared => h.workspace_len(stream, &xr, &prepared),
                    Variant::FusedTf32x3 => h.workspace_len(stream, &xr, &prepared_x3),
                    _ => h.workspace_len(stream, &xr, &wr),
                };
                match len {
                    Ok(0) => {}
                    Ok(len) => ws = Some(stream.alloc_zeros::<f32>(len)?),
                    Err(e) => {
                        println!("[{m}x{n}x{k}] {} unavailable: {e}", v.label());
                        refused.push(v);
                    }
                }
                let mut o = MatrixMut::from_slice(&mut out, m, n);
                let bias = b.as_view();
                let plan = match (v, ws.as_mut()) {
                    (Variant::FusedPrepared, Some(ws)) => {
                        h.run_with_workspace(stream, &xr, &prepared, Some(&bias), SCALE, &mut o, &mut ws.as_view_mut())
                    }
                    (Variant::FusedPrepared, None) => h.run(stream, &xr, &prepared, Some(&bias), SCALE, &mut o),
                    (Variant::FusedTf32x3, Some(ws)) => h.run_with_workspace(
                        stream,
                        &xr,
                        &prepared_x3,
                        Some(&bias),
                        SCALE,
                        &mut o,
                        &mut ws.as_view_mut(),
                    ),
                    (Variant::FusedTf32x3, None) => h.run(stream, &xr, &prepared_x3, Some(&bias), SCALE, &mut o),
                    (_, Some(ws)) => {
                        h.run_with_workspace(stream, &xr, &wr, Some(&bias), SCALE, &mut o, &mut ws.as_view_mut())
                    }
                    (_, None) => h.run(stream, &xr, &wr, Some(&bias), SCALE, &mut o),
                };
                if let Ok(Some(p)) = plan {
                    println!(
                        "[{m}x{n}x{k}] {} runs {} (grid {}, repack x {} w {}, stream-K tiles {} over {} CTAs, rounding {:?})",
                        v.label(), p.kernel, p.grid, p.repack_x, p.repack_w, p.stream_k_tiles, p.stream_k_ctas, p.precision
                    );
                }
            }
            forced_workspace.push(ws);
        }
        Ok(Self {
            m,
            n,
            k,
            ctx: ctx.clone(),
            stream: stream.clone(),
            gemm,
            blas,
            lt,
            lt_plan,
            x,
            w,
            b,
            out,
            host: (hx, hw, hb),
            prepared,
            truncate,
            x3,
            prepared_x3,
            workspace,
            forced_workspace,
            plan,
            variants,
            refused,
        })
    }

    fn flop(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    fn available(&self, v: Variant) -> bool {
        match v {
            Variant::CublasLt => self.lt_plan.is_some(),
            _ => !self.refused.contains(&v),
        }
    }

    /// Enqueues one call of `v` on the stream.
    fn launch(&mut self, v: Variant) -> testbed::Result<()> {
        let (m, n, k) = (self.m, self.n, self.k);
        let x = MatrixRef::from_slice(&self.x, m, k);
        let w = MatrixRef::from_slice(&self.w, n, k);
        let b = self.b.as_view();
        let mut out = MatrixMut::from_slice(&mut self.out, m, n);
        match v {
            Variant::Fused => match &mut self.workspace {
                Some(ws) => {
                    self.gemm.run_with_workspace(&self.stream, &x, &w, Some(&b), SCALE, &mut out, &mut ws.as_view_mut())
                }
                None => self.gemm.run(&self.stream, &x, &w, Some(&b), SCALE, &mut out),
            }
            .map(|_| ())
            .map_err(Into::into),
            Variant::FusedPrepared | Variant::FusedTruncate | Variant::FusedTf32x3 => {
                let slot = self.variants.iter().position(|u| *u == v).and_then(|i| self.forced_workspace[i].as_mut());
                let h = match v {
                    Variant::FusedTruncate => &self.truncate,
                    Variant::FusedTf32x3 => &self.x3,
                    _ => self.gemm,
                };
                let r = match (v, slot) {
                    (Variant::FusedPrepared, Some(ws)) => h.run_with_workspace(
                        &self.stream,
                        &x,
                        &self.prepared,
                        Some(&b),
                        SCALE,
                        &mut out,
                        &mut ws.as_view_mut(),
                    ),
                    (Variant::FusedPrepared, None) => {
                        h.run(&self.stream, &x, &self.prepared, Some(&b), SCALE, &mut out)
                    }
                    (Variant::FusedTf32x3, Some(ws)) => h.run_with_workspace(
                        &self.stream,
                        &x,
                        &self.prepared_x3,
                        Some(&b),
                        SCALE,
                        &mut out,
                        &mut ws.as_view_mut(),
                    ),
                    (Variant::FusedTf32x3, None) => {
                        h.run(&self.stream, &x, &self.prepared_x3, Some(&b), SCALE, &mut out)
                    }
                    (_, Some(ws)) => {
                        h.run_with_workspace(&self.stream, &x, &w, Some(&b), SCALE, &mut out, &mut ws.as_view_mut())
                    }
                    (_, None) => h.run(&self.stream, &x, &w, Some(&b), SCALE, &mut out),
                };
                r.map(|_| ()).map_err(Into::into)
            }
            Variant::CublasElementwise => self.blas.linear_scale_residual(&x, &w, Some(&b), SCALE, &mut out),
            Variant::CublasLt => match &self.lt_plan {
                Some(plan) => self.lt.run(plan, &x, &w, &mut out),
                None => Ok(()),
            },
            Variant::CublasGemm => self.blas.gemm(&x, &w, &mut out),
            Variant::CublasFp32 => self.blas.gemm_as(CublasCompute::Fp32, &x, &w, &mut out),
            Variant::CublasBf16x9 => self.blas.gemm_as(CublasCompute::Bf16x9, &x, &w, &mut out),
            Variant::Forced(kernel) => {
                let forced = self.gemm.with_dispatch(Dispatch::Force(kernel));
                let slot = self.variants.iter().position(|u| *u == v).and_then(|i| self.forced_workspace[i].as_mut());
                match slot {
                    Some(ws) => forced.run_with_workspace(
                        &self.stream,
                        &x,
                        &w,
                        Some(&b),
                        SCALE,
                        &mut out,
                        &mut ws.as_view_mut(),
                    ),
                    None => forced.run(&self.stream, &x, &w, Some(&b), SCALE, &mut out),
                }
                .map(|_| ())
                .map_err(Into::into)
            }
        }
    }

    /// Error of one call of `v` against the f64 reference on `SAMPLES` elements drawn from the
    /// whole output (fixed by the shape's seed): ‖e‖₂/‖ref‖₂ and the mean signed error over the
    /// mean |ref| (the bias truncation shows). `None` for the GEMM alone (no bias, no epilogue).
    fn accuracy(&mut self, v: Variant) -> Option<(f64, f64, f64)> {
        if v == Variant::CublasGemm || !self.available(v) {
            return None;
        }
        self.launch(v).unwrap_or_else(|e| panic!("{}: {e}", v.label()));
        if matches!(v, Variant::CublasFp32 | Variant::CublasBf16x9) {
            // The GEMM alone is timed; its accuracy is that of the whole layer: + our elementwise pass.
            let b = self.b.as_view();
            let mut out = MatrixMut::from_slice(&mut self.out, self.m, self.n);
            self.blas
                .elementwise(Some(&b), Epilogue::scale_add(SCALE), &mut out)
                .unwrap_or_else(|e| panic!("{}: {e}", v.label()));
        }
        let out = self.stream.clone_dtoh(&self.out).expect("copy out");
        let (m, n, k) = (self.m, self.n, self.k);
        let (hx, hw, hb) = &self.host;
        let (xm, wm) = (HostMatrix::new(hx, m, k), HostMatrix::new(hw, n, k));
        let mut rng = Rng::new(0x5eed ^ (m * n * k) as u64);
        let (mut e2, mut r2, mut esum, mut rsum, mut emax) = (0.0f64, 0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for _ in 0..SAMPLES.min(m * n) {
            let (r, c) = (rng.below(m), rng.below(n));
            let want = reference::element(xm, wm, Some(hb), SCALE, r, c).value;
            let e = out[r * n + c] as f64 - want;
            (e2, r2, esum, rsum, emax) = (e2 + e * e, r2 + want * want, esum + e, rsum + want.abs(), emax.max(e.abs()));
        }
        Some(((e2 / r2).sqrt(), esum / rsum, emax))
    }

    fn event(&self) -> CudaEvent {
        self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).expect("cuEventCreate")
    }

    /// `iters` back-to-back calls of `v` between two events: criterion's `iter_custom` body.
    fn time(&mut self, v: Variant, iters: u64) -> Duration {
        let (start, end) = (self.event(), self.event());
        start.record(&self.stream).expect("event record");
        for _ in 0..iters {
            self.launch(v).unwrap_or_else(|e| panic!("{}: {e}", v.label()));
        }
        end.record(&self.stream).expect("event record");
        let ms = start.elapsed_ms(&end).expect("event elapsed");
        Duration::from_secs_f64(ms as f64 * 1e-3)
    }

    /// Runs every available variant in turn for `secs` seconds (see the module docs).
    fn soak(&mut self, secs: f64) {
        let start = std::time::Instant::now();
        let mut calls = 0u64;
        while start.elapsed().as_secs_f64() < secs {
            for v in self.variants.clone() {
                if self.available(v) {
                    self.launch(v).unwrap_or_else(|e| panic!("{}: {e}", v.label()));
                    calls += 1;
                }
            }
            self.stream.synchronize().expect("synchronize");
        }
        println!("[{}x{}x{}] soaked {calls} calls in {:.1} s", self.m, self.n, self.k, start.elapsed().as_secs_f64());
    }

    fn warm_up(&mut self) {
        for v in self.variants.clone() {
            if self.available(v) {
                self.time(v, 3);
            }
        }
        self.stream.synchronize().expect("synchronize");
    }
}

// ---------------------------------------------------------------------------------------------
// Interleaved measurement

/// Median ms per call of each of `case.variants` (None: unavailable), timed interleaved
/// (`testbed::timing`) with samples of at least `sample_ms`.
fn interleaved(case: &mut Case<'_>, rounds: usize, sample_ms: f64) -> (Vec<Option<f64>>, u64) {
    let (ctx, stream, variants) = (case.ctx.clone(), case.stream.clone(), case.variants.clone());
    let unavailable: Vec<bool> = variants.iter().map(|&v| !case.available(v)).collect();
    let t = timing::interleaved_samples(
        &ctx,
        &stream,
        variants.len(),
        |i| unavailable[i],
        rounds,
        0.0,
        sample_ms,
        |i| case.launch(variants[i]),
    )
    .unwrap_or_else(|e| panic!("interleaved timing: {e}"));
    println!("[{}x{}x{}] interleaved: {rounds} rounds × {} calls per sample", case.m, case.n, case.k, t.batch);
    (t.median_ms, t.batch)
}

fn table(
    case: &Case<'_>,
    medians: &[Option<f64>],
    errors: &[Option<(f64, f64, f64)>],
    kernel: &str,
    rounds: usize,
    sustained: Option<u64>,
) -> String {
    let flop = case.flop();
    let ours = medians[0];
    let mut s = String::new();
    let how = match sustained {
        Some(batch) => format!("{rounds} interleaved rounds of sustained samples ({batch} back-to-back calls each)"),
        None => format!("{rounds} interleaved rounds"),
    };
    let _ = writeln!(s, "\n### {}×{}×{} (M×N×K), s = {SCALE}; fused runs `{kernel}`; {how}\n", case.m, case.n, case.k);
    let _ =
        writeln!(s, "| variant | median ms | TFLOP/s | ours / this (time) | ‖e‖/‖ref‖ vs f64 | mean e / mean |ref| |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|");
    for (i, v) in case.variants.iter().enumerate() {
        let err = errors[i].map_or("–".to_string(), |(rel, bias, _)| format!("{rel:.2e} | {bias:+.1e}"));
        let err = if errors[i].is_some() { err } else { "– | –".into() };
        match medians[i] {
            Some(ms) => {
                let ratio = ours.map_or("n/a".to_string(), |o| format!("{:.3}", o / ms));
                let _ =
                    writeln!(s, "| {} | {:.4} | {:.1} | {} | {err} |", v.label(), ms, flop / (ms * 1e-3) / 1e12, ratio);
            }
            None => {
                let _ = writeln!(s, "| {} | n/a | n/a | n/a | {err} |", v.label());
            }
        }
    }
    let r = |i: usize| match (ours, medians[i]) {
        (Some(o), Some(t)) => format!("{:.3}", o / t),
        _ => "n/a".into(),
    };
    let _ = writeln!(
        s,
        "\nours/cublas+elementwise = {}, ours/cublas-alone = {}, ours/cublasLt = {} (< 1: ours is faster)",
        r(1),
        r(3),
        r(2)
    );
    // The FP32-accurate rows, against each other: times and the largest error on the samples.
    let at = |v: Variant| case.variants.iter().position(|u| *u == v);
    if let (Some(x3), Some(fp32)) = (at(Variant::FusedTf32x3), at(Variant::CublasFp32)) {
        let ratio = |i: usize, j: usize| match (medians[i], medians[j]) {
            (Some(a), Some(b)) => format!("{:.3}", a / b),
            _ => "n/a".into(),
        };
        let emax = |i: usize| errors[i].map_or("n/a".into(), |(_, _, e)| format!("{e:.2e}"));
        let bf = at(Variant::CublasBf16x9).map_or("n/a".into(), |j| ratio(x3, j));
        let _ = writeln!(
            s,
            "tf32x3: ours Tf32x3 / cuBLAS FP32 = {}, / cuBLAS BF16x9 = {bf}, / ours Tf32 (default, raw W) = {}; max |e| on the samples: ours Tf32x3 {}, cuBLAS FP32 + elementwise {}, ours Tf32 {}",
            ratio(x3, fp32),
            ratio(x3, 0),
            emax(x3),
            emax(fp32),
            emax(0)
        );
    }
    s
}

fn append_markdown(text: &str) {
    let path = std::path::Path::new("target/interleaved.md");
    let _ = std::fs::create_dir_all("target");
    match std::fs::OpenOptions::new().create(true).append(true).open(path) {
        Ok(mut f) => {
            let _ = f.write_all(text.as_bytes());
        }
        Err(e) => eprintln!("could not append to {}: {e}", path.display()),
    }
}

// ---------------------------------------------------------------------------------------------
// Command line: criterion parses its own flags; we only need the filter and the mode.

fn selected(args: &common::args::Args, group: &str) -> bool {
    variants(group).iter().any(|v| args.selects(&format!("{group}/{}", v.function())))
}

// ---------------------------------------------------------------------------------------------

fn main() {
    let args = common::args::parse();
    if args.list {
        for (group, ..) in SHAPES {
            for v in variants(group) {
                println!("{group}/{}: benchmark", v.function());
            }
        }
        return;
    }
    if !SHAPES.iter().any(|(group, ..)| selected(&args, group)) {
        println!("fused_vs_cublas: no benchmark id matches the filter {:?}", args.filter);
        return;
    }
    let Some((ctx, gemm, device)) = common::open_gpu() else { return };
    let stream = ctx.default_stream();
    let blas = CublasBaseline::new(&gemm, stream.clone()).expect("cuBLAS handle");
    let lt = CublasLtLinear::new(&gemm, stream.clone()).expect("cuBLASLt handle");
    println!("device: {device}");
    let rounds = std::env::var("GEMM_EPILOGUE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(30usize).max(1);
    let sustained_rounds =
        std::env::var("GEMM_EPILOGUE_SUSTAINED_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(10usize);
    let mut soak_s: f64 = std::env::var("GEMM_EPILOGUE_SOAK_S").ok().and_then(|v| v.parse().ok()).unwrap_or(15.0);

    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .without_plots()
        .configure_from_args();

    let mut header_written = false;
    for &(group_name, m, n, k) in SHAPES {
        if !selected(&args, group_name) {
            continue;
        }
        let mut case = Case::new(&ctx, &stream, &gemm, &blas, &lt, (m, n, k), variants(group_name))
            .unwrap_or_else(|e| panic!("{group_name}: setup: {e}"));
        if args.bench_mode && soak_s > 0.0 {
            case.soak(soak_s);
            soak_s = 0.0;
        }
        case.warm_up();

        let mut group = c.benchmark_group(group_name);
        // "Elements" are FLOP: criterion's elem/s is FLOP/s.
        group.throughput(Throughput::Elements((2 * m * n * k) as u64));
        for v in case.variants.clone() {
            if case.available(v) {
                group.bench_function(v.function(), |bch| bch.iter_custom(|iters| case.time(v, iters)));
            }
        }
        group.finish();

        if args.bench_mode {
            let kernel = case.plan.map_or("none".to_string(), |p| {
                let repack = match (p.repack_x, p.repack_w) {
                    (true, true) => " after repacking X and W",
                    (true, false) => " after repacking X",
                    (false, true) => " after repacking (precision) W",
                    (false, false) => "",
                };
                let on_load = if p.round_on_load { ", X and W rounded on load (TF32 tensor maps)" } else { "" };
                format!("{}{repack}{on_load}", p.kernel)
            });
            let errors: Vec<_> = case.variants.clone().into_iter().map(|v| case.accuracy(v)).collect();
            let (medians, _) = interleaved(&mut case, rounds, 0.5);
            let mut text = table(&case, &medians, &errors, &kernel, rounds, None);
            // Sustained: samples of SUSTAINED_SAMPLE_MS, for the shapes that take long enough per
            // call for the power state to matter (see `timing::interleaved_samples`).
            if sustained_rounds > 0 && medians[0].is_some_and(|ms| ms >= 0.3) {
                let (medians, batch) = interleaved(&mut case, sustained_rounds, SUSTAINED_SAMPLE_MS);
                text.push_str(&table(&case, &medians, &errors, &kernel, sustained_rounds, Some(batch)));
            }
            println!("{text}");
            if !header_written {
                append_markdown(&common::run_info::header("fused_vs_cublas interleaved run", &device));
                header_written = true;
            }
            append_markdown(&text);
        }
    }
    c.final_summary();
}
