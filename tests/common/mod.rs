//! Shared harness of the GPU integration tests (CUTLASS-style "testbed").
//!
//! - [`gpu`]: the context, a stream, the loaded kernels and a cuBLAS baseline, or `None` after
//!   printing `skipped: <reason>` when there is no usable GPU. With `GEMM_EPILOGUE_REQUIRE_GPU=1`
//!   a missing GPU is a failure (panic) instead of a skip.
//! - [`rng`]: a seeded SplitMix64. The seed is fresh per process (from the clock), printed by every
//!   test, and can be pinned with `GEMM_EPILOGUE_SEED=<decimal or 0x hex>` to reproduce a failure.
//! - [`Case`] + [`check`]: one generic checker used by every numeric test. It lays the inputs out
//!   in bigger buffers (view offset, leading-dimension padding, tail) whose unused parts are NaN,
//!   poisons the whole output buffer, runs the fused kernel and the cuBLAS + elementwise baseline
//!   on the same inputs, verifies that every in-view output element was written and that every
//!   other element of the output buffer still holds the poison bits, then compares against the
//!   f64 reference (all elements, or sampled rows × columns for large problems) and against cuBLAS
//!   (all elements).
//!
//! # Error bounds
//!
//! Per element, with A = Σ_k |x||w| + |b| and magnitude = (1 + |s|)·A (what
//! `reference::element` returns):
//!
//! 1. Operand rounding to TF32: x̂ = x(1+δ), |δ| ≤ u, where u = 2⁻¹¹ when the kernel rounds to
//!    nearest (`cvt.rna.tf32`, the mma.sync family, like cuBLAS on sm_80) and u = 2⁻¹⁰ when the
//!    tensor core truncates the fp32 bits it is fed (the sm_90 wgmma kernel). The product of two
//!    TF32 values (11 × 11 significant bits) is exact in fp32, so |x̂ŵ − xw| ≤ (2u + u²)|xw|.
//! 2. fp32 accumulation of the K products and the bias: each of the ≤ K+1 additions errs by at most
//!    one unit of its partial sum, whose size is ≤ A. Tensor-core adders are not guaranteed to
//!    round to nearest (they align and truncate, Fasi et al. 2021), so take the truncation unit
//!    2⁻²³ rather than 2⁻²⁴: ≤ (K+1)·2⁻²³·A (first order, γ_n ≈ n·unit).
//! 3. Epilogue t = fl(v̂·s), o = fl(t + v̂): ≤ 2⁻²⁴(|v̂s| + |t+v̂|) ≤ 2⁻²³(1+|s|)A, and the
//!    error of v̂ is amplified by (1+|s|).
//!
//! Hence |out − ref| ≤ (2u + u² + (K+2)·2⁻²³)·magnitude; we use (K+3) for one more unit of
//! slack, plus an absolute slack of 2⁻¹²⁰ for results near the underflow threshold. The
//! same bound holds for cuBLAS + elementwise, so |fused − cublas| ≤ bound(u_fused) + bound(u_cublas);
//! we do not know whether cuBLAS rounds or truncates fp32 inputs on every architecture (CUTLASS 3
//! sm_90 TF32 kernels feed fp32 bits to wgmma), so u_cublas = 2⁻¹⁰. For the cuBLAS comparison,
//! which covers every element and cannot afford Σ|x||w| per element, A is replaced by its
//! Cauchy–Schwarz upper bound ‖x_r‖₂‖w_c‖₂ + |b_c| (≈ 1.33× larger for our data), which keeps the
//! bound rigorous.
//!
//! These worst-case bounds are loose (they allow ~2·u relative error per product), so the real
//! accuracy test is statistical: ‖out − ref‖₂ / ‖ref‖₂ ≤ 1e-3 over the checked elements (at least
//! [`MIN_NORM_COUNT`] of them, so that a single cancelling element cannot dominate ‖ref‖) when
//! the operands were rounded to nearest ([`Plan::rounding`]), 2e-3 when they were truncated (u is
//! twice as large). Simulated on the CPU for this data (x ~ U[0,1) or U(−1,1), w, b ~ U(−1/√K,
//! 1/√K)): ≈ 2.6e-4 with round-to-nearest TF32 operands and ≈ 7e-4 with truncated ones (the
//! truncation bias shrinks every product by ≈ 3.4e-4 per operand on average) for large K; with
//! K ≤ 8 and one column a truncating kernel measured up to 2.2e-3 on the H200, so truncated
//! results are held to ‖out − ref‖₂ / ‖magnitude‖₂ ≤ 2e-3 instead ([`norm_tol`]). Fused vs
//! cuBLAS: ≤ 2e-3.
#![allow(dead_code)]

