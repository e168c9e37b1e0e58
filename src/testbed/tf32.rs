//! The TF32-emulating reference: each operand converted on the host exactly as a call converted
//! it (truncated, rounded to nearest, or split into two TF32 values for 3xTF32), the products of
//! the converted values summed in f64. What is left between a correct kernel and this reference
//! is only fp32 accumulation and the two epilogue roundings, so the bound drops from the
//! operand-rounding bound (≈ 2u·magnitude, u = 2⁻¹¹) to an accumulation bound
//! ([`emulated_coeff`]; derivation in docs/EPILOGUE.md, "The emulating reference").

use super::reference::{HostMatrix, RefElement};

/// TF32 keeps the top 19 bits of an fp32 (sign, 8 exponent bits, 10 mantissa bits).
const KEEP: u32 = 0xffff_e000;

/// How one operand reached the tensor cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conversion {
    /// The low 13 mantissa bits dropped (the tensor cores read fp32 bits as TF32).
    Truncate,
    /// Rounded to nearest, ties away from zero (`cvt.rna.tf32.f32`, the kernels' half-ulp add,
    /// the repack, a prepared weight).
    Round,
    /// Rounded to nearest, ties to even: the TMA through a TF32 tensor map
    /// ([`crate::Plan::round_on_load`]).
    RoundEven,
    /// 3xTF32: `big = round(a)`, `small = round(a − big)`; the products
    /// `small·big + big·small + big·big` (small·small dropped).
    Split,
}

/// TF32 by truncation: the low 13 mantissa bits cleared (NaN payloads in those bits only read as
/// ±Inf, as on the tensor cores).
pub fn tf32_truncate(v: f32) -> f32 {
    f32::from_bits(v.to_bits() & KEEP)
}

/// TF32 to nearest, ties away from zero, on the bit pattern: half a TF32 ulp (bit 12) added to
/// the magnitude, then the 13 dropped bits cleared. A carry into the exponent is the correct
/// rounding up (the largest finite values round to ±Inf, as `cvt.rna` does); Inf and NaN
/// (exponent all ones) are kept as they are.
pub fn tf32_round(v: f32) -> f32 {
    let b = v.to_bits();
    if b & 0x7f80_0000 == 0x7f80_0000 {
        return v;
    }
    f32::from_bits((b + 0x1000) & KEEP)
}

/// TF32 to nearest, ties to even, on the bit pattern: half a TF32 ulp less one, plus the kept
/// part's lowest bit, added to the magnitude, then the 13 dropped bits cleared (carries and Inf
/// as in [`tf32_round`]).
pub fn tf32_round_even(v: f32) -> f32 {
    let b = v.to_bits();
    if b & 0x7f80_0000 == 0x7f80_0000 {
        return v;
    }
    f32::from_bits((b + 0x0fff + ((b >> 13) & 1)) & KEEP)
}

/// The 3xTF32 split `(big, small)`: `big = tf32_round(a)`, `small = tf32_round(a − big)`
/// (`a − big` is exact in fp32: |a − big| ≤ half a TF32 ulp of a).
pub fn tf32_split(v: f32) -> (f32, f32) {
    let big = tf32_round(v);
    if !big.is_finite() {
        return (big, 0.0);
    }
    (big, tf32_round(v - big))
}

/// A dense host copy of a matrix, converted as one operand of a call was: `big` what the tensor
/// cores read, and for [`Conversion::Split`] the `small` part.
#[derive(Clone, Debug)]
pub struct Converted {
    /// Rows × cols, dense: the converted values (the big part of a split).
    pub big: Vec<f32>,
    /// The small part of a split (empty otherwise).
    pub small: Vec<f32>,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The conversion.
    pub conversion: Conversion,
}

