//! Prepared weights for the raw entry: [`FusedGemm::prepare_weight_raw`] writes W, prepared as
//! [`FusedGemm::prepare_weight`] prepares it, into memory the caller owns (a framework's own
//! allocator, its stream order), and [`FusedGemm::run_raw_prepared`] reads it in place of W.
//! The caller keeps the memory alive and unchanged; the descriptor says where it is and what
//! it holds, and only this module makes one.

use std::ffi::c_void;

use cudarc::driver::sys;

use super::dispatch::{Call, EpilogueKind};
use super::launch::{self, RepackMode};
use super::raw::{byte_range, check_allocation, overlap, RawBuffer, RawGemm, RawMatrix, RawWeight};
use super::shape::Strided;
use super::validate;
use super::weight::WeightForm;
use super::{FusedGemm, Plan};
use crate::driver::pointer;
use crate::epilogue::Epilogue;
use crate::error::{Error, Operand, Result};
use crate::kernels::Precision;

/// Where [`FusedGemm::prepare_weight_raw`] put a prepared weight, and what it holds: N rows of
/// K elements at a stride of whole 128-byte lines, in the form of the preparing handle's
/// precision (as [`crate::PreparedWeight`]). Only `prepare_weight_raw` and
/// `raw_prepared_weight` make one, each after checking that its allocation is of the handle's
/// device and holds it; the calls that take one do not ask the driver again (their contract:
/// the memory stays allocated and unchanged). The memory stays the caller's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawPreparedWeight {
    pub(super) ptr: u64,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) ld: usize,
    pub(super) len: usize,
    pub(super) precision: Precision,
    pub(super) form: WeightForm,
    /// The device of the handle that made it: where its allocation was checked.
    pub(super) ordinal: usize,
}

impl RawPreparedWeight {
    /// Device address of the prepared values (a `CUdeviceptr`).
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// N: rows of W.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// K: columns of W.
    pub fn cols(&self) -> usize {
        self.cols
    }
    /// Row stride in elements: K rounded up to a multiple of 32.
    pub fn ld(&self) -> usize {
        self.ld
    }
    /// f32 elements it occupies from [`RawPreparedWeight::ptr`] on (both parts when split).
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether it occupies nothing (N or K is 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The precision it was prepared for (that of the handle that prepared it).
    pub fn precision(&self) -> Precision {
        self.precision
    }
    /// Whether it holds 3xTF32's two parts (a [`Precision::Tf32x3`] weight on an sm_90 device).
    pub fn is_split(&self) -> bool {
        self.form == WeightForm::Split
    }
}

impl FusedGemm {
    /// f32 elements [`FusedGemm::prepare_weight_raw`] writes for an N × K weight under this
    /// handle's precision on this device: N rows of K rounded up to a multiple of 32, twice
    /// that for a split ([`Precision::Tf32x3`] on sm_90) weight. Fails like the calls on a
    /// dimension the kernels cannot index.
    pub fn prepared_weight_len(&self, n: usize, k: usize) -> Result<usize> {
        let shape = validate::validate_weight(validate::Extent { rows: n, cols: k, ld: k.max(1), len: usize::MAX })?;
        Ok(self.prepared_layout(shape)?.2)
    }

    /// [`FusedGemm::prepare_weight`] into caller-owned memory, for callers that hold raw
    /// device addresses ([`FusedGemm::run_raw`]): reads W (N × K, any stride) and writes its
    /// prepared form to `dst` (16-byte aligned, at least [`FusedGemm::prepared_weight_len`]
    /// elements), queued on `stream` (a `CUstream`; nothing is allocated, nothing waits).
    /// Returns the descriptor [`FusedGemm::run_raw_prepared`] takes.
    ///
    /// Checked before anything is queued, as in `run_raw`: the shape, W's addresses and
    /// allocation, `dst`'s alignment ([`Error::MisalignedPreparedWeight`]), that its `len` is
    /// enough and that its allocation holds the `len` claimed ([`Error::BufferTooSmall`]), and
    /// that `dst` does not overlap W ([`Error::Overlapping`]).
    ///
    /// # Safety
    /// As [`FusedGemm::run_raw`]: `stream` is null or a live `CUstream`, the allocations stay
    /// allocated until the copy has run, and nothing writes W or touches `dst` meanwhile unless
    /// ordered after it.
    pub unsafe fn prepare_weight_raw(
        &self,
        stream: *mut c_void,
        w: RawMatrix,
        dst: RawBuffer,
    ) -> Result<RawPreparedWeight> {
        let ctx = &self.kernels.ctx;
        let stream = stream as sys::CUstream;
        // SAFETY: the caller vouches for the handle (contract above).
        if unsafe { pointer::stream_context(ctx, stream) }? != ctx.cu_ctx() {
            return Err(Error::WrongContext { operand: None });
        }
        let shape = validate::validate_weight(w.extent())?;
        let (ld, form, len) = self.prepared_layout(shape)?;
        if dst.ptr % 16 != 0 {
            return Err(Error::MisalignedPreparedWeight { address: dst.ptr });
        }
        if dst.len < len {
            return Err(Error::BufferTooSmall { operand: Operand::PreparedWeight, needed: len, len: dst.len });
        }
        check_allocation(ctx, Operand::W, w.ptr, w.reach())?;
        // The length claimed, as run_raw checks a workspace's: a claim the allocation does not
        // hold is a caller's bug even where this weight would fit.
        check_allocation(ctx, Operand::PreparedWeight, dst.ptr, dst.len)?;
        if len > 0 && w.reach() > 0 && overlap(byte_range(w.ptr, w.reach()), byte_range(dst.ptr, len)) {
            return Err(Error::Overlapping { operand: Operand::PreparedWeight, with: Operand::W });
        }
        if len > 0 {
            // SAFETY: a borrowed handle of this context (checked above; alive by the contract);
            // dropping the wrapper leaves the stream to its owner.
            let stream = unsafe { ctx.wrap_borrowed_stream(stream) };
            let src = Strided { addr: w.ptr, ld: w.ld };
            let to = Strided { addr: dst.ptr, ld };
            launch::repack(&self.kernels, &stream, src, shape.n, shape.k, to, RepackMode::to(form))?;
        }
        let precision = self.policy.precision;
        let ordinal = ctx.ordinal();
        Ok(RawPreparedWeight { ptr: dst.ptr, rows: shape.n, cols: shape.k, ld, len, precision, form, ordinal })
    }