use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use gemm_epilogue::baseline::CublasBaseline;
use gemm_epilogue::cudarc::driver::{CudaContext, CudaSlice, CudaStream, CudaView};
use gemm_epilogue::reference::{self, HostMatrix, RefElement};
use gemm_epilogue::{cuda_context, Dispatch, Error, Family, FusedGemm, Kernel, MatrixMut, MatrixRef, Plan, Tf32Rounding};

// ---------------------------------------------------------------------------------------------
// GPU or skip
// ---------------------------------------------------------------------------------------------

/// Everything a GPU test needs.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    /// Auto dispatch; use `gemm.with_dispatch(..)` for others.
    pub gemm: FusedGemm,
    pub baseline: CublasBaseline,
}

impl Gpu {
    pub fn is_hopper(&self) -> bool {
        self.gemm.device().is_hopper()
    }
}

/// True when `GEMM_EPILOGUE_REQUIRE_GPU=1`: a missing GPU fails instead of skipping.
pub fn require_gpu() -> bool {
    std::env::var("GEMM_EPILOGUE_REQUIRE_GPU").is_ok_and(|v| v.trim() == "1")
}

/// The GPU, or `None` after printing `skipped: <reason>` (panics instead when
/// `GEMM_EPILOGUE_REQUIRE_GPU=1`). Every GPU test calls this first.
/// [`gpu`], for tests of the sm_90 kernels: on another device it prints
/// `skipped: {what} needs an sm_90 device, …` and returns None (a GPU that is not sm_90 is a
/// reason to skip even with `GEMM_EPILOGUE_REQUIRE_GPU=1`).
#[allow(dead_code)] // not every test binary has sm_90-only tests
pub fn hopper_gpu(what: &str) -> Option<Gpu> {
    let g = gpu()?;
    if !g.is_hopper() {
        println!("skipped: {what} needs an sm_90 device, this is {:?}", g.gemm.device().compute_capability);
        return None;
    }
    Some(g)
}

pub fn gpu() -> Option<Gpu> {
    fn skip(reason: String) -> Option<Gpu> {
        if require_gpu() {
            panic!("GEMM_EPILOGUE_REQUIRE_GPU=1 but no usable GPU: {reason}");
        }
        println!("skipped: {reason}");
        None
    }
    let ctx = match cuda_context(0) {
        Ok(ctx) => ctx,
        Err(e @ (Error::NoDriver | Error::NoDevice { .. })) => return skip(e.to_string()),
        Err(e) => panic!("cuda_context(0) failed unexpectedly: {e}"),
    };
    let gemm = match FusedGemm::new(&ctx) {
        Ok(g) => g,
        Err(e @ Error::UnsupportedDevice { .. }) => return skip(e.to_string()),
        Err(e) => panic!("FusedGemm::new failed: {e}"),
    };
    let stream = ctx.new_stream().expect("new stream");
    let baseline = CublasBaseline::new(&gemm, stream.clone()).expect("cuBLAS handle");
    println!("device: {:?}", gemm.device());
    Some(Gpu { ctx, stream, gemm, baseline })
}

// ---------------------------------------------------------------------------------------------
// Seeded PRNG
// ---------------------------------------------------------------------------------------------

static SEED: OnceLock<u64> = OnceLock::new();

/// The process-wide seed: `GEMM_EPILOGUE_SEED` if set, else from the clock.
pub fn seed() -> u64 {
    *SEED.get_or_init(|| match std::env::var("GEMM_EPILOGUE_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse::<u64>(),
            };
            parsed.unwrap_or_else(|_| panic!("GEMM_EPILOGUE_SEED={s:?} is not a u64 (decimal or 0x hex)"))
        }
        Err(_) => {
            let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            (t.as_nanos() as u64) ^ ((std::process::id() as u64) << 32)
        }
    })
}