impl Converted {
    /// Converts every element of `m` with `conversion`.
    pub fn new(m: HostMatrix<'_>, conversion: Conversion) -> Self {
        let mut big = Vec::with_capacity(m.rows * m.cols);
        let mut small = Vec::new();
        for r in 0..m.rows {
            for &v in &m.data[r * m.ld..r * m.ld + m.cols] {
                match conversion {
                    Conversion::Truncate => big.push(tf32_truncate(v)),
                    Conversion::Round => big.push(tf32_round(v)),
                    Conversion::RoundEven => big.push(tf32_round_even(v)),
                    Conversion::Split => {
                        let (b, s) = tf32_split(v);
                        big.push(b);
                        small.push(s);
                    }
                }
            }
        }
        Self { big, small, rows: m.rows, cols: m.cols, conversion }
    }

    fn row(&self, r: usize) -> (&[f32], Option<&[f32]>) {
        let range = r * self.cols..(r + 1) * self.cols;
        let small = (self.conversion == Conversion::Split).then(|| &self.small[range.clone()]);
        (&self.big[range], small)
    }

    /// Products per k that the tensor cores add for `self` (X) times `w`: 3 when either is
    /// split (small·big, big·small, big·big), else 1.
    pub fn terms_per_k(&self, w: &Converted) -> usize {
        if self.conversion == Conversion::Split || w.conversion == Conversion::Split {
            3
        } else {
            1
        }
    }
}

/// Reference for output element (`row`, `col`) from converted operands: `value` = (v·s) + v with
/// v = Σ (the products the tensor cores form) + b in f64 (each product of two TF32 values is
/// exact in f64 and in fp32), `magnitude` = (1 + |s|)·(Σ |each product| + |b|).
pub fn emulated_element(
    x: &Converted,
    w: &Converted,
    bias: Option<&[f32]>,
    scale: f32,
    row: usize,
    col: usize,
) -> RefElement {
    let ((xb, xs), (wb, ws)) = (x.row(row), w.row(col));
    let mut v = 0.0f64;
    let mut mag = 0.0f64;
    let mut add = |p: f64| {
        v += p;
        mag += p.abs();
    };
    for k in 0..xb.len() {
        let (a, b) = (xb[k] as f64, wb[k] as f64);
        if let Some(xs) = xs {
            add(xs[k] as f64 * b);
        }
        if let Some(ws) = ws {
            add(a * ws[k] as f64);
        }
        add(a * b);
    }
    if let Some(b) = bias {
        add(b[col] as f64);
    }
    let s = scale as f64;
    RefElement { value: v * s + v, magnitude: (1.0 + s.abs()) * mag }
}

