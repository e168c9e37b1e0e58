//! The harness of the rounding tests (tests/gpu_rounding.rs: the kernels that round X in
//! registers; tests/gpu_round_on_load.rs: the TMA's rounding on load): the host's TF32
//! conversions (the emulating oracle's), the identity, inputs salted with the values a rounding
//! can get wrong, the shapes every such kernel runs, and one fused call into a poisoned output.
//! Outputs are compared with [`super::assert_bitwise`].

use gemm_epilogue::cudarc::driver::CudaSlice;
use gemm_epilogue::{FusedGemm, MatrixMut, MatrixRef, Plan, Weight};

use super::{Gpu, Rng};

// The host's TF32 conversions are the emulating oracle's (`gemm_epilogue::testbed::tf32`):
// rna, to nearest with ties away (`cvt.rna.tf32.f32`, the crate's own rounding); rne, to nearest
// with ties to even (the TMA's through a TF32 tensor map,
// `gpu_round_on_load::the_tma_rounds_on_load_through_identities`); trunc, what the tensor cores
// make of fp32 bits.
#[allow(unused_imports)]
pub use gemm_epilogue::testbed::tf32::{
    tf32_round as tf32_rna, tf32_round_even as tf32_rne, tf32_truncate as tf32_trunc,
};

/// The `k × k` identity, dense: through it an operand comes out exactly as the kernel read it
/// (one product 1·v per output element).
pub fn identity(k: usize) -> Vec<f32> {
    (0..k * k).map(|i| if i / k == i % k { 1.0 } else { 0.0 }).collect()
}

/// Makes some inputs the values a rounding can get wrong: exact ties (the 13 dropped bits
/// 0x1000) and values whose 23 mantissa bits are all ones (rounding up carries into the
/// exponent). Normal values only, signs kept.
pub fn salt(v: &mut [f32], rng: &mut Rng) {
    for x in v.iter_mut().filter(|x| x.is_normal()) {
        match rng.below(64) {
            0 | 1 => *x = f32::from_bits((x.to_bits() & !0x1fff) | 0x1000),
            2 => *x = f32::from_bits(x.to_bits() | 0x007f_ffff),
            _ => {}
        }
    }
}

/// How a shape is scheduled, for the kernels of this file: split-K (every tile shared along K),
/// a stream-K tail (the last, partial wave shared), or whatever the plan says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sched {
    Any,
    SplitK,
    Tail,
}

/// One problem: M × N × K, and how it must be scheduled.
#[derive(Clone, Copy, Debug)]
pub struct Problem {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub sched: Sched,
}

pub const fn p(m: usize, n: usize, k: usize, sched: Sched) -> Problem {
    Problem { m, n, k, sched }
}

/// The shapes every kernel runs (K % 4 == 0 throughout, so that nothing is repacked; K tails are
/// tails of the 32-wide k-block). With 128-row and 256-row cluster tiles, M % 256 in 1..128
/// leaves the second CTA of a cluster's last row without a row in range.
pub const SHAPES: [Problem; 24] = [
    p(1, 1, 4, Sched::Any),          // one element, K below a k-block
    p(1, 4032, 4096, Sched::SplitK), // M = 1, every tile split along K (63 tiles of 64×64: fewer than 64)
    p(7, 33, 36, Sched::Any),        // tails everywhere
    p(8, 16, 16, Sched::Any),
    p(64, 64, 32, Sched::Any),     // one whole 64×64 tile, one k-block
    p(65, 129, 100, Sched::Any),   // M, N and K tails
    p(100, 16384, 96, Sched::Any), // many narrow tiles; M % 256 = 100
    p(127, 255, 1000, Sched::Any),
    p(128, 128, 4096, Sched::SplitK),  // one or two tiles, 128 k-blocks
    p(129, 1000, 2048, Sched::SplitK), // split-K with M and N tails; one row in a cluster's second CTA
    p(200, 300, 68, Sched::Any),
    p(255, 257, 260, Sched::Any),
    p(256, 256, 32, Sched::Any),
    p(257, 520, 512, Sched::Any),     // M % 256 = 1
    p(300, 520, 512, Sched::Any),     // M % 256 = 44; 16 k-blocks: 2 parts a 128-row tile, the 64×64 tiles unsplit
    p(300, 520, 2048, Sched::SplitK), // 64 k-blocks: every tile split, 64×64 ones too
    p(300, 136, 68, Sched::Any),
    p(383, 130, 36, Sched::Any),  // M % 256 = 127
    p(513, 200, 100, Sched::Any), // M % 256 = 1
    p(1000, 1023, 1024, Sched::Any),
    p(1025, 1000, 132, Sched::Any),
    p(2000, 4096, 260, Sched::Any), // several tiles per persistent CTA
    p(4097, 1025, 68, Sched::Any),  // M % 256 = 1, 17 × 9 cluster tiles
    p(4096, 4096, 128, Sched::Any), // whole waves
];