    /// The descriptor of memory that [`FusedGemm::prepare_weight_raw`] filled for an N × K
    /// weight, by a handle of this one's precision on this device, at `ptr`: what a caller
    /// that keeps only the address (a framework's buffer) passes to
    /// [`FusedGemm::run_raw_prepared`]. Checks the shape, the alignment, and that the
    /// allocation at `ptr` is of this device and holds the length
    /// ([`FusedGemm::prepared_weight_len`]), as `prepare_weight_raw` checked its `dst`.
    ///
    /// # Safety
    /// `ptr` is where such a `prepare_weight_raw` wrote, and the values are unchanged since
    /// (anything else gives wrong numbers in `run_raw_prepared`).
    pub unsafe fn raw_prepared_weight(&self, ptr: u64, n: usize, k: usize) -> Result<RawPreparedWeight> {
        let shape = validate::validate_weight(validate::Extent { rows: n, cols: k, ld: k.max(1), len: usize::MAX })?;
        let (ld, form, len) = self.prepared_layout(shape)?;
        if ptr % 16 != 0 {
            return Err(Error::MisalignedPreparedWeight { address: ptr });
        }
        check_allocation(&self.kernels.ctx, Operand::PreparedWeight, ptr, len)?;
        let (precision, ordinal) = (self.policy.precision, self.kernels.ctx.ordinal());
        Ok(RawPreparedWeight { ptr, rows: n, cols: k, ld, len, precision, form, ordinal })
    }

    /// [`FusedGemm::workspace_len`] for the raw entry: the f32 elements of workspace
    /// [`FusedGemm::run_raw`] (or [`FusedGemm::run_raw_gemm`], any epilogue) would use with this
    /// X and W (0: none). Reads nothing at the addresses: it plans from the shapes, strides and
    /// alignments.
    pub fn workspace_len_raw(&self, x: RawMatrix, w: RawMatrix) -> Result<usize> {
        self.workspace_len_of(x, w, None)
    }

    /// [`FusedGemm::workspace_len_raw`] for [`FusedGemm::run_raw_prepared`] with `w`.
    pub fn workspace_len_raw_prepared(&self, x: RawMatrix, w: &RawPreparedWeight) -> Result<usize> {
        if w.precision != self.policy.precision {
            return Err(Error::PreparedForOtherPrecision { prepared: w.precision, asked: self.policy.precision });
        }
        let matrix = RawMatrix { ptr: w.ptr, rows: w.rows, cols: w.cols, ld: w.ld, len: w.len };
        self.workspace_len_of(x, matrix, Some(w.form))
    }

    fn workspace_len_of(&self, x: RawMatrix, w: RawMatrix, prepared: Option<WeightForm>) -> Result<usize> {
        let shape = validate::validate_operands(x.extent(), w.extent())?;
        if shape.m == 0 || shape.n == 0 {
            return Ok(0);
        }
        let x = Strided { addr: x.ptr, ld: x.ld };
        let w = Strided { addr: w.ptr, ld: w.ld };
        let call = Call { shape, x, w, w_prepared: prepared, workspace: usize::MAX, epilogue: EpilogueKind::Unrolled };
        self.workspace_need(call)
    }

    /// [`FusedGemm::run_raw`] with a weight that [`FusedGemm::prepare_weight_raw`] prepared, in
    /// place of W: what [`FusedGemm::run_with_workspace`] does with a
    /// [`crate::PreparedWeight`] (the sm_90 kernels read it as it is; no workspace is needed
    /// for W). A handle of another precision than the preparing one refuses it
    /// ([`Error::PreparedForOtherPrecision`]); the rest is checked as in `run_raw`.
    ///
    /// # Safety
    /// As [`FusedGemm::run_raw`], and `w`'s memory holds what `prepare_weight_raw` wrote to it,
    /// unchanged (anything else gives wrong numbers, never an access outside it).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run_raw_prepared(
        &self,
        stream: *mut c_void,
        x: RawMatrix,
        w: &RawPreparedWeight,
        bias: Option<RawBuffer>,
        scale: f32,
        out: RawMatrix,
        workspace: Option<RawBuffer>,
    ) -> Result<Option<Plan>> {
        let epilogue = Epilogue::scale_add(scale);
        let gemm = RawGemm { x, w: RawWeight::Prepared(w), bias, epilogue, out, workspace };
        // SAFETY: the caller's contract above is run_raw_gemm's.
        unsafe { self.run_raw_gemm(stream, &gemm) }
    }
}
