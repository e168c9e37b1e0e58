//! The workspace a layer owns across calls ([`crate::Linear`], `candle::FusedLinear`): sized by
//! the plan of the call (what Auto wants, [`FusedGemm::workspace_len`]), grown when a call needs
//! more, kept otherwise, so a repeated shape allocates nothing and plans once per call.

use std::num::NonZeroU32;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, CudaView};

use crate::epilogue::Epilogue;
use crate::error::Result;
use crate::gemm::{FusedGemm, Gemm, Plan, Weight};
use crate::matrix::{MatrixMut, MatrixRef};

/// What the workspace need of a layer's call depends on besides the layer itself (W, rounding,
/// device are fixed): M, and X's row stride and start alignment (dispatch repacks X whose rows
/// are not 16-byte aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallKey {
    pub rows: usize,
    pub ld: usize,
    /// X's first element's offset, in elements, modulo 4 (allocations start 256-byte aligned).
    pub offset_mod_4: usize,
}

/// A workspace held by a layer.
#[derive(Debug, Default)]
pub(crate) struct HeldWorkspace {
    buffer: Option<CudaSlice<f32>>,
    /// The need of the last call's key (and the SM limit of the handle that ran it, which
    /// changes stream-K's partial tiles): a repeated call skips sizing (a second plan).
    sized: Option<(CallKey, Option<NonZeroU32>, usize)>,
    allocations: u64,
}

impl HeldWorkspace {
    /// f32 elements held now.
    pub fn len(&self) -> usize {
        self.buffer.as_ref().map_or(0, |b| b.len())
    }

    /// Times a buffer was allocated (the first time and every growth).
    pub fn allocations(&self) -> u64 {
        self.allocations
    }

    /// Runs the call `out = f(v) + β·C` (`epilogue`) with the workspace Auto wants for it,
    /// growing the held buffer to that length first when it is shorter (on `stream`,
    /// stream-ordered; the old one is freed first). `key` must describe `x` ([`CallKey`]); the
    /// epilogue, a residual included, does not change the need.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &mut self,
        gemm: &FusedGemm,
        stream: &Arc<CudaStream>,
        key: CallKey,
        x: &MatrixRef<'_>,
        w: &impl Weight,
        bias: Option<&CudaView<'_, f32>>,
        epilogue: Epilogue<&MatrixRef<'_>>,
        out: &mut MatrixMut<'_>,
    ) -> Result<Option<Plan>> {
        let need = match self.sized {
            Some((k, limit, need)) if k == key && limit == gemm.sm_limit() => need,
            _ => {
                let need = gemm.workspace_len(stream, x, w)?;
                self.sized = Some((key, gemm.sm_limit(), need));
                need
            }
        };
        if need == 0 {
            return gemm.run_gemm(stream, Gemm { x, w, bias, epilogue, out, workspace: None });
        }
        let buffer = match self.buffer.take() {
            Some(b) if b.len() >= need => b,
            old => {
                drop(old);
                // SAFETY: scratch; every region a plan reads is written first in stream order
                // (repacks, partial tiles stored before they are loaded); stream-K's hand-off
                // words need no value (they carry each launch's number).
                let b = unsafe { stream.alloc::<f32>(need) }?;
                self.allocations += 1;
                b
            }
        };
        let buffer = self.buffer.insert(buffer);
        let workspace = Some(&mut buffer.slice_mut(0..need));
        gemm.run_gemm(stream, Gemm { x, w, bias, epilogue, out, workspace })
    }
}