/// The host inputs of a problem, dense, and how the call runs them.
pub struct Host {
    pub x: Vec<f32>,
    pub w: Vec<f32>,
    pub b: Option<Vec<f32>>,
    pub scale: f32,
    /// Output stride: N, N + 4 (TMA store where N % 4 == 0) or N + 1 (stores from registers).
    pub ldo: usize,
}

impl Host {
    /// x ~ U(0,1) or U(−1,1), w, b ~ U(−1/√K, 1/√K), salted ([`salt`]); the `i`-th problem of a
    /// list picks its bias, scale and output stride.
    pub fn generate(p: &Problem, i: usize, rng: &mut Rng) -> Self {
        let a = 1.0 / (p.k.max(1) as f32).sqrt();
        let mut x = if i % 2 == 0 {
            super::fill(p.m * p.k, rng, |r| r.unit())
        } else {
            super::fill(p.m * p.k, rng, |r| r.sym(1.0))
        };
        let mut w = super::fill(p.n * p.k, rng, |r| a * r.sym(1.0));
        salt(&mut x, rng);
        salt(&mut w, rng);
        let b = (i % 4 != 3).then(|| (0..p.n).map(|_| a * rng.sym(1.0)).collect());
        let scale = [0.5, -2.0, 3.0, 1e-3][i % 4];
        let ldo = [p.n, p.n + 4, p.n + 1][i % 3];
        Self { x, w, b, scale, ldo }
    }
}

/// One fused call of `gemm` into a poisoned `m × n` output of stride `ldo` (with `workspace` when
/// given): the plan and the output, dense, after checking that every element of the view was
/// written and nothing around it.
#[allow(clippy::too_many_arguments)]
pub fn run<W: Weight>(
    g: &Gpu,
    gemm: &FusedGemm,
    x: &CudaSlice<f32>,
    w: &W,
    b: Option<&CudaSlice<f32>>,
    (m, n, k): (usize, usize, usize),
    scale: f32,
    ldo: usize,
    workspace: Option<&mut CudaSlice<f32>>,
) -> (Plan, Vec<f32>) {
    run_view(g, gemm, MatrixRef::from_slice(x, m, k), w, b, n, scale, ldo, workspace)
}

/// [`run`] with X as a view (any leading dimension).
#[allow(clippy::too_many_arguments)]
pub fn run_view<W: Weight>(
    g: &Gpu,
    gemm: &FusedGemm,
    xv: MatrixRef<'_>,
    w: &W,
    b: Option<&CudaSlice<f32>>,
    n: usize,
    scale: f32,
    ldo: usize,
    workspace: Option<&mut CudaSlice<f32>>,
) -> (Plan, Vec<f32>) {
    let (m, k) = (xv.rows(), xv.cols());
    let bv = b.map(|b| b.as_view());
    let len = super::extent(m, n, ldo);
    let mut out = g.stream.clone_htod(&super::poisoned(len + super::TAIL)).expect("upload poison");
    let plan = {
        let mut o = MatrixMut::with_ld(out.slice_mut(0..len), m, n, ldo);
        match workspace {
            Some(ws) => gemm.run_with_workspace(&g.stream, &xv, w, bv.as_ref(), scale, &mut o, &mut ws.as_view_mut()),
            None => gemm.run(&g.stream, &xv, w, bv.as_ref(), scale, &mut o),
        }
        .unwrap_or_else(|e| panic!("{:?} on {m}x{n}x{k} failed: {e}", gemm.dispatch()))
        .expect("a non-empty problem")
    };
    let host = g.stream.clone_dtoh(&out).expect("download out");
    let dense = super::take_view_checked(&host, 0, m, n, ldo, &format!("{plan:?} on {m}x{n}x{k}"));
    (plan, dense)
}
