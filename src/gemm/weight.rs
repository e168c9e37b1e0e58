//! W as [`crate::FusedGemm`] takes it: the caller's N × K matrix as it is (a [`MatrixRef`]), or a
//! [`PreparedWeight`] — copied once into 128-byte rows and rounded to TF32 as the handle rounds,
//! so that no call has to repack or round it again. Weights are static across calls; a layer
//! prepares its own ([`crate::Linear`]).

use cudarc::driver::CudaSlice;

use crate::kernels::Precision;
use crate::matrix::MatrixRef;

/// W copied for the kernels by [`crate::FusedGemm::prepare_weight`]: N rows of K elements at a
/// stride of whole 128-byte lines, padding zeroed, every value rounded to TF32 to nearest when
/// the preparing handle rounds to nearest (the bits as they were when it truncates). Any call
/// of a handle with the same rounding accepts it in place of W: the sm_90 kernels then read it
/// without a repack into the workspace. Immutable once made; `Send + Sync` like the buffer it
/// owns.
#[derive(Debug)]
pub struct PreparedWeight {
    data: CudaSlice<f32>,
    rows: usize,
    cols: usize,
    ld: usize,
    precision: Precision,
}

impl PreparedWeight {
    pub(crate) fn new(data: CudaSlice<f32>, rows: usize, cols: usize, ld: usize, precision: Precision) -> Self {
        debug_assert!(data.len() >= rows * ld && ld >= cols);
        Self { data, rows, cols, ld, precision }
    }

    /// N: rows of W (output features).
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// K: columns of W (input features).
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Row stride in elements: K rounded up to a multiple of 32.
    pub fn ld(&self) -> usize {
        self.ld
    }
    /// The rounding it was prepared for (that of the handle that prepared it).
    pub fn precision(&self) -> Precision {
        self.precision
    }
    /// The prepared values as an N × K matrix view (stride [`PreparedWeight::ld`]).
    pub fn matrix(&self) -> MatrixRef<'_> {
        MatrixRef::with_ld(self.data.slice(0..self.rows * self.ld), self.rows, self.cols, self.ld)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::matrix::MatrixRef<'_> {}
    impl Sealed for super::PreparedWeight {}
}

/// What the calls of [`crate::FusedGemm`] accept as W: a [`MatrixRef`] (N × K, any stride) or a
/// [`PreparedWeight`]. Sealed: these two are all there is.
pub trait Weight: sealed::Sealed {
    /// W as a matrix view, and the rounding it was prepared for (`None`: as the caller gave it).
    #[doc(hidden)]
    fn view(&self) -> (MatrixRef<'_>, Option<Precision>);
}

impl Weight for MatrixRef<'_> {
    fn view(&self) -> (MatrixRef<'_>, Option<Precision>) {
        (MatrixRef::with_ld(self.data.slice(0..self.data.len()), self.rows, self.cols, self.ld), None)
    }
}

impl Weight for PreparedWeight {
    fn view(&self) -> (MatrixRef<'_>, Option<Precision>) {
        (self.matrix(), Some(self.precision))
    }
}