/// A generator for one test: the process seed mixed with the test name (so tests do not depend on
/// their order). Prints the seed so a failure can be reproduced.
pub fn rng(test: &str) -> Rng {
    let s = seed();
    println!("seed: GEMM_EPILOGUE_SEED={s:#x} (test {test})");
    // FNV-1a of the name.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in test.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    Rng::new(s ^ h)
}

/// The inputs' random generator (SplitMix64, in the crate so tests, benches and the example share it).
pub use gemm_epilogue::reference::SplitMix64 as Rng;

// ---------------------------------------------------------------------------------------------
// Poison
// ---------------------------------------------------------------------------------------------

/// Written to the whole output buffer before every run: a quiet NaN with a payload no arithmetic
/// produces (GPUs return the canonical NaN 0x7fffffff).
pub const POISON_BITS: u32 = 0x7fc0_dead;
/// Fills the unused parts of input buffers (offset, ld padding, tail): a kernel that reads and
/// uses them produces NaN and fails the check.
pub const INPUT_PAD_BITS: u32 = 0x7fc0_0bad;

pub fn poison() -> f32 {
    f32::from_bits(POISON_BITS)
}
pub fn input_pad() -> f32 {
    f32::from_bits(INPUT_PAD_BITS)
}

/// Elements after the last element of a view, in every buffer.
pub const TAIL: usize = 7;

/// A host buffer of `off + rows·ld + TAIL` poison values: the output buffer of a case.
pub fn poisoned(len: usize) -> Vec<f32> {
    vec![poison(); len.max(1)]
}

/// Asserts every element of `buf` outside the rows × cols view at `off` with stride `ld` still
/// holds the poison bits and every element inside does not. Returns the view, dense.
pub fn take_view_checked(buf: &[f32], off: usize, rows: usize, cols: usize, ld: usize, what: &str) -> Vec<f32> {
    let ld = ld.max(cols);
    let rows_end = (off + rows * ld).min(buf.len());
    assert!(off + extent(rows, cols, ld) <= buf.len(), "{what}: buffer shorter than the view");
    // Outside every row: before the view and after its last row's stride.
    let mut clobbered: Vec<(usize, f32)> = (0..off.min(buf.len()))
        .chain(rows_end..buf.len())
        .filter(|&i| buf[i].to_bits() != POISON_BITS)
        .take(8)
        .map(|i| (i, buf[i]))
        .collect();
    // Row by row, in parallel: [0, cols) written, [cols, ld) untouched.
    let per_chunk = par_map(rows, |range| {
        let (mut dense, mut not_written, mut clob) = (Vec::with_capacity(range.len() * cols), Vec::new(), Vec::new());
        for r in range {
            let start = off + r * ld;
            let row = &buf[start..(start + ld).min(buf.len())];
            for (c, v) in row.iter().enumerate() {
                let poisoned = v.to_bits() == POISON_BITS;
                if c < cols {
                    if poisoned && not_written.len() < 8 {
                        not_written.push((r, c));
                    }
                } else if !poisoned && clob.len() < 8 {
                    clob.push((start + c, *v));
                }
            }
            dense.extend_from_slice(&row[..cols]);
        }
        (dense, not_written, clob)
    });
    let mut dense = Vec::with_capacity(rows * cols);
    let mut not_written = Vec::new();
    for (d, nw, cl) in per_chunk {
        dense.extend_from_slice(&d);
        not_written.extend(nw);
        clobbered.extend(cl);
    }
    not_written.truncate(8);
    clobbered.truncate(8);
    assert!(
        not_written.is_empty(),
        "{what}: in-view output elements were not written (row, col): {not_written:?} (view {rows}x{cols}, ld {ld}, offset {off})"
    );
    assert!(
        clobbered.is_empty(),
        "{what}: elements outside the output view were overwritten (buffer index, value): {clobbered:?} (view {rows}x{cols}, ld {ld}, offset {off}, buffer {})",
        buf.len()
    );
    dense
}

/// Asserts every element of `buf` is still the poison.
pub fn assert_all_poisoned(buf: &[f32], what: &str) {
    let bad: Vec<(usize, f32)> =
        buf.iter().copied().enumerate().filter(|(_, v)| v.to_bits() != POISON_BITS).take(8).collect();
    assert!(bad.is_empty(), "{what}: the output buffer was written (index, value): {bad:?}");
}

// ---------------------------------------------------------------------------------------------
// A case
// ---------------------------------------------------------------------------------------------

