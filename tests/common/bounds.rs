//! What a result may differ from the reference by: the bounds every numeric check uses.
//!
//! # Error bounds
//!
//! Per element, with A = Σ_k |x||w| + |b| and magnitude = (1 + |s|)·A (what
//! `reference::element` returns):
//!
//! 1. Operand rounding to TF32: x̂ = x(1+δ), |δ| ≤ u, where u = 2⁻¹¹ when both operands were
//!    rounded to nearest (`cvt.rna.tf32` in the mma.sync kernels, half an ulp added in registers
//!    by the sm_90 kernels that round X, a repack or a prepared weight for W; like cuBLAS) and
//!    u = 2⁻¹⁰ when the tensor core truncates the fp32 bits it is fed (the `Trunc` kernels, or W
//!    read as given): [`Plan::precision`] says which. The product of two
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
//! the operands were rounded to nearest ([`Plan::precision`]), 2e-3 when they were truncated (u is
//! twice as large). Simulated on the CPU for this data (x ~ U[0,1) or U(−1,1), w, b ~ U(−1/√K,
//! 1/√K)): ≈ 2.6e-4 with round-to-nearest TF32 operands and ≈ 7e-4 with truncated ones (the
//! truncation bias shrinks every product by ≈ 3.4e-4 per operand on average) for large K; with
//! K ≤ 8 and one column a truncating kernel measured up to 2.2e-3 on the H200, so truncated
//! results are held to ‖out − ref‖₂ / ‖magnitude‖₂ ≤ 2e-3 instead ([`norm_tol`]). Fused vs
//! cuBLAS: ≤ 2e-3.

use gemm_epilogue::{Plan, Precision};

/// Unit roundoff of the TF32 operands a plan's kernel saw (see the module docs). Tf32x3: each
/// operand is big + small with |a − big − small| ≤ 2⁻¹¹·|a − big| ≤ 2⁻²²|a|, and the omitted
/// small·small is ≤ 2⁻²²|ab|: per product ≤ 3·2⁻²² = 2·(1.5·2⁻²²), so u = 1.5·2⁻²².
pub fn unit_roundoff(plan: &Plan) -> f64 {
    match plan.precision {
        Precision::Tf32 => 2f64.powi(-11),
        Precision::Tf32Truncated => 2f64.powi(-10),
        Precision::Tf32x3 => 1.5 * 2f64.powi(-22),
        r => panic!("no error bound for operands converted by {r:?}"),
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
    match plan.precision {
        Precision::Tf32 => NORM_TOL,
        Precision::Tf32x3 => NORM_TOL_TF32X3,
        Precision::Tf32Truncated => 2.0 * NORM_TOL,
        r => panic!("no error bound for operands converted by {r:?}"),
    }
}

/// See [`norm_tol`]. With K < 16 the few rounding errors of an element do not average out
/// either (‖diff‖/‖want‖ = 1.02e-3 measured with N = 1, K = 4, rounded operands): those results
/// too are held to ‖diff‖/‖magnitude‖.
pub fn norm(plan: &Plan, k: usize) -> Norm {
    match plan.precision {
        Precision::Tf32 | Precision::Tf32x3 if k < 16 => Norm::Magnitude,
        Precision::Tf32 | Precision::Tf32x3 => Norm::Value,
        Precision::Tf32Truncated => Norm::Magnitude,
        r => panic!("no error bound for operands converted by {r:?}"),
    }
}
/// Unit roundoff assumed for cuBLAS's TF32 operands (truncation: we do not know).
pub const U_CUBLAS: f64 = 1.0 / 1024.0;
/// Absolute slack of the per-element bound.
pub const ABS_SLACK: f64 = 7.52e-37; // 2^-120
/// ‖out − ref‖ / ‖ref‖ limit (fused vs f64) for round-to-nearest operands.
pub const NORM_TOL: f64 = 1e-3;
/// ‖out − ref‖ / ‖ref‖ limit for Tf32x3: an fp32 GEMM's error (accumulation of ~√K units of
/// 2⁻²⁴ relative for this data: ~4e-6 at K = 4096), a twelfth of what one TF32 product gives
/// (2.6e-4), so a kernel that dropped the small parts fails it.
pub const NORM_TOL_TF32X3: f64 = 2e-5;
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
