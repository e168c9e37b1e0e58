//! The checks every call makes before anything is launched: shapes agree, dimensions fit the
//! kernels' 32-bit indices, every operand fits its buffer. Pure functions on lengths, so they
//! are unit-tested without a GPU.

use super::shape::Shape;
use crate::error::{Error, Operand, Result};

/// Largest M, N or K: the kernels index with 32-bit ints and round up to whole tiles (at most
/// 2·128 rows past M for a 2-CTA cluster, 31 columns past K), which must not overflow.
pub(crate) const MAX_DIM: usize = i32::MAX as usize - 1023;

/// Largest leading dimension: the kernels and TMA take row strides in bytes as 64-bit values,
/// and a row stride must stay far from overflowing them (`ld · 4` and `row · ld`).
pub(crate) const MAX_LD: usize = 1 << 48;

/// An operand as validation sees it: `rows × cols` at stride `ld` in a buffer of `len` elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extent {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub len: usize,
}

/// Checks that x (M×K), w (N×K), bias (N) and out (M×N) agree and fit their buffers.
pub(crate) fn validate_shapes(x: Extent, w: Extent, bias_len: Option<usize>, out: Extent) -> Result<Shape> {
    let (m, k, n) = (x.rows, x.cols, w.rows);
    if w.cols != k {
        return Err(Error::ShapeMismatch { what: "w.cols (K) vs x.cols (K)", expected: k, found: w.cols });
    }
    if out.rows != m {
        return Err(Error::ShapeMismatch { what: "out.rows (M) vs x.rows (M)", expected: m, found: out.rows });
    }
    if out.cols != n {
        return Err(Error::ShapeMismatch { what: "out.cols (N) vs w.rows (N)", expected: n, found: out.cols });
    }
    if let Some(len) = bias_len {
        if len != n {
            return Err(Error::ShapeMismatch { what: "bias.len() (N) vs w.rows (N)", expected: n, found: len });
        }
    }
    check_dims(Shape { m, n, k })?;
    check_extent(Operand::X, x)?;
    check_extent(Operand::W, w)?;
    check_extent(Operand::Out, out)?;
    Ok(Shape { m, n, k })
}

/// Checks that a residual source C is M × N and fits its buffer.
pub(crate) fn validate_residual(shape: Shape, c: Extent) -> Result<()> {
    if c.rows != shape.m {
        return Err(Error::ShapeMismatch { what: "residual.rows (M) vs x.rows (M)", expected: shape.m, found: c.rows });
    }
    if c.cols != shape.n {
        return Err(Error::ShapeMismatch { what: "residual.cols (N) vs w.rows (N)", expected: shape.n, found: c.cols });
    }
    check_extent(Operand::Residual, c)
}

/// Checks that x (M×K) and w (N×K) agree and fit their buffers: what sizing a workspace needs.
pub(crate) fn validate_operands(x: Extent, w: Extent) -> Result<Shape> {
    if w.cols != x.cols {
        return Err(Error::ShapeMismatch { what: "w.cols (K) vs x.cols (K)", expected: x.cols, found: w.cols });
    }
    let shape = Shape { m: x.rows, n: w.rows, k: x.cols };
    check_dims(shape)?;
    check_extent(Operand::X, x)?;
    check_extent(Operand::W, w)?;
    Ok(shape)
}

/// Checks that w (N×K) fits its buffer and the kernels' indices: what preparing a weight needs.
pub(crate) fn validate_weight(w: Extent) -> Result<Shape> {
    let shape = Shape { m: 0, n: w.rows, k: w.cols };
    check_dims(shape)?;
    check_extent(Operand::W, w)?;
    Ok(shape)
}

/// M, N and K within [`MAX_DIM`].
pub(crate) fn check_dims(s: Shape) -> Result<()> {
    for (what, value) in [("M", s.m), ("N", s.n), ("K", s.k)] {
        if value > MAX_DIM {
            return Err(Error::DimensionTooLarge { what, value, max: MAX_DIM });
        }
    }
    Ok(())
}