/// How X is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XDist {
    /// U(0, 1) (like post-ReLU activations).
    Unit,
    /// U(−1, 1).
    Sym,
}

/// One call: shapes, layout and epilogue parameters. `ld = cols + pad`; `off_*` is where the view
/// starts inside its buffer (in elements; a multiple of 4 keeps 16-byte alignment).
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub pad_x: usize,
    pub pad_w: usize,
    pub pad_o: usize,
    pub off_x: usize,
    pub off_w: usize,
    pub off_o: usize,
    pub off_b: usize,
    pub bias: bool,
    pub scale: f32,
    pub dispatch: Dispatch,
    pub x_dist: XDist,
    /// Run through `run_with_workspace` with the workspace `workspace_len` asks for (poisoned).
    pub workspace: bool,
    /// `FusedGemm::with_rounding`; `None`: the device default.
    pub rounding: Option<Tf32Rounding>,
}

impl Case {
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Self {
            m,
            n,
            k,
            pad_x: 0,
            pad_w: 0,
            pad_o: 0,
            off_x: 0,
            off_w: 0,
            off_o: 0,
            off_b: 0,
            bias: true,
            scale: 0.5,
            dispatch: Dispatch::Auto,
            x_dist: XDist::Unit,
            workspace: false,
            rounding: None,
        }
    }
    pub fn rounding(mut self, r: Tf32Rounding) -> Self {
        self.rounding = Some(r);
        self
    }
    /// The rounding Auto must deliver on this device (`hopper`: sm_90).
    pub fn effective_rounding(&self, hopper: bool) -> Tf32Rounding {
        self.rounding.unwrap_or(if hopper { Tf32Rounding::Truncate } else { Tf32Rounding::Nearest })
    }
    pub fn bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }
    pub fn scale(mut self, scale: f32) -> Self {
        self.scale = scale;
        self
    }
    pub fn dispatch(mut self, d: Dispatch) -> Self {
        self.dispatch = d;
        self
    }
    pub fn force(self, k: Kernel) -> Self {
        self.dispatch(Dispatch::Force(k))
    }
    pub fn pad(mut self, x: usize, w: usize, o: usize) -> Self {
        (self.pad_x, self.pad_w, self.pad_o) = (x, w, o);
        self
    }
    pub fn offset(mut self, x: usize, w: usize, o: usize, b: usize) -> Self {
        (self.off_x, self.off_w, self.off_o, self.off_b) = (x, w, o, b);
        self
    }
    pub fn workspace(mut self, on: bool) -> Self {
        self.workspace = on;
        self
    }
    pub fn x_dist(mut self, d: XDist) -> Self {
        self.x_dist = d;
        self
    }
    pub fn ldx(&self) -> usize {
        self.k + self.pad_x
    }
    pub fn ldw(&self) -> usize {
        self.k + self.pad_w
    }
    pub fn ldo(&self) -> usize {
        self.n + self.pad_o
    }
    /// The 16-byte-load condition of the vec4 kernels (views start 16-byte aligned in their
    /// buffers iff the offset is a multiple of 4; cudarc allocations are 256-byte aligned).
    pub fn vec4_ok(&self) -> bool {
        self.k % 4 == 0 && self.off_x % 4 == 0 && self.off_w % 4 == 0 && self.ldx() % 4 == 0 && self.ldw() % 4 == 0
    }
    /// The TMA condition of the sm_90 kernel.
    pub fn tma_ok(&self) -> bool {
        self.vec4_ok() && self.k > 0
    }
    /// Whether `kernel` accepts this case on a device (`hopper`: sm_90). Decided from the
    /// kernel's family and name (`*_vec4` kernels need 16-byte loads), so kernels added later are
    /// classified too.
    pub fn accepts(&self, kernel: Kernel, hopper: bool) -> bool {
        match kernel.family() {
            Family::TmaWgmma => hopper && self.tma_ok(),
            Family::MmaSync => !needs_vec4(kernel) || self.vec4_ok(),
        }
    }
    /// Whether Auto may pick `kernel` for this case: a TMA kernel whenever one can run (sm_90,
    /// TMA-compatible operands): the ping-pong, or on large problems the cooperative cluster
    /// kernel (the other two only `Force` selects); else a 16-byte-load mma.sync kernel when the
    /// operands allow, else a scalar one.
    pub fn auto_may_pick(&self, kernel: Kernel, hopper: bool) -> bool {
        let truncate_ok = self.effective_rounding(hopper) == Tf32Rounding::Truncate;
        if hopper && self.tma_ok() && truncate_ok {
            matches!(kernel, Kernel::Sm90Pingpong | Kernel::Sm90Pingpong64 | Kernel::Sm90Pingpong64x64 | Kernel::Sm90CooperativeCluster2)
        } else if self.vec4_ok() {
            kernel.family() == Family::MmaSync
                && needs_vec4(kernel)
                && (truncate_ok || kernel.rounding() == Tf32Rounding::Nearest)
        } else {
            is_scalar(kernel)
        }
    }
}

