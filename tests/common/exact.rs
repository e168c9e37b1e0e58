//! The exact oracle: small-integer inputs whose every product and partial sum is exact in fp32
//! and in TF32, so that every correct kernel — whatever it does to the operands (truncation,
//! rounding, the 3xTF32 split: integers of ≤ 11 significant bits are TF32 values, their small
//! part is 0), in whatever order or tree it adds the products (tensor cores, split-K partials,
//! shared tails) — computes v exactly, and the epilogue's two roundings are exact for the scales
//! used. The output must then equal the host's result bit for bit.
//!
//! Bounds: |x|, |w| ≤ [`XW_MAX`], |b| ≤ [`B_MAX`], K ≤ [`K_MAX`], so every partial sum is an
//! integer of magnitude ≤ K·XW_MAX² + B_MAX < 2²¹. Integers below 2²⁴ are exact in fp32, and a
//! sum of two of them (in any order, truncating or rounding adders, any tree) is again one, so
//! v is exact. With |v| < 2²¹, `v·s` and `v·s + v` are exact for every scale of [`SCALES`]
//! (multiples of v by 1/4, 1/2, 2, 3, … with results below 2²⁴). Every input is nonzero, so no
//! product is a signed zero and an exact zero of v comes from cancellation, which IEEE rounds
//! to +0 (as the host does).

use super::case::Case;
use super::inputs::{fill, par_map, Inputs};
use super::rng::Rng;

/// Largest |x|, |w|.
pub const XW_MAX: u64 = 7;
/// Largest |b|.
pub const B_MAX: u64 = 255;
/// Largest K for which the partial sums stay below 2²¹.
pub const K_MAX: usize = ((1 << 21) - B_MAX as usize - 1) / (XW_MAX * XW_MAX) as usize;
/// Scales for which `v·s` and `v·s + v` are exact for every |v| < 2²¹.
pub const SCALES: [f32; 7] = [0.5, -2.0, 0.0, 3.0, -1.0, 0.25, -0.5];

/// A nonzero integer in [−max, max].
fn nonzero(rng: &mut Rng, max: u64) -> f32 {
    let v = 1 + rng.below(max as usize) as i32;
    if rng.below(2) == 0 {
        v as f32
    } else {
        -v as f32
    }
}

/// Integer inputs for `case`, laid out as [`Inputs::generate`] lays out random ones.
pub fn integer_inputs(case: &Case, rng: &mut Rng) -> Inputs {
    assert!(case.k <= K_MAX, "K = {} > {K_MAX}: the partial sums could leave the exact range", case.k);
    assert!(SCALES.contains(&case.scale), "scale {} is not one the exact oracle keeps exact", case.scale);
    let x = fill(case.m * case.k, rng, |r| nonzero(r, XW_MAX));
    let w = fill(case.n * case.k, rng, |r| nonzero(r, XW_MAX));
    let b: Option<Vec<f32>> = case.bias.then(|| (0..case.n).map(|_| nonzero(rng, B_MAX)).collect());
    Inputs::from_dense(case, &x, &w, b.as_deref())
}

/// The exact M × N output of `case` on integer `inputs` (dense, row-major): v in fp32 (exact:
/// every partial sum is an integer below 2²⁴, so any fp32 order gives it), then `(v·s) + v` with
/// two fp32 roundings, which are exact too.
pub fn exact_output(case: &Case, inputs: &Inputs) -> Vec<f32> {
    let (x, w, b) = (inputs.x_host(case), inputs.w_host(case), inputs.b_host(case));
    let (m, n, k, s) = (case.m, case.n, case.k, case.scale);
    par_map(m, |rows| {
        let mut out = Vec::with_capacity(rows.len() * n);
        for r in rows {
            let xr = &x.data[r * x.ld..r * x.ld + k];
            for c in 0..n {
                let wr = &w.data[c * w.ld..c * w.ld + k];
                // 8 lanes so the compiler vectorises; exact whatever the order.
                let mut lanes = [0f32; 8];
                let (xc, wc) = (xr.chunks_exact(8), wr.chunks_exact(8));
                let tail: f32 = xc.remainder().iter().zip(wc.remainder()).map(|(a, b)| a * b).sum();
                for (xa, wa) in xc.zip(wc) {
                    for l in 0..8 {
                        lanes[l] += xa[l] * wa[l];
                    }
                }
                let acc = lanes.iter().sum::<f32>() + tail;
                let v = match b {
                    Some(b) => acc + b[c],
                    None => acc,
                };
                out.push(v * s + v);
            }
        }
        out
    })
    .concat()
}

/// Asserts `got` (dense M × N) equals `want` bit for bit (the exact result, or another call's
/// output); names the first mismatches, their count, whether they differ only in the sign of a
/// zero, and the seed that reproduces them.
pub fn assert_bitwise(got: &[f32], want: &[f32], n: usize, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: output sizes");
    let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i].to_bits() != want[i].to_bits()).collect();
    if bad.is_empty() {
        return;
    }
    let zeros_only = bad.iter().all(|&i| got[i] == 0.0 && want[i] == 0.0);
    let first: Vec<String> = bad
        .iter()
        .take(8)
        .map(|&i| {
            format!(
                "({}, {}): got {:e} ({:#010x}), want {:e} ({:#010x})",
                i / n.max(1),
                i % n.max(1),
                got[i],
                got[i].to_bits(),
                want[i],
                want[i].to_bits()
            )
        })
        .collect();
    panic!(
        "{what}: {} of {} elements differ from the expected bits{}; first (row, col): {}; GEMM_EPILOGUE_SEED={:#x}",
        bad.len(),
        got.len(),
        if zeros_only { " (only in the sign of zero)" } else { "" },
        first.join("; "),
        super::seed()
    );
}
