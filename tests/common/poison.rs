//! Poison: the bits written around every view (input padding, the whole output buffer), how a
//! view lies in its buffer, and the checks that a kernel wrote every element of its output view
//! and nothing else.

use super::inputs::par_map;

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

/// Elements a `rows × cols` view of stride `ld` spans: `(rows − 1)·ld + cols` (0 when empty).
pub fn extent(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// A host buffer of `off + rows·ld + TAIL` elements holding the dense `rows × cols` matrix at
/// `off` with stride `ld`, every other element (offset, ld padding, tail) [`input_pad`].
pub fn lay_out(dense: &[f32], rows: usize, cols: usize, ld: usize, off: usize) -> Vec<f32> {
    assert_eq!(dense.len(), rows * cols);
    let mut buf = vec![input_pad(); off + rows * ld + TAIL];
    for r in 0..rows {
        buf[off + r * ld..off + r * ld + cols].copy_from_slice(&dense[r * cols..(r + 1) * cols]);
    }
    buf
}
