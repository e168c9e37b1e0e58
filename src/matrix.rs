//! Row-major matrix views over cudarc device memory: a buffer, a shape and a row stride.
//!
//! Constructing a view checks nothing; every call that takes one validates it (shape against the
//! other operands, `ld >= cols`, buffer length) and names the operand in its error.

use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, DevicePtr};

/// A read-only `rows × cols` row-major matrix in device memory with row stride `ld` elements.
/// Row `r` starts at element `r * ld` of `data`; elements between `cols` and `ld` are not read.
#[derive(Debug)]
pub struct MatrixRef<'a> {
    pub(crate) data: CudaView<'a, f32>,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) ld: usize,
}

impl<'a> MatrixRef<'a> {
    /// A dense view (`ld == cols`).
    pub fn new(data: CudaView<'a, f32>, rows: usize, cols: usize) -> Self {
        Self { data, rows, cols, ld: cols }
    }

    /// A strided view, e.g. a column block of a wider matrix.
    pub fn with_ld(data: CudaView<'a, f32>, rows: usize, cols: usize, ld: usize) -> Self {
        Self { data, rows, cols, ld }
    }

    /// A dense view of a whole slice.
    pub fn from_slice(data: &'a CudaSlice<f32>, rows: usize, cols: usize) -> Self {
        Self::new(data.as_view(), rows, cols)
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Row stride in elements.
    pub fn ld(&self) -> usize {
        self.ld
    }

    /// The first element's address in f32 elements, modulo 4: whether rows can start 16-byte
    /// aligned (with `ld`), which decides a repack.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) fn offset_mod_4(&self, stream: &CudaStream) -> usize {
        let (address, _record) = self.data.device_ptr(stream);
        ((address / 4) % 4) as usize
    }
}

/// A writable `rows × cols` row-major matrix in device memory with row stride `ld` elements.
/// Only the `rows × cols` elements are written; the padding between `cols` and `ld` is untouched.
#[derive(Debug)]
pub struct MatrixMut<'a> {
    pub(crate) data: CudaViewMut<'a, f32>,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) ld: usize,
}

impl<'a> MatrixMut<'a> {
    /// A dense view (`ld == cols`).
    pub fn new(data: CudaViewMut<'a, f32>, rows: usize, cols: usize) -> Self {
        Self { data, rows, cols, ld: cols }
    }

    /// A strided view.
    pub fn with_ld(data: CudaViewMut<'a, f32>, rows: usize, cols: usize, ld: usize) -> Self {
        Self { data, rows, cols, ld }
    }

    /// A dense view of a whole slice.
    pub fn from_slice(data: &'a mut CudaSlice<f32>, rows: usize, cols: usize) -> Self {
        Self::new(data.as_view_mut(), rows, cols)
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Row stride in elements.
    pub fn ld(&self) -> usize {
        self.ld
    }

    /// A read-only view of the same elements, for the calls that only look at the output
    /// ([`crate::FusedGemm::plan`]).
    pub fn view(&self) -> MatrixRef<'_> {
        MatrixRef { data: self.data.as_view(), rows: self.rows, cols: self.cols, ld: self.ld }
    }
}
