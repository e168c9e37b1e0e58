//! The TF32-emulating check ([`verify_emulated`]): each operand converted on the host as the call
//! converted it ([`conversions`], from the plan), products summed in f64
//! ([`gemm_epilogue::testbed::tf32`]), and the fused output held to the fp32-accumulation bound
//! instead of the operand-rounding one (docs/EPILOGUE.md, "The emulating reference"):
//!
//! - per element: |out − emul| ≤ γ(2n + 2)·magnitude + 2⁻¹²⁰, n the addends (K products, 3K for
//!   3xTF32, plus the bias), `magnitude` = (1 + |s|)·(Σ|each product| + |b|);
//! - over the checked elements: ‖out − emul‖ / ‖magnitude‖ ≤ [`EMUL_NORM_TOL`].

use gemm_epilogue::testbed::tf32::{emulated_coeff, emulated_element, Conversion, Converted};
use gemm_epilogue::{Plan, Precision};

use super::bounds::{ABS_SLACK, FULL_REF_MACS};
use super::case::Case;
use super::inputs::{par_map, sample_indices, Inputs};
use super::rng::{seed, Rng};

/// ‖out − emul‖ / ‖magnitude‖ limit. The biased model of the tensor cores' fp32 accumulation
/// (every product truncated on alignment by up to 2⁻²⁶ of the partial sum, every k-step add
/// truncated by up to 2⁻²⁴, all of one sign) gives ≈ 1.4·10⁻⁶ for K = 8192 on the harness's data;
/// one 32-wide k-block dropped at K = 8192 gives ≈ 9·10⁻⁴.
pub const EMUL_NORM_TOL: f64 = 1e-5;

/// How X and W reached the tensor cores in the call that produced `plan`: `handle` is the
/// precision of the handle that ran it (it prepared W when [`Case::prepared_w`]).
/// - `Tf32x3`: both split; `Tf32`: both rounded to nearest (X split by a Tf32x3 kernel), ties
///   to even where the TMA rounded on load ([`Plan::round_on_load`]) an operand not rounded
///   before, else ties away;
/// - `Tf32Truncated`: X rounded when the kernel rounds it or it was repacked, W rounded when the
///   kernel rounds it (a kernel that reads W as given does not), it was repacked, or it is a
///   weight prepared by a rounding handle; the rest truncated.
pub fn conversions(case: &Case, plan: &Plan, handle: Precision, hopper: bool) -> (Conversion, Conversion) {
    let k = plan.kernel;
    match plan.precision {
        Precision::Tf32x3 => (Conversion::Split, Conversion::Split),
        // A Tf32x3 kernel splits X whatever W is: with a W that reached it rounded (a weight
        // prepared by a Tf32 handle) the plan says Tf32, but X went in split.
        Precision::Tf32 if k.precision() == Precision::Tf32x3 => (Conversion::Split, Conversion::Round),
        // Rounded on load: the TMA rounds ties to even, but an operand repacked (X, W) or
        // prepared (W) was rounded ties away before, and rounding a TF32 value changes nothing.
        Precision::Tf32 if plan.round_on_load => {
            let even = |before: bool| if before { Conversion::Round } else { Conversion::RoundEven };
            (even(plan.repack_x), even(plan.repack_w || case.prepared_w))
        }
        Precision::Tf32 => (Conversion::Round, Conversion::Round),
        Precision::Tf32Truncated => {
            assert_ne!(k.precision(), Precision::Tf32x3, "{plan:?}: a 3xTF32 kernel reported truncated operands");
            let rounds = k.precision() == Precision::Tf32;
            let conv = |rounded: bool| if rounded { Conversion::Round } else { Conversion::Truncate };
            let x = conv(rounds || plan.repack_x);
            // A weight prepared rounded, or split (whose big parts, all such a kernel reads, are W
            // rounded: a Tf32x3 handle's weight on sm_90), reaches the kernel rounded.
            let prepared_rounded =
                case.prepared_w && (handle == Precision::Tf32 || (handle == Precision::Tf32x3 && hopper));
            let w = conv((rounds && !k.needs_rounded_w()) || plan.repack_w || prepared_rounded);
            assert!(
                x == Conversion::Truncate || w == Conversion::Truncate,
                "{plan:?} says truncated but both operands were rounded"
            );
            (x, w)
        }
        p => panic!("no emulation for {p:?}"),
    }
}

