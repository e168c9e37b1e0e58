//! The entry for callers that hold raw device addresses and a raw stream handle rather than
//! this crate's cudarc types (a framework on another cudarc version, or none): everything the
//! safe calls check, plus what the driver can say about the addresses, then the same plan and
//! launch.

use std::ffi::c_void;

use cudarc::driver::{sys, CudaContext};

use super::dispatch::{Call, EpilogueKind};
use super::launch::{self, Addresses};
use super::raw_prepared::RawPreparedWeight;
use super::shape::Strided;
use super::validate::{self, Extent};
use super::weight::WeightForm;
use super::{FusedGemm, Plan};
use crate::driver::pointer;
use crate::epilogue::{Epilogue, Residual, Source};
use crate::error::{Error, Operand, Result};

/// A row-major f32 matrix at a raw device address: `rows × cols` at a row stride of `ld`
/// elements, in an allocation with at least `len` elements from `ptr` on (what the caller
/// vouches for; the driver's record of the allocation is checked too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawMatrix {
    /// Device address of element (0, 0) (a `CUdeviceptr`).
    pub ptr: u64,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Row stride in elements.
    pub ld: usize,
    /// f32 elements available from `ptr` on.
    pub len: usize,
}

impl RawMatrix {
    /// A dense `rows × cols` matrix of exactly `rows · cols` elements (saturating).
    pub fn dense(ptr: u64, rows: usize, cols: usize) -> Self {
        Self { ptr, rows, cols, ld: cols, len: rows.saturating_mul(cols) }
    }

    pub(super) fn extent(&self) -> Extent {
        Extent { rows: self.rows, cols: self.cols, ld: self.ld, len: self.len }
    }

    /// Elements from `ptr` to one past the last one the shape reaches (saturating; exact for a
    /// validated extent).
    pub(super) fn reach(&self) -> usize {
        match (self.rows, self.cols) {
            (0, _) | (_, 0) => 0,
            (r, c) => (r - 1).saturating_mul(self.ld).saturating_add(c),
        }
    }
}

/// `len` f32 elements at a raw device address (the bias: its first N are read; the workspace:
/// all `len` may be used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawBuffer {
    /// Device address of the first element (a `CUdeviceptr`).
    pub ptr: u64,
    /// f32 elements available from `ptr` on.
    pub len: usize,
}