/// mma.sync kernels with 4-byte loads: any shape and alignment.
pub fn is_scalar(k: Kernel) -> bool {
    k.family() == Family::MmaSync && k.name().ends_with("_scalar")
}

/// Kernels with 16-byte loads.
pub fn needs_vec4(k: Kernel) -> bool {
    k.family() == Family::TmaWgmma || !is_scalar(k)
}

/// Unit roundoff of the TF32 operands a plan's kernel saw (see the module docs).
pub fn unit_roundoff(plan: &Plan) -> f64 {
    match plan.rounding {
        Tf32Rounding::Nearest => 2f64.powi(-11),
        Tf32Rounding::Truncate => 2f64.powi(-10),
    }
}

/// What the normalised error is relative to.
#[derive(Clone, Copy, Debug)]
pub enum Norm {
    /// ‖diff‖ / ‖want‖.
    Value,
    /// ‖diff‖ / ‖magnitude‖ (magnitude = (1+|s|)·(Σ|x||w| + |b|) per element).
    Magnitude,
}

/// The statistical check of a plan (fused vs f64): ‖diff‖/‖want‖ ≤ 1e-3 for rounded operands.
/// Truncated ones carry a bias that does not average out, coherent over a whole column when N
/// or K is tiny (one W row shared by every element): there ‖diff‖/‖want‖ reached 2.2e-3 with
/// N = 1, K = 4 (bias and cancelling signs), so they are held to ‖diff‖/‖magnitude‖ ≤ 2e-3,
/// which truncation satisfies by construction (≤ 2·2⁻¹⁰ per product) and wrong results do not.
pub fn norm_tol(plan: &Plan) -> f64 {
    match plan.rounding {
        Tf32Rounding::Nearest => NORM_TOL,
        Tf32Rounding::Truncate => 2.0 * NORM_TOL,
    }
}

/// See [`norm_tol`].
pub fn norm(plan: &Plan) -> Norm {
    match plan.rounding {
        Tf32Rounding::Nearest => Norm::Value,
        Tf32Rounding::Truncate => Norm::Magnitude,
    }
}
/// Unit roundoff assumed for cuBLAS's TF32 operands (truncation: we do not know).
pub const U_CUBLAS: f64 = 1.0 / 1024.0;
/// Absolute slack of the per-element bound.
pub const ABS_SLACK: f64 = 7.52e-37; // 2^-120
/// ‖out − ref‖ / ‖ref‖ limit (fused vs f64) for round-to-nearest operands.
pub const NORM_TOL: f64 = 1e-3;
/// ‖fused − cublas‖ / ‖cublas‖ limit.
pub const NORM_TOL_CUBLAS: f64 = 2e-3;
/// Fewest checked elements for the normalised checks to be meaningful.
pub const MIN_NORM_COUNT: usize = 256;
/// Problems up to this many multiply-adds are checked against the f64 reference in full; larger
/// ones on sampled rows × columns.
pub const FULL_REF_MACS: usize = 1 << 26;

/// The per-element coefficient c with |out − ref| ≤ c·magnitude + ABS_SLACK.
pub fn coeff(u: f64, k: usize) -> f64 {
    2.0 * u + u * u + (k as f64 + 3.0) * 2f64.powi(-23)
}

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

/// Host copies of the input buffers, laid out exactly as uploaded (offset, padding and tail
/// filled with [`input_pad`]).
#[derive(Clone, Debug)]
pub struct Inputs {
    pub x: Vec<f32>,
    pub w: Vec<f32>,
    pub b: Option<Vec<f32>>,
}