/// `rows` rows of `cols` elements at stride `ld` must fit in `len` elements.
fn check_extent(operand: Operand, Extent { rows, cols, ld, len }: Extent) -> Result<()> {
    if ld < cols {
        return Err(Error::LeadingDimension { operand, ld, cols });
    }
    if ld > MAX_LD {
        let what = match operand {
            Operand::X => "ldx",
            Operand::W => "ldw",
            Operand::Residual => "ldc",
            _ => "ldo",
        };
        return Err(Error::DimensionTooLarge { what, value: ld, max: MAX_LD });
    }
    let needed =
        if rows == 0 || cols == 0 { Some(0) } else { (rows - 1).checked_mul(ld).and_then(|v| v.checked_add(cols)) };
    // An extent past usize::MAX fits no buffer, not even one claiming usize::MAX elements.
    match needed {
        Some(needed) if needed <= len => {}
        _ => return Err(Error::BufferTooSmall { operand, needed: needed.unwrap_or(usize::MAX), len }),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(rows: usize, cols: usize) -> Extent {
        Extent { rows, cols, ld: cols, len: rows * cols }
    }

    #[test]
    fn accepts_matching_dense_and_strided_shapes() {
        let s = validate_shapes(dense(5, 7), dense(3, 7), Some(3), dense(5, 3)).unwrap();
        assert_eq!((s.m, s.n, s.k), (5, 3, 7));
        // Strided: last row needs only `cols` elements.
        let x = Extent { rows: 5, cols: 7, ld: 10, len: 4 * 10 + 7 };
        assert!(validate_shapes(x, dense(3, 7), None, dense(5, 3)).is_ok());
        // K = 0 and M = 0 are valid.
        assert!(validate_shapes(dense(5, 0), dense(3, 0), Some(3), dense(5, 3)).is_ok());
        assert!(validate_shapes(dense(0, 7), dense(3, 7), None, dense(0, 3)).is_ok());
    }

    #[test]
    fn rejects_each_mismatch_with_its_own_variant() {
        let e = validate_shapes(dense(5, 7), dense(3, 8), None, dense(5, 3)).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { expected: 7, found: 8, .. }), "{e}");
        let e = validate_shapes(dense(5, 7), dense(3, 7), None, dense(4, 3)).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { expected: 5, found: 4, .. }), "{e}");
        let e = validate_shapes(dense(5, 7), dense(3, 7), None, dense(5, 4)).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { expected: 3, found: 4, .. }), "{e}");
        let e = validate_shapes(dense(5, 7), dense(3, 7), Some(4), dense(5, 3)).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { expected: 3, found: 4, .. }), "{e}");
        assert!(e.to_string().contains("bias"), "{e}");
    }

    #[test]
    fn rejects_short_buffers_and_small_leading_dimensions() {
        let short = Extent { rows: 5, cols: 7, ld: 7, len: 34 };
        let e = validate_shapes(short, dense(3, 7), None, dense(5, 3)).unwrap_err();
        assert!(matches!(e, Error::BufferTooSmall { operand: Operand::X, needed: 35, len: 34 }), "{e}");
        let e =
            validate_shapes(dense(5, 7), Extent { rows: 3, cols: 7, ld: 6, len: 100 }, None, dense(5, 3)).unwrap_err();
        assert!(matches!(e, Error::LeadingDimension { operand: Operand::W, ld: 6, cols: 7 }), "{e}");
        let out = Extent { rows: 5, cols: 3, ld: 4, len: 18 };
        let e = validate_shapes(dense(5, 7), dense(3, 7), None, out).unwrap_err();
        assert!(matches!(e, Error::BufferTooSmall { operand: Operand::Out, needed: 19, len: 18 }), "{e}");
        assert!(e.to_string().starts_with("out:"), "{e}");
        // Overflowing extents are "too small", never a wrap-around, whatever length is claimed.
        let huge = Extent { rows: usize::MAX / 2, cols: 1, ld: 4, len: 8 };
        assert!(validate_shapes(huge, Extent { rows: 1, cols: 1, ld: 1, len: 1 }, None, huge).is_err());
        let w = Extent { rows: 2_147_482_622, cols: 34, ld: MAX_LD - 2, len: usize::MAX };
        let e = validate_shapes(dense(3, 34), w, None, dense(3, 2_147_482_622)).unwrap_err();
        assert!(matches!(e, Error::BufferTooSmall { operand: Operand::W, needed: usize::MAX, .. }), "{e}");
    }

    #[test]
    fn a_one_row_view_cannot_carry_a_huge_leading_dimension() {
        // One row needs only `cols` elements whatever ld is; ld · 4 must still not overflow.
        let x = Extent { rows: 1, cols: 4, ld: usize::MAX / 2, len: 4 };
        let e = validate_shapes(x, dense(2, 4), None, dense(1, 2)).unwrap_err();
        assert!(matches!(e, Error::DimensionTooLarge { what: "ldx", .. }), "{e}");
        let x = Extent { rows: 1, cols: 4, ld: MAX_LD, len: 4 };
        assert!(validate_shapes(x, dense(2, 4), None, dense(1, 2)).is_ok());
    }

    #[test]
    fn max_dim_leaves_room_for_the_kernels_round_ups() {
        // The kernels index with i32 up to 2·128 rows past M (a 2-CTA cluster of 128-row
        // tiles) and 31 columns past K (a 32-column k-block): both must still fit.
        assert!(MAX_DIM + 2 * 128 <= i32::MAX as usize);
        assert!(MAX_DIM + 31 <= i32::MAX as usize);
        // MAX_DIM itself is valid in every position; one more is refused, named.
        assert!(check_dims(Shape { m: MAX_DIM, n: MAX_DIM, k: MAX_DIM }).is_ok());
        for (s, name) in [
            (Shape { m: MAX_DIM + 1, n: 1, k: 1 }, "M"),
            (Shape { m: 1, n: MAX_DIM + 1, k: 1 }, "N"),
            (Shape { m: 1, n: 1, k: MAX_DIM + 1 }, "K"),
        ] {
            let e = check_dims(s).unwrap_err();
            assert!(
                matches!(e, Error::DimensionTooLarge { what, value, max: MAX_DIM } if what == name && value == MAX_DIM + 1),
                "{e}"
            );
        }
    }

    #[test]
    fn a_huge_leading_dimension_is_named_by_its_operand() {
        let huge = |rows: usize, cols: usize| Extent { rows, cols, ld: MAX_LD + 1, len: usize::MAX };
        for (x, w, out, name) in [
            (huge(2, 4), dense(3, 4), dense(2, 3), "ldx"),
            (dense(2, 4), huge(3, 4), dense(2, 3), "ldw"),
            (dense(2, 4), dense(3, 4), huge(2, 3), "ldo"),
        ] {
            let e = validate_shapes(x, w, None, out).unwrap_err();
            assert!(
                matches!(e, Error::DimensionTooLarge { what, value, max: MAX_LD } if what == name && value == MAX_LD + 1),
                "{e}"
            );
        }
    }

    #[test]
    fn rejects_dimensions_past_i32() {
        let big = MAX_DIM + 1;
        let x = Extent { rows: 1, cols: big, ld: big, len: big };
        let w = Extent { rows: 1, cols: big, ld: big, len: big };
        let e = validate_shapes(x, w, None, dense(1, 1)).unwrap_err();
        assert!(matches!(e, Error::DimensionTooLarge { what: "K", .. }), "{e}");
    }
}