impl FusedGemm {
    /// [`FusedGemm::run_with_workspace`] on raw device addresses and a raw stream handle, for
    /// callers that do not hold this crate's cudarc types. `bias`, if any, holds at least N
    /// elements (its first N are read: a raw address comes with what is available behind it,
    /// where the safe calls take a view of exactly N);
    /// `workspace`, if any, is sized by [`FusedGemm::max_workspace_len`] (or
    /// [`FusedGemm::plan_with_workspace`] for less) and starts 16-byte aligned. `stream` is a
    /// `CUstream`. Returns the plan that ran (`None`: M or N is 0).
    ///
    /// Checked before anything is queued, each failure a typed error: the shapes, strides and
    /// lengths as in the safe calls; every address 4-byte aligned
    /// ([`Error::MisalignedPointer`]); the stream in this handle's context
    /// ([`Error::WrongContext`]); every address in an allocation of this handle's device
    /// (driver errors otherwise) that holds the `len` claimed (else
    /// [`Error::BufferTooSmall`]); `out` not overlapping any other operand
    /// ([`Error::Overlapping`]).
    ///
    /// # Safety
    ///
    /// What cannot be checked:
    /// - `stream` is null (the legacy default stream) or a live `CUstream` handle;
    /// - the allocations stay allocated until the queued work has run (stream order on
    ///   `stream`: a later stream-ordered free on it is fine);
    /// - nothing else reads `out` or `workspace`, or writes any operand, while the work runs
    ///   unless it is ordered after it (this call records no events);
    /// - no other call uses the same `workspace` at the same time.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run_raw(
        &self,
        stream: *mut c_void,
        x: RawMatrix,
        w: RawMatrix,
        bias: Option<RawBuffer>,
        scale: f32,
        out: RawMatrix,
        workspace: Option<RawBuffer>,
    ) -> Result<Option<Plan>> {
        let epilogue = Epilogue::scale_add(scale);
        let gemm = RawGemm { x, w: RawWeight::Matrix(w), bias, epilogue, out, workspace };
        // SAFETY: the caller's contract above is run_raw_gemm's.
        unsafe { self.run_raw_gemm(stream, &gemm) }
    }

    /// [`FusedGemm::run_gemm`] on raw device addresses: one call described by its arguments,
    /// with any [`Epilogue`] (its residual `C` a [`RawMatrix`], or `out` itself), W as given or
    /// prepared by [`FusedGemm::prepare_weight_raw`]. Checked as [`FusedGemm::run_raw`] checks,
    /// and also: `C` is M × N in an allocation of this device that holds it, and overlaps `out`
    /// only by being it (the same address and row stride: an in-place residual, as
    /// [`crate::Source::Out`]; any other overlap is [`Error::Overlapping`]); a prepared weight
    /// comes from a handle of this precision ([`Error::PreparedForOtherPrecision`]).
    ///
    /// # Safety
    /// As [`FusedGemm::run_raw`] (and [`FusedGemm::run_raw_prepared`] for a prepared weight);
    /// nothing writes `C` while the work runs unless it is ordered after it.
    pub unsafe fn run_raw_gemm(&self, stream: *mut c_void, gemm: &RawGemm<'_>) -> Result<Option<Plan>> {
        let w = match gemm.w {
            RawWeight::Matrix(w) => RawOperandW { matrix: w, reach: w.reach(), prepared: None },
            RawWeight::Prepared(w) => {
                if w.precision != self.policy.precision {
                    return Err(Error::PreparedForOtherPrecision {
                        prepared: w.precision,
                        asked: self.policy.precision,
                    });
                }
                if w.ordinal != self.kernels.ctx.ordinal() {
                    return Err(Error::WrongContext { operand: Some(Operand::W) });
                }
                // The big parts as the matrix (all a kernel that does not read W split takes of
                // it); the reach covers the small parts too.
                let matrix = RawMatrix { ptr: w.ptr, rows: w.rows, cols: w.cols, ld: w.ld, len: w.len };
                RawOperandW { matrix, reach: w.len, prepared: Some(w.form) }
            }
        };
        // SAFETY: the caller's contract above is run_checked's.
        unsafe { self.run_checked(stream, gemm.x, w, gemm.bias, gemm.epilogue, gemm.out, gemm.workspace) }
    }

    /// `run_raw_gemm`'s checks and launch.
    ///
    /// # Safety
    /// As [`FusedGemm::run_raw_gemm`]; for a prepared W, its `reach` elements hold what
    /// [`FusedGemm::prepare_weight_raw`] wrote, unchanged.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_checked(
        &self,
        stream: *mut c_void,
        x: RawMatrix,
        w: RawOperandW,
        bias: Option<RawBuffer>,
        epilogue: Epilogue<RawMatrix>,
        out: RawMatrix,
        workspace: Option<RawBuffer>,
    ) -> Result<Option<Plan>> {
        let ctx = &self.kernels.ctx;
        let stream = stream as sys::CUstream;
        // SAFETY: the caller vouches for the handle (contract above).
        if unsafe { pointer::stream_context(ctx, stream) }? != ctx.cu_ctx() {
            return Err(Error::WrongContext { operand: None });
        }
        let shape =
            validate::validate_shapes(x.extent(), w.matrix.extent(), bias.map(|_| w.matrix.rows), out.extent())?;
        if let Some(b) = bias {
            if b.len < shape.n {
                return Err(Error::BufferTooSmall { operand: Operand::Bias, needed: shape.n, len: b.len });
            }
        }
        let source = match &epilogue.residual {
            Some(Residual { source: Source::Matrix(c), .. }) => {
                validate::validate_residual(shape, c.extent())?;
                Some(*c)
            }
            _ => None,
        };
        let ws = workspace.unwrap_or(RawBuffer { ptr: 0, len: 0 });
        if ws.ptr % 16 != 0 {
            return Err(Error::MisalignedWorkspace { address: ws.ptr });
        }
        // `out` itself as C (same address and stride): the in-place residual, not an overlap.
        let in_place = source.is_some_and(|c| c.ptr == out.ptr && (c.ld == out.ld || shape.m <= 1));
        let c = source.filter(|_| !in_place);
        // (operand, address, elements the call may touch from it on)
        let operands = [
            (Operand::X, x.ptr, x.reach()),
            (Operand::W, w.matrix.ptr, w.reach),
            (Operand::Bias, bias.map_or(0, |b| b.ptr), bias.map_or(0, |_| shape.n)),
            (Operand::Residual, c.map_or(0, |c| c.ptr), c.map_or(0, |c| c.reach())),
            (Operand::Out, out.ptr, out.reach()),
            (Operand::Workspace, ws.ptr, ws.len),
        ];
        for (operand, ptr, reach) in operands {
            // A prepared weight's allocation was checked when its descriptor was made.
            if operand == Operand::W && w.prepared.is_some() {
                continue;
            }
            check_allocation(ctx, operand, ptr, reach)?;
        }
        let out_range = byte_range(out.ptr, out.reach());
        for (operand, ptr, reach) in operands {
            if operand != Operand::Out && reach > 0 && overlap(byte_range(ptr, reach), out_range) {
                return Err(Error::Overlapping { operand: Operand::Out, with: operand });
            }
        }
        if shape.m == 0 || shape.n == 0 {
            return Ok(None);
        }
        let a = Addresses {
            x: Strided { addr: x.ptr, ld: x.ld },
            w: Strided { addr: w.matrix.ptr, ld: w.matrix.ld },
            bias: bias.map_or(0, |b| b.ptr),
            out: Strided { addr: out.ptr, ld: out.ld },
            workspace: ws.ptr,
        };
        let epilogue = match epilogue.residual {
            Some(r) if in_place => {
                Epilogue { residual: Some(Residual { source: Source::Out, beta: r.beta }), ..epilogue }
            }
            _ => epilogue,
        };
        let epilogue = epilogue.map(|c| Strided { addr: c.ptr, ld: c.ld });
        let kind = EpilogueKind::of(&epilogue, a.out.rows_aligned(shape.n));
        let call = Call { shape, x: a.x, w: a.w, w_prepared: w.prepared, workspace: ws.len, epilogue: kind };
        let plan = self.select(call)?.for_out(shape.n, a.out);
        // SAFETY: a borrowed handle of this context (checked above; alive by the contract);
        // dropping the wrapper leaves the stream to its owner.
        let stream = unsafe { ctx.wrap_borrowed_stream(stream) };
        launch::launch(&self.kernels, &stream, &plan, shape, a, launch::epilogue_params(&epilogue, a.out))?;
        Ok(Some(plan))
    }
}

