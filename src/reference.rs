//! The CPU reference: the same function in f64, for checking the GPU results.
//!
//! `value` is the exact-ish result; `magnitude` = (1 + |s|) · (Σ_k |x||w| + |b|) is the scale the
//! rounding error of any fp32/TF32 evaluation is proportional to, so tests can bound the error
//! per element: |out − value| ≤ c · u · magnitude (u = 2⁻¹¹ for TF32 round-to-nearest inputs).

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
    /// (v·s) + v with v = Σ x·w + b, in f64.
    pub value: f64,
    /// (1 + |s|) · (Σ|x||w| + |b|).
    pub magnitude: f64,
}

/// Reference for output element (`row`, `col`). NaN and ±Inf propagate as IEEE arithmetic does.
pub fn element(x: HostMatrix<'_>, w: HostMatrix<'_>, bias: Option<&[f32]>, scale: f32, row: usize, col: usize) -> RefElement {
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
    let s = scale as f64;
    RefElement { value: v * s + v, magnitude: (1.0 + s.abs()) * mag }
}

/// The full M × N reference (dense, row-major). Cost M·N·K: keep it for small problems and use
/// [`element`] on sampled rows and columns for large ones.
pub fn linear_scale_residual(x: HostMatrix<'_>, w: HostMatrix<'_>, bias: Option<&[f32]>, scale: f32) -> Vec<RefElement> {
    let mut out = Vec::with_capacity(x.rows * w.rows);
    for r in 0..x.rows {
        for c in 0..w.rows {
            out.push(element(x, w, bias, scale, r, c));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