/// Checks a fused output (dense M × N) against the emulating reference: every element (or, past
/// [`FULL_REF_MACS`], sampled rows × columns) within the per-element bound, and the normwise
/// error relative to the magnitude within [`EMUL_NORM_TOL`]. Returns ‖out − emul‖/‖magnitude‖.
pub fn verify_emulated(
    case: &Case,
    inputs: &Inputs,
    fused: &[f32],
    plan: &Plan,
    handle: Precision,
    hopper: bool,
    rng: &mut Rng,
) -> f64 {
    let (m, n, k) = (case.m, case.n, case.k);
    let (cx, cw) = conversions(case, plan, handle, hopper);
    let x = Converted::new(inputs.x_host(case), cx);
    let w = Converted::new(inputs.w_host(case), cw);
    let b = inputs.b_host(case);
    let terms = k * x.terms_per_k(&w) + case.bias as usize;
    let c = emulated_coeff(terms);
    let full = (m as u64) * (n as u64) * (k.max(1) as u64) <= FULL_REF_MACS as u64;
    let (rows, cols): (Vec<usize>, Vec<usize>) = if full {
        ((0..m).collect(), (0..n).collect())
    } else {
        (sample_indices(m, rng, 24), sample_indices(n, rng, 24))
    };
    // (checked, violations, Σ diff², Σ magnitude², worst (|diff|/bound, row, col, got, want))
    type Acc = (usize, usize, f64, f64, Option<(f64, usize, usize, f32, f64)>);
    let parts: Vec<Acc> = par_map(rows.len(), |range| {
        let mut a: Acc = (0, 0, 0.0, 0.0, None);
        for &r in &rows[range] {
            for &col in &cols {
                let e = emulated_element(&x, &w, b, case.scale, r, col);
                let got = fused[r * n + col];
                let diff = got as f64 - e.value;
                let bound = c * e.magnitude + ABS_SLACK;
                a.0 += 1;
                let ok = got.is_finite() && diff.abs() <= bound;
                a.1 += !ok as usize;
                a.2 += diff * diff;
                a.3 += e.magnitude * e.magnitude;
                let excess = if got.is_finite() { diff.abs() / bound } else { f64::INFINITY };
                if a.4.is_none_or(|w| excess > w.0) {
                    a.4 = Some((excess, r, col, got, e.value));
                }
            }
        }
        a
    });
    let (mut count, mut bad, mut d2, mut g2, mut worst) = (0, 0, 0.0, 0.0, None::<(f64, usize, usize, f32, f64)>);
    for (c_, b_, d, g, w_) in parts {
        count += c_;
        bad += b_;
        d2 += d;
        g2 += g;
        if let Some(w_) = w_ {
            if worst.is_none_or(|s| w_.0 > s.0) {
                worst = Some(w_);
            }
        }
    }
    let ctx = format!("{case:?}, {plan:?}, operands X {cx:?} W {cw:?}, seed {:#x}", seed());
    assert!(
        bad == 0,
        "emulated TF32: {bad} of {count} elements outside the accumulation bound (c = {c:.3e}); worst (|diff|/bound, row, col, got, want) = {worst:?}; {ctx}"
    );
    let rel = if g2 > 0.0 { (d2 / g2).sqrt() } else { 0.0 };
    assert!(
        rel <= EMUL_NORM_TOL,
        "emulated TF32: ‖diff‖/‖magnitude‖ = {rel:.3e} > {EMUL_NORM_TOL:e} over {count} elements; {ctx}"
    );
    rel
}