/// W for [`RawGemm`]: as given, or as [`FusedGemm::prepare_weight_raw`] prepared it.
#[derive(Clone, Copy, Debug)]
pub enum RawWeight<'w> {
    /// N × K at a raw address.
    Matrix(RawMatrix),
    /// A prepared weight.
    Prepared(&'w RawPreparedWeight),
}

/// The arguments of one raw call ([`FusedGemm::run_raw_gemm`]), as [`crate::Gemm`] for raw
/// addresses.
#[derive(Clone, Copy, Debug)]
pub struct RawGemm<'w> {
    /// X, M × K.
    pub x: RawMatrix,
    /// W, N × K, as given or prepared.
    pub w: RawWeight<'w>,
    /// b: at least N elements, the first N read; or none.
    pub bias: Option<RawBuffer>,
    /// What is applied to `v` before the store.
    pub epilogue: Epilogue<RawMatrix>,
    /// The output, M × N.
    pub out: RawMatrix,
    /// Scratch memory (see [`FusedGemm::run_raw`]), or none.
    pub workspace: Option<RawBuffer>,
}

/// W as the raw path reads it: its matrix (of a prepared weight, the big parts), the elements
/// the call may read from its address on (a split weight's small parts too), and its form.
#[derive(Clone, Copy, Debug)]
pub(super) struct RawOperandW {
    pub matrix: RawMatrix,
    pub reach: usize,
    pub prepared: Option<WeightForm>,
}

/// Checks a raw address the call will touch `reach` f32 elements from: 4-byte aligned, in an
/// allocation of this context's device that holds them (nothing to check when `reach` is 0).
pub(super) fn check_allocation(ctx: &CudaContext, operand: Operand, ptr: u64, reach: usize) -> Result<()> {
    if ptr % 4 != 0 {
        return Err(Error::MisalignedPointer { operand, address: ptr });
    }
    if reach == 0 {
        return Ok(());
    }
    let (ordinal, end) = pointer::allocation(ctx, ptr)?;
    if ordinal != ctx.ordinal() as i32 {
        return Err(Error::WrongContext { operand: Some(operand) });
    }
    let available = (end.saturating_sub(ptr) / 4) as usize;
    if available < reach {
        return Err(Error::BufferTooSmall { operand, needed: reach, len: available });
    }
    Ok(())
}

/// The bytes `[start, end)` that `reach` f32 elements from `ptr` on cover (saturating).
pub(super) fn byte_range(ptr: u64, reach: usize) -> (u64, u64) {
    (ptr, ptr.saturating_add(4u64.saturating_mul(reach as u64)))
}

/// Whether two byte ranges share a byte.
pub(super) fn overlap(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reach_ends_at_the_last_row_s_last_element() {
        let m = |rows: usize, cols: usize, ld: usize| RawMatrix { ptr: 0, rows, cols, ld, len: 0 };
        // 3 rows of 5 at a stride of 8: the last element read is 2·8 + 4, so 21 from ptr.
        assert_eq!(m(3, 5, 8).reach(), 21);
        assert_eq!(m(1, 5, 1 << 40).reach(), 5, "one row reaches its columns, whatever the stride");
        assert_eq!(RawMatrix::dense(0, 4, 6).reach(), 24);
        // Empty shapes reach nothing; past usize::MAX saturates (validation refuses it first).
        assert_eq!((m(0, 5, 8).reach(), m(3, 0, 8).reach()), (0, 0));
        assert_eq!(m(usize::MAX, 2, 2).reach(), usize::MAX);
        assert_eq!(RawMatrix::dense(0, usize::MAX, 2).len, usize::MAX);
    }
}
