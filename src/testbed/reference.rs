//! The CPU reference: the same function in f64, for checking the GPU results.
//!
//! `value` is the exact-ish result; `magnitude` = (1 + |s|) · (Σ_k |x||w| + |b|) is the scale the
//! rounding error of any fp32/TF32 evaluation is proportional to, so tests can bound the error
//! per element: |out − value| ≤ c · u · magnitude (u = 2⁻¹¹ for TF32 round-to-nearest inputs).
//! [`element`] is the seed's `v·s + v`; [`epilogue_element`] any [`Epilogue`].

use crate::epilogue::{Activation, Epilogue};

/// SplitMix64: a small deterministic generator for test and benchmark inputs. Seed it from the
/// clock for fresh data and print the seed, so a failure can be replayed. Its floats are never 0.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// One of `items` (not empty).
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
    /// Uniform in (0, 1), never 0: odd multiples of 2⁻²⁴, exact in f32.
    pub fn unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) | 1) as f32 * (1.0 / 16_777_216.0)
    }
    /// Uniform in (−a, a), never 0 for a ≠ 0 (2·unit − 1 is an odd multiple of 2⁻²³).
    pub fn sym(&mut self, a: f32) -> f32 {
        (2.0 * self.unit() - 1.0) * a
    }
    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// A row-major host matrix view: `rows × cols` at stride `ld`.
#[derive(Clone, Copy, Debug)]
pub struct HostMatrix<'a> {
    /// The elements.
    pub data: &'a [f32],
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row stride in elements.
    pub ld: usize,
}

impl<'a> HostMatrix<'a> {
    /// A dense view.
    pub fn new(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self { data, rows, cols, ld: cols }
    }
    fn row(&self, r: usize) -> &'a [f32] {
        &self.data[r * self.ld..r * self.ld + self.cols]
    }
}

/// One reference element and its error scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RefElement {
    /// (v·s) + v with v = Σ x·w + b, in f64 (or another epilogue's `f(v) + β·c`:
    /// [`epilogue_element`]).
    pub value: f64,
    /// (1 + |s|) · (Σ|x||w| + |b|) (another epilogue's: [`epilogue_element`]).
    pub magnitude: f64,
}

/// `v = Σ_k x·w + b` of element (`row`, `col`) in f64, and `Σ_k |x||w| + |b|`.
fn linear(x: HostMatrix<'_>, w: HostMatrix<'_>, bias: Option<&[f32]>, row: usize, col: usize) -> (f64, f64) {
    let (xr, wr) = (x.row(row), w.row(col));
    let mut v = 0.0f64;
    let mut mag = 0.0f64;
    for (a, b) in xr.iter().zip(wr) {
        let p = *a as f64 * *b as f64;
        v += p;
        mag += p.abs();
    }
    if let Some(b) = bias {
        v += b[col] as f64;
        mag += (b[col] as f64).abs();
    }
    (v, mag)
}

/// Reference for output element (`row`, `col`). NaN and ±Inf propagate as IEEE arithmetic does.
pub fn element(
    x: HostMatrix<'_>,
    w: HostMatrix<'_>,
    bias: Option<&[f32]>,
    scale: f32,
    row: usize,
    col: usize,
) -> RefElement {
    let (v, mag) = linear(x, w, bias, row, col);
    let s = scale as f64;
    RefElement { value: v * s + v, magnitude: (1.0 + s.abs()) * mag }
}

/// Reference for output element (`row`, `col`) of any epilogue: `epilogue.reference(v, c)`
/// ([`Epilogue::reference`]: `f(v) + β·c`), `c` the element of `C` (ignored without a residual).
/// The magnitude is [`element`]'s for `v·s + v`, `Σ|x||w| + |b|` for the other `f` (each has
/// |f′| ≤ 1.13, so v's error reaches the output about unscaled), plus `|β·c|` with a residual.
pub fn epilogue_element<M>(
    x: HostMatrix<'_>,
    w: HostMatrix<'_>,
    bias: Option<&[f32]>,
    epilogue: &Epilogue<M>,
    c: f64,
    row: usize,
    col: usize,
) -> RefElement {
    let (v, mag) = linear(x, w, bias, row, col);
    let mag = match epilogue.activation {
        Activation::ScaleAdd(s) => (1.0 + (s as f64).abs()) * mag,
        _ => mag,
    };
    let residual = epilogue.residual.as_ref().map_or(0.0, |r| (r.beta as f64 * c).abs());
    RefElement { value: epilogue.reference(v, c), magnitude: mag + residual }
}