fn lay_out(dense: &[f32], rows: usize, cols: usize, ld: usize, off: usize) -> Vec<f32> {
    assert_eq!(dense.len(), rows * cols);
    let mut buf = vec![input_pad(); off + rows * ld + TAIL];
    for r in 0..rows {
        buf[off + r * ld..off + r * ld + cols].copy_from_slice(&dense[r * cols..(r + 1) * cols]);
    }
    buf
}

impl Inputs {
    /// x ~ U(0,1) or U(−1,1), w, b ~ U(−1/√K, 1/√K) (K = 0: U(−1, 1)); no zeros.
    pub fn generate(case: &Case, rng: &mut Rng) -> Self {
        let a = 1.0 / (case.k.max(1) as f32).sqrt();
        let x = match case.x_dist {
            XDist::Unit => fill(case.m * case.k, rng, |r| r.unit()),
            XDist::Sym => fill(case.m * case.k, rng, |r| r.sym(1.0)),
        };
        let w = fill(case.n * case.k, rng, |r| a * r.sym(1.0));
        let b: Option<Vec<f32>> = case.bias.then(|| (0..case.n).map(|_| a * rng.sym(1.0)).collect());
        Self::from_dense(case, &x, &w, b.as_deref())
    }

    /// Lays out dense row-major x (M×K), w (N×K) and b (N) as the case says.
    pub fn from_dense(case: &Case, x: &[f32], w: &[f32], b: Option<&[f32]>) -> Self {
        assert_eq!(case.bias, b.is_some(), "case.bias must agree with the bias given");
        let b = b.map(|b| {
            assert_eq!(b.len(), case.n);
            let mut buf = vec![input_pad(); case.off_b + case.n + TAIL];
            buf[case.off_b..case.off_b + case.n].copy_from_slice(b);
            buf
        });
        Self {
            x: lay_out(x, case.m, case.k, case.ldx(), case.off_x),
            w: lay_out(w, case.n, case.k, case.ldw(), case.off_w),
            b,
        }
    }

    pub fn x_host<'a>(&'a self, case: &Case) -> HostMatrix<'a> {
        HostMatrix { data: &self.x[case.off_x..], rows: case.m, cols: case.k, ld: case.ldx() }
    }
    pub fn w_host<'a>(&'a self, case: &Case) -> HostMatrix<'a> {
        HostMatrix { data: &self.w[case.off_w..], rows: case.n, cols: case.k, ld: case.ldw() }
    }
    pub fn b_host<'a>(&'a self, case: &Case) -> Option<&'a [f32]> {
        self.b.as_ref().map(|b| &b[case.off_b..case.off_b + case.n])
    }
}

/// `len` values from `f`, generated in parallel from independent streams split off `rng` (the
/// result depends only on the seed, not on the number of threads).
pub fn fill(len: usize, rng: &mut Rng, f: impl Fn(&mut Rng) -> f32 + Sync) -> Vec<f32> {
    const CHUNK: usize = 1 << 16;
    let base = rng.next_u64();
    let chunks = len.div_ceil(CHUNK);
    par_map(chunks, |range| {
        let mut v = Vec::with_capacity(range.len() * CHUNK);
        for c in range {
            let mut r = Rng::new(base ^ (c as u64).wrapping_mul(0xd1b5_4a32_d192_ed03));
            let n = CHUNK.min(len - c * CHUNK);
            v.extend((0..n).map(|_| f(&mut r)));
        }
        v
    })
    .concat()
}

/// Elements a `rows × cols` view of stride `ld` spans: `(rows − 1)·ld + cols` (0 when empty).
pub fn extent(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// The inputs on the device.
pub struct DeviceInputs {
    pub x: CudaSlice<f32>,
    pub w: CudaSlice<f32>,
    pub b: Option<CudaSlice<f32>>,
}

impl DeviceInputs {
    pub fn upload(g: &Gpu, inputs: &Inputs) -> Self {
        let s = &g.stream;
        Self {
            x: s.clone_htod(&inputs.x).expect("upload x"),
            w: s.clone_htod(&inputs.w).expect("upload w"),
            b: inputs.b.as_ref().map(|b| s.clone_htod(b).expect("upload bias")),
        }
    }
    pub fn x_view(&self, case: &Case) -> MatrixRef<'_> {
        let len = extent(case.m, case.k, case.ldx());
        MatrixRef::with_ld(self.x.slice(case.off_x..case.off_x + len), case.m, case.k, case.ldx())
    }
    pub fn w_view(&self, case: &Case) -> MatrixRef<'_> {
        let len = extent(case.n, case.k, case.ldw());
        MatrixRef::with_ld(self.w.slice(case.off_w..case.off_w + len), case.n, case.k, case.ldw())
    }
    pub fn b_view(&self, case: &Case) -> Option<CudaView<'_, f32>> {
        self.b.as_ref().map(|b| b.slice(case.off_b..case.off_b + case.n))
    }
}