/// The per-element coefficient c of |out − emulated| ≤ c·magnitude (+ an absolute slack near
/// underflow) for `terms` addends (the products, plus 1 for a bias): γ(2·terms + 2) with the
/// truncation unit 2⁻²³, γ(j) = j·2⁻²³ / (1 − j·2⁻²³). Each addend may lose a unit of the
/// running sum when the tensor core aligns it, and each add another when it normalises, in any
/// order or tree (mma k-steps, split-K partials): γ(2·terms); the epilogue's two roundings one
/// more unit of the magnitude; one unit of slack (docs/EPILOGUE.md, "The emulating reference").
pub fn emulated_coeff(terms: usize) -> f64 {
    let nu = (2.0 * terms as f64 + 2.0) * 2f64.powi(-23);
    nu / (1.0 - nu)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_is_nearest_ties_away_and_keeps_specials() {
        let ulp = 2f32.powi(-10);
        assert_eq!(tf32_round(1.0 + ulp / 2.0), 1.0 + ulp, "a tie rounds away from zero");
        assert_eq!(tf32_round(-(1.0 + ulp / 2.0)), -(1.0 + ulp));
        assert_eq!(tf32_round(1.0 + 3.0 * ulp / 2.0), 1.0 + 2.0 * ulp, "away, not to even");
        assert_eq!(tf32_round(f32::from_bits(0x3f80_0fff)), 1.0, "below the tie: down");
        assert_eq!(tf32_round(f32::from_bits(0x3fff_ffff)), 2.0, "a carry into the exponent");
        assert_eq!(tf32_round(f32::MAX), f32::INFINITY, "the largest finite values round up to Inf");
        assert_eq!(tf32_round(f32::INFINITY), f32::INFINITY);
        assert_eq!(tf32_round(f32::NEG_INFINITY), f32::NEG_INFINITY);
        assert_eq!(tf32_round(f32::from_bits(0x7fc0_dead)).to_bits(), 0x7fc0_dead, "NaN kept");
        assert_eq!(tf32_round(-0.0).to_bits(), 0x8000_0000);
        assert_eq!(tf32_truncate(f32::from_bits(0x3fff_ffff)).to_bits(), 0x3fff_e000);
        assert_eq!(tf32_truncate(-1.9999999).to_bits(), 0xbfff_e000);
    }

    #[test]
    fn round_even_is_nearest_ties_to_even_and_keeps_specials() {
        let ulp = 2f32.powi(-10);
        assert_eq!(tf32_round_even(1.0 + ulp / 2.0), 1.0, "a tie below an even value: down");
        assert_eq!(tf32_round_even(1.0 + 3.0 * ulp / 2.0), 1.0 + 2.0 * ulp, "below an odd value: up");
        assert_eq!(tf32_round_even(-(1.0 + 3.0 * ulp / 2.0)), -(1.0 + 2.0 * ulp));
        assert_eq!(tf32_round_even(f32::from_bits(0x3f80_1001)), 1.0 + ulp, "past the tie: up");
        assert_eq!(tf32_round_even(f32::from_bits(0x3f80_0fff)), 1.0, "below the tie: down");
        assert_eq!(tf32_round_even(f32::from_bits(0x3fff_ffff)), 2.0, "a carry into the exponent");
        assert_eq!(tf32_round_even(f32::MAX), f32::INFINITY);
        assert_eq!(tf32_round_even(f32::from_bits(0x7fc0_dead)).to_bits(), 0x7fc0_dead, "NaN kept");
        assert_eq!(tf32_round_even(-0.0).to_bits(), 0x8000_0000);
    }

    #[test]
    fn split_is_exact_to_22_bits_and_its_parts_are_tf32() {
        let mut rng = super::super::reference::SplitMix64::new(3);
        for _ in 0..100_000 {
            let a = rng.sym(1000.0);
            let (big, small) = tf32_split(a);
            assert_eq!(big.to_bits() & !KEEP, 0);
            assert_eq!(small.to_bits() & !KEEP, 0);
            let err = (a as f64 - big as f64 - small as f64).abs();
            assert!(err <= 2f64.powi(-22) * (a as f64).abs(), "{a:e}: big {big:e} small {small:e}");
        }
    }

    #[test]
    fn emulated_element_forms_the_products_of_the_converted_operands() {
        // 1 + 2^-12 truncates to 1, rounds to 1, splits to (1, 2^-12).
        let x = [1.0 + 2f32.powi(-12), 3.0];
        let w = [1.0 + 2f32.powi(-12), -0.5];
        let (xm, wm) = (HostMatrix::new(&x, 1, 2), HostMatrix::new(&w, 1, 2));
        let e = |c| emulated_element(&Converted::new(xm, c), &Converted::new(wm, c), Some(&[0.25]), 0.5, 0, 0);
        let t = 2f64.powi(-12);
        assert_eq!(e(Conversion::Truncate).value, 1.5 * (1.0 - 1.5 + 0.25));
        assert_eq!(e(Conversion::Round).value, 1.5 * (1.0 - 1.5 + 0.25));
        // small·big + big·small + big·big: (1 + t)² without t².
        assert_eq!(e(Conversion::Split).value, 1.5 * (1.0 + 2.0 * t - 1.5 + 0.25));
        assert_eq!(e(Conversion::Split).magnitude, 1.5 * (1.0 + 2.0 * t + 1.5 + 0.25));
        let tr = Converted::new(xm, Conversion::Truncate);
        assert_eq!((tr.terms_per_k(&Converted::new(wm, Conversion::Split)), tr.terms_per_k(&tr)), (3, 1));
        assert!(emulated_coeff(8192) > 16386.0 * 2f64.powi(-23) && emulated_coeff(8192) < 2e-3);
    }
}