/// The full M × N reference (dense, row-major). Cost M·N·K: keep it for small problems and use
/// [`element`] on sampled rows and columns for large ones.
pub fn linear_scale_residual(
    x: HostMatrix<'_>,
    w: HostMatrix<'_>,
    bias: Option<&[f32]>,
    scale: f32,
) -> Vec<RefElement> {
    let mut out = Vec::with_capacity(x.rows * w.rows);
    for r in 0..x.rows {
        for c in 0..w.rows {
            out.push(element(x, w, bias, scale, r, c));
        }
    }
    out
}

/// ‖got − want‖ / ‖want‖ in f64 over (got, want) pairs: the benches' and races' error against
/// the f64 reference on sampled elements. A NaN anywhere (an element never written into a
/// poisoned output) makes it NaN.
pub fn relative_error(pairs: impl IntoIterator<Item = (f32, f64)>) -> f64 {
    let (e2, r2) = pairs.into_iter().fold((0.0f64, 0.0f64), |(e2, r2), (got, want)| {
        let e = f64::from(got) - want;
        (e2 + e * e, r2 + want * want)
    });
    (e2 / r2.max(f64::MIN_POSITIVE)).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_is_the_published_generator() {
        // Vigna's splitmix64.c from x = 0: a seed printed by a failing test replays its data.
        let mut r = SplitMix64::new(0);
        assert_eq!(
            [r.next_u64(), r.next_u64(), r.next_u64()],
            [0xe220_a839_7b1d_cdaf, 0x6e78_9e6a_a1b9_65f4, 0x06c4_5d18_8009_454f]
        );
    }

    #[test]
    fn draws_stay_in_range_and_cover_it() {
        let mut r = SplitMix64::new(7);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let v = r.below(7);
            assert!(v < 7);
            seen[v] = true;
            // unit: an odd multiple of 2^-24 in (0, 1), exactly representable.
            let u = r.unit();
            assert!(u > 0.0 && u < 1.0 && (u * 16_777_216.0) as u32 % 2 == 1, "{u}");
        }
        assert_eq!(r.below(1), 0);
        assert!(seen.iter().all(|&s| s), "{seen:?}");
        // Fisher–Yates: a permutation, and (two elements, many seeds) both orders occur, so the
        // last element may stay where it is.
        let mut v: Vec<u32> = (0..10).collect();
        SplitMix64::new(1).shuffle(&mut v);
        assert_ne!(v, (0..10).collect::<Vec<_>>());
        v.sort_unstable();
        assert_eq!(v, (0..10).collect::<Vec<_>>());
        let orders: std::collections::HashSet<[u8; 2]> = (0..64)
            .map(|seed| {
                let mut two = [0u8, 1];
                SplitMix64::new(seed).shuffle(&mut two);
                two
            })
            .collect();
        assert_eq!(orders.len(), 2, "{orders:?}");
    }

    #[test]
    fn relative_error_is_the_ratio_of_2_norms_and_keeps_nan() {
        // want (3, 4): ‖want‖ = 5; got off by (0, 1): ‖e‖ = 1.
        assert_eq!(relative_error([(3.0, 3.0), (5.0, 4.0)]), 0.2);
        assert_eq!(relative_error([(1.0, 1.0), (-2.0, -2.0)]), 0.0);
        assert!(relative_error([(f32::NAN, 1.0), (2.0, 2.0)]).is_nan());
        // An all-zero reference: exact gives 0, anything else a huge but finite ratio.
        assert_eq!(relative_error([(0.0, 0.0)]), 0.0);
        assert!(relative_error([(1.0, 0.0)]).is_finite() && relative_error([(1.0, 0.0)]) > 1e150);
    }

    #[test]
    fn matches_a_hand_computed_linear_with_epilogue() {
        // x = [[1, 2], [3, 4]], w = [[1, 0], [0.5, -1]], b = [0.25, -2], s = 0.5
        let x = [1.0, 2.0, 3.0, 4.0];
        let w = [1.0, 0.0, 0.5, -1.0];
        let b = [0.25, -2.0];
        let out = linear_scale_residual(HostMatrix::new(&x, 2, 2), HostMatrix::new(&w, 2, 2), Some(&b), 0.5);
        let v = [1.25, -3.5, 3.25, -4.5];
        for (o, v) in out.iter().zip(v) {
            assert_eq!(o.value, v * 1.5);
        }
        // magnitude for (0, 1): (1 + 0.5) * (|1*0.5| + |2*-1| + |-2|)
        assert_eq!(out[1].magnitude, 1.5 * 4.5);
    }

    #[test]
    fn epilogue_elements_apply_the_form_to_the_same_v() {
        // x = [[1, 2]], w = [[1, -1], [0.5, 0.25]], b = [0.25, -2]: v = [-0.75, -1.0].
        let (x, w, b) = ([1.0, 2.0], [1.0, -1.0, 0.5, 0.25], [0.25, -2.0]);
        let (xm, wm) = (HostMatrix::new(&x, 1, 2), HostMatrix::new(&w, 2, 2));
        let seed = epilogue_element(xm, wm, Some(&b), &Epilogue::<()>::scale_add(0.5), 0.0, 0, 0);
        assert_eq!(seed, element(xm, wm, Some(&b), 0.5, 0, 0));
        let relu = epilogue_element(xm, wm, Some(&b), &Epilogue::<()>::activation(Activation::Relu), 0.0, 0, 1);
        assert_eq!(relu, RefElement { value: 0.0, magnitude: 0.5 + 0.5 + 2.0 });
        let residual = Epilogue::<()>::linear().with_residual((), -2.0);
        let r = epilogue_element(xm, wm, Some(&b), &residual, 3.0, 0, 0);
        assert_eq!(r, RefElement { value: -0.75 - 6.0, magnitude: 1.0 + 2.0 + 0.25 + 6.0 });
    }

    #[test]
    fn honours_leading_dimensions_and_no_bias() {
        // x is 2 x 1 inside a 2 x 3 buffer; padding holds NaN that must never be read.
        let x = [2.0, f32::NAN, f32::NAN, 3.0, f32::NAN, f32::NAN];
        let xv = HostMatrix { data: &x, rows: 2, cols: 1, ld: 3 };
        let w = [4.0];
        let e = element(xv, HostMatrix::new(&w, 1, 1), None, -1.0, 1, 0);
        assert_eq!(e.value, 0.0); // v*s + v with s = -1
        assert_eq!(e.magnitude, 2.0 * 12.0);
    }

    #[test]
    fn random_inputs_are_never_zero_and_stay_in_range() {
        let mut rng = SplitMix64::new(7);
        for _ in 0..10_000 {
            let (u, v) = (rng.unit(), rng.sym(0.25));
            assert!(u > 0.0 && u < 1.0, "{u}");
            assert!(v != 0.0 && v.abs() < 0.25, "{v}");
        }
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        assert_eq!(a.next_u64(), b.next_u64(), "same seed, same stream");
    }

    #[test]
    fn propagates_nan_and_inf() {
        let x = [f32::INFINITY, 1.0];
        let w = [1.0, 1.0];
        let e = element(HostMatrix::new(&x, 1, 2), HostMatrix::new(&w, 1, 2), None, 0.5, 0, 0);
        assert_eq!(e.value, f64::INFINITY);
        let b = [f32::NEG_INFINITY];
        let e = element(HostMatrix::new(&x, 1, 2), HostMatrix::new(&w, 1, 2), Some(&b), 0.5, 0, 0);
        assert!(e.value.is_nan());
    }
}