/// Length of the output buffer of a case: offset, M rows of stride ldo, tail.
pub fn out_len(case: &Case) -> usize {
    case.off_o + case.m * case.ldo() + TAIL
}

// ---------------------------------------------------------------------------------------------
// Running
// ---------------------------------------------------------------------------------------------

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
/// another; checks the poison/padding invariants and the kernel the plan names.
pub fn execute(g: &Gpu, case: &Case, inputs: &Inputs, with_cublas: bool) -> Outcome {
    let d = DeviceInputs::upload(g, inputs);
    execute_on(g, case, &d, with_cublas)
}

pub fn execute_on(g: &Gpu, case: &Case, d: &DeviceInputs, with_cublas: bool) -> Outcome {
    let (x, w, b) = (d.x_view(case), d.w_view(case), d.b_view(case));
    let olen = extent(case.m, case.n, case.ldo());
    let gemm = g.gemm.with_dispatch(case.dispatch);
    let gemm = case.rounding.map_or(gemm.clone(), |r| gemm.with_rounding(r));

    let mut out = g.stream.clone_htod(&poisoned(out_len(case))).expect("upload poison");
    let plan = {
        let mut o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + olen), case.m, case.n, case.ldo());
        if case.workspace {
            let len = gemm.workspace_len(&g.stream, &x, &w).expect("workspace_len");
            let mut ws = g.stream.clone_htod(&poisoned(len.max(1))).expect("upload workspace");
            gemm.run_with_workspace(&g.stream, &x, &w, b.as_ref(), case.scale, &mut o, &mut ws.as_view_mut())
        } else {
            gemm.run(&g.stream, &x, &w, b.as_ref(), case.scale, &mut o)
        }
        .unwrap_or_else(|e| panic!("fused run failed for {case:?}: {e}"))
    };
    let host = g.stream.clone_dtoh(&out).expect("download out");
    let fused = take_view_checked(&host, case.off_o, case.m, case.n, case.ldo(), &format!("fused {plan:?} {case:?}"));

    let hopper = g.is_hopper();
    match (plan, case.m == 0 || case.n == 0) {
        (None, true) => {}
        (Some(p), false) => match case.dispatch {
            Dispatch::Force(k) => assert_eq!(p.kernel, k, "forced {k:?} but {p:?} ran for {case:?}"),
            Dispatch::Auto if p.repack_x || p.repack_w => {
                assert!(case.workspace, "repacked without a workspace: {p:?} for {case:?}");
                // Aligned operands are repacked only to round them for a truncating kernel.
                let to_round = p.kernel.rounding() == Tf32Rounding::Truncate && p.repack_x && p.repack_w;
                assert!(!case.vec4_ok() || to_round, "repacked operands that were aligned already: {p:?} for {case:?}");
                if p.repack_x && p.repack_w {
                    assert_eq!(p.rounding, Tf32Rounding::Nearest, "repacked operands are rounded: {p:?}");
                }
                // Repacks feed the TMA kernel on sm_90 (or, asked to round, maybe a rounding one).
                let tma_only = hopper && case.effective_rounding(hopper) == Tf32Rounding::Truncate;
                let family_ok = p.kernel.family() == Family::TmaWgmma || (!tma_only && p.kernel.family() == Family::MmaSync);
                assert!(family_ok && needs_vec4(p.kernel), "repack into {p:?} for {case:?}");
            }
            Dispatch::Auto => assert!(
                case.auto_may_pick(p.kernel, hopper)
                    && (case.effective_rounding(hopper) == Tf32Rounding::Truncate || p.rounding == Tf32Rounding::Nearest),
                "Auto picked {:?} for {case:?} (vec4_ok {}, tma_ok {}, hopper {hopper})",
                p.kernel,
                case.vec4_ok(),
                case.tma_ok()
            ),
        },
        (p, _) => panic!("run returned {p:?} for {case:?}"),
    }

    let cublas = with_cublas.then(|| {
        let mut out = g.stream.clone_htod(&poisoned(out_len(case))).expect("upload poison");
        {
            let mut o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + olen), case.m, case.n, case.ldo());
            g.baseline
                .linear_scale_residual(&x, &w, b.as_ref(), case.scale, &mut o)
                .unwrap_or_else(|e| panic!("cuBLAS baseline failed for {case:?}: {e}"));
        }
        let host = g.stream.clone_dtoh(&out).expect("download cublas out");
        take_view_checked(&host, case.off_o, case.m, case.n, case.ldo(), &format!("cuBLAS {case:?}"))
    });
    Outcome { plan, fused, cublas }
}

