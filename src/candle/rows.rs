//! A candle layout as the kernels' row-major matrix: the batch dimensions flattened into rows,
//! as candle's `Linear` does, when that needs no copy.

use candle_core::{CudaStorage, Layout};

use super::msg;
use crate::matrix::MatrixRef;

/// `(rows, ld)` when a layout of `(…, k)` is `rows` rows of `k` unit-stride elements, one
/// stride `ld ≥ k` apart: its batch dimensions (those of size 1 aside, whose stride is never
/// used) nest like a contiguous tensor's. `None`: the tensor must be made contiguous first (a
/// transposed or broadcast tensor), or it is not `(…, k)`.
pub(crate) fn rows_of(layout: &Layout, k: usize) -> Option<(usize, usize)> {
    let (dims, strides) = (layout.dims(), layout.stride());
    let (&last, batch) = dims.split_last()?;
    if last != k || (k > 1 && strides[dims.len() - 1] != 1) {
        return None;
    }
    let rows = batch.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))?;
    // Innermost batch dimension outward: each one's stride is the next one's span.
    let mut ld = None;
    let mut span = 0usize;
    for (&d, &stride) in batch.iter().zip(strides).rev() {
        if d == 1 {
            continue;
        }
        match ld {
            None => ld = Some(stride),
            Some(_) if stride != span => return None,
            Some(_) => {}
        }
        span = stride.checked_mul(d)?;
    }
    match ld {
        // At most one row: its stride is never used.
        None => Some((rows, k)),
        Some(ld) if ld >= k => Some((rows, ld)),
        Some(_) => None,
    }
}

/// The kernels' view of `what` (f32 on the device, `(…, cols)`) as candle hands it to a custom
/// op: its rows read in place from the layout's start. A layout [`rows_of`] refuses is a candle
/// error (the callers made such a tensor contiguous first).
pub(crate) fn matrix<'a>(
    storage: &'a CudaStorage,
    layout: &Layout,
    cols: usize,
    what: &str,
) -> candle_core::Result<MatrixRef<'a>> {
    let (rows, ld) = rows_of(layout, cols)
        .ok_or_else(|| msg(format!("FusedLinear: {what}'s layout {layout:?} is not rows of {cols} elements")))?;
    let view = storage
        .as_cuda_slice::<f32>()?
        .try_slice(layout.start_offset()..)
        .ok_or_else(|| msg(format!("FusedLinear: {what}'s offset is past its storage")))?;
    Ok(MatrixRef::with_ld(view, rows, cols, ld))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(dims: &[usize], strides: &[usize], offset: usize) -> Layout {
        Layout::new(dims.into(), strides.to_vec(), offset)
    }

    #[test]
    fn contiguous_batches_flatten_into_rows() {
        assert_eq!(rows_of(&Layout::contiguous((3, 5, 7)), 7), Some((15, 7)));
        assert_eq!(rows_of(&Layout::contiguous((2, 3, 5, 7)), 7), Some((30, 7)));
        assert_eq!(rows_of(&Layout::contiguous((4, 7)), 7), Some((4, 7)));
        // One row, rank 1: candle's Linear on a vector.
        assert_eq!(rows_of(&Layout::contiguous(7), 7), Some((1, 7)));
        // Empty batches: no rows.
        assert_eq!(rows_of(&Layout::contiguous((0, 7)), 7), Some((0, 7)));
        // Not (…, k).
        assert_eq!(rows_of(&Layout::contiguous((4, 8)), 7), None);
        assert_eq!(rows_of(&Layout::contiguous(()), 1), None);
    }

    #[test]
    fn evenly_spaced_rows_run_in_place() {
        // A narrow of the last dimension of a (2, 3, 10) tensor to 7 columns at offset 2.
        assert_eq!(rows_of(&layout(&[2, 3, 7], &[30, 10, 1], 2), 7), Some((6, 10)));
        // Every other row of a (8, 7) tensor.
        assert_eq!(rows_of(&layout(&[4, 7], &[14, 1], 0), 7), Some((4, 14)));
        // Size-1 dimensions with any stride are skipped.
        assert_eq!(rows_of(&layout(&[1, 3, 1, 7], &[999, 7, 5, 1], 0), 7), Some((3, 7)));
        // K = 1: the column stride is never used.
        assert_eq!(rows_of(&layout(&[5, 1], &[1, 5], 0), 1), Some((5, 1)));
    }

    #[test]
    fn other_layouts_are_copied_first() {
        // Transposed: columns are not unit-stride.
        assert_eq!(rows_of(&Layout::contiguous((7, 4)).transpose(0, 1).expect("transpose"), 7), None);
        // Batch dimensions that do not nest: (2, 3, 7) with the first two swapped.
        assert_eq!(rows_of(&layout(&[2, 3, 7], &[7, 14, 1], 0), 7), None);
        // Broadcast rows (stride 0) would overlap.
        assert_eq!(rows_of(&layout(&[4, 7], &[0, 1], 0), 7), None);
        // Rows closer than k apart would overlap.
        assert_eq!(rows_of(&layout(&[4, 7], &[5, 1], 0), 7), None);
    }
}
