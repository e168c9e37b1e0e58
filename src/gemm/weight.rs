//! W as [`crate::FusedGemm`] takes it: the caller's N × K matrix as it is (a [`MatrixRef`]), or a
//! [`PreparedWeight`] — copied once into 128-byte rows and converted as the handle's precision
//! wants (rounded to TF32, or split into 3xTF32's two parts), so that no call has to repack or
//! convert it again. Weights are static across calls; a layer prepares its own
//! ([`crate::Linear`]).

use cudarc::driver::CudaSlice;

use crate::kernels::Precision;
use crate::matrix::MatrixRef;

/// What W's values are when they reach the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WeightForm {
    /// The fp32 values as the caller gave them.
    Raw,
    /// Rounded to TF32, to nearest, ties away.
    Rounded,
    /// 3xTF32's parts: the N rows of big parts (rounded to TF32, so also a [`WeightForm::Rounded`]
    /// W), then, `N · ld` elements further, the N rows of small parts.
    Split,
}

/// W copied for the kernels by [`crate::FusedGemm::prepare_weight`]: N rows of K elements at a
/// stride of whole 128-byte lines, padding zeroed, in the form the preparing handle's precision
/// reads fastest: rounded to TF32 for [`Precision::Tf32`]; the bits as they were for
/// [`Precision::Tf32Truncated`]; for [`Precision::Tf32x3`], split into big and small TF32 parts
/// (two N-row matrices, one after the other) on an sm_90 device, whose kernels split only X,
/// and the bits as they were elsewhere (the mma.sync kernels split both operands). Any call of a
/// handle with the same precision accepts it in place of W: the sm_90 kernels then read it
/// without a repack into the workspace. Immutable once made; `Send + Sync` like the buffer it
/// owns.
#[derive(Debug)]
pub struct PreparedWeight {
    data: CudaSlice<f32>,
    rows: usize,
    cols: usize,
    ld: usize,
    precision: Precision,
    form: WeightForm,
}

impl PreparedWeight {
    pub(crate) fn new(
        data: CudaSlice<f32>,
        rows: usize,
        cols: usize,
        ld: usize,
        precision: Precision,
        form: WeightForm,
    ) -> Self {
        debug_assert!(data.len() >= rows * ld * if form == WeightForm::Split { 2 } else { 1 } && ld >= cols);
        Self { data, rows, cols, ld, precision, form }
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
    /// The precision it was prepared for (that of the handle that prepared it).
    pub fn precision(&self) -> Precision {
        self.precision
    }
    /// Whether it holds 3xTF32's two parts (a [`Precision::Tf32x3`] weight on an sm_90 device):
    /// [`PreparedWeight::matrix`] is then the big parts.
    pub fn is_split(&self) -> bool {
        self.form == WeightForm::Split
    }
    /// The prepared values as an N × K matrix view (stride [`PreparedWeight::ld`]); of a split
    /// weight, the big parts (the small parts follow in the same allocation).
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
    /// W as a matrix view, and what it was prepared as (`None`: as the caller gave it).
    #[doc(hidden)]
    fn view(&self) -> (MatrixRef<'_>, Option<Prepared>);
}

/// The precision a prepared weight serves and the form its values take.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Prepared {
    pub(crate) precision: Precision,
    pub(crate) form: WeightForm,
}

impl Weight for MatrixRef<'_> {
    fn view(&self) -> (MatrixRef<'_>, Option<Prepared>) {
        (MatrixRef::with_ld(self.data.slice(0..self.data.len()), self.rows, self.cols, self.ld), None)
    }
}

impl Weight for PreparedWeight {
    fn view(&self) -> (MatrixRef<'_>, Option<Prepared>) {
        (self.matrix(), Some(Prepared { precision: self.precision, form: self.form }))
    }
}