// ---------------------------------------------------------------------------------------------
// Checking
// ---------------------------------------------------------------------------------------------

/// Splits 0..n over the CPU cores and collects one result per chunk.
pub fn par_map<T: Send>(n: usize, f: impl Fn(Range<usize>) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(4, |p| p.get()).min(n.max(1));
    let chunk = n.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|lo| {
                let f = &f;
                s.spawn(move || f(lo..(lo + chunk).min(n)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("checker thread panicked")).collect()
    })
}

/// Rows (or columns) to check against the reference in a large problem: every tile boundary the
/// kernels have (64 and 128 multiples ± 1), the first and last, the middle, and `extra` random.
pub fn sample_indices(len: usize, rng: &mut Rng, extra: usize) -> Vec<usize> {
    let mut v = Vec::new();
    for t in [
        0usize, 1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 191, 192, 255, 256, 257, 383, 384, 511, 512, 1023, 1024,
        1025,
    ] {
        v.push(t);
    }
    for d in 1..=3 {
        v.push(len.wrapping_sub(d));
    }
    v.push(len / 2);
    for _ in 0..extra {
        if len > 0 {
            v.push(rng.below(len));
        }
    }
    v.retain(|&i| i < len);
    v.sort_unstable();
    v.dedup();
    v
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
            assert!(e <= norm_tol, "{what}: ‖diff‖/‖{of}‖ = {e:.3e} > {norm_tol:e} over {} elements; {ctx}", self.count);
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
    let outcome = execute(g, case, inputs, true);
    verify(case, inputs, &outcome, rng);
    outcome.plan
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
    stats.assert_within(&format!("fused vs f64 reference (bound c·u·magnitude, c·u = {c:.3e})"), norm_tol(&plan), norm(&plan), &ctx);

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
                    s.add(r, col, o.fused[r * n + col], cublas[r * n + col] as f64, mag_ub, cc * mag_ub + 2.0 * ABS_SLACK);
                }
            }
            s
        })
        .into_iter()
        .fold(Stats::default(), Stats::merge);
        // Truncated operands: the same coherent bias as against f64 (see `norm_tol`), on top of
        // cuBLAS's own error (measured 2.3e-3 of ‖cuBLAS‖ with N = 1, K = 4).
        stats.assert_within("fused vs cuBLAS+elementwise", NORM_TOL_CUBLAS, norm(&plan), &ctx);
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

/// Forcing `kernel` on `case` must fail with `KernelUnavailable` for that kernel and leave the
/// (poisoned) output untouched.
pub fn expect_refused(g: &Gpu, case: &Case, kernel: Kernel, rng: &mut Rng) {
    let inputs = Inputs::generate(case, rng);
    let d = DeviceInputs::upload(g, &inputs);
    let mut out = g.stream.clone_htod(&poisoned(out_len(case))).expect("upload poison");
    let len = extent(case.m, case.n, case.ldo());
    let r = {
        let mut o = MatrixMut::with_ld(out.slice_mut(case.off_o..case.off_o + len), case.m, case.n, case.ldo());
        g.gemm.with_dispatch(case.dispatch).run(&g.stream, &d.x_view(case), &d.w_view(case), d.b_view(case).as_ref(), case.scale, &mut o)
    };
    assert!(
        matches!(r, Err(Error::KernelUnavailable { kernel: k, .. }) if k == kernel),
        "forcing {kernel:?} on {case:?} should be refused, got {r:?}"
    );
    assert_all_poisoned(&g.stream.clone_dtoh(&out).expect("download out"), &format!("refused {case:?}"));
}
