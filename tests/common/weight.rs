//! W as a case passes it to the fused call: the W view as it is, or a [`PreparedWeight`] made
//! from it by the handle that runs the case ([`Case::prepared_w`]). [`gemm_epilogue::Weight`] is
//! sealed and taken as `&impl Weight`, so the calls are spelled out here once for both kinds.

use std::sync::Arc;

use gemm_epilogue::cudarc::driver::{CudaStream, CudaView, CudaViewMut};
use gemm_epilogue::{FusedGemm, MatrixMut, MatrixRef, Plan, Precision, PreparedWeight, Result};

use super::case::Case;

/// The W of one call.
pub enum CaseWeight<'a> {
    /// The W view, as the caller laid it out.
    Raw(MatrixRef<'a>),
    /// W prepared by the handle that runs the call.
    Prepared(PreparedWeight),
}

/// `$body` with `$w` bound to the weight, whichever kind it is.
macro_rules! with_w {
    ($self:expr, $w:ident => $body:expr) => {
        match $self {
            CaseWeight::Raw($w) => $body,
            CaseWeight::Prepared($w) => $body,
        }
    };
}

impl<'a> CaseWeight<'a> {
    /// `w` as `case` passes it to `gemm`, the handle that runs it ([`Case::gemm`]): the view
    /// itself, or when [`Case::prepared_w`] `gemm.prepare_weight(stream, &w)` — which must
    /// succeed, carry `gemm`'s rounding and keep W's shape with a leading dimension of K rounded
    /// up to 32.
    pub fn new(gemm: &FusedGemm, stream: &Arc<CudaStream>, case: &Case, w: MatrixRef<'a>) -> Self {
        if !case.prepared_w {
            return CaseWeight::Raw(w);
        }
        let p = gemm.prepare_weight(stream, &w).unwrap_or_else(|e| panic!("prepare_weight failed for {case:?}: {e}"));
        assert_eq!(
            (p.rows(), p.cols(), p.ld(), p.precision()),
            (case.n, case.k, case.k.next_multiple_of(32), gemm.precision()),
            "prepared weight of {case:?}"
        );
        CaseWeight::Prepared(p)
    }

    /// The rounding W was prepared for (`None`: a raw view).
    pub fn prepared_for(&self) -> Option<Precision> {
        match self {
            CaseWeight::Raw(_) => None,
            CaseWeight::Prepared(p) => Some(p.precision()),
        }
    }

    /// [`FusedGemm::plan`] with this W.
    pub fn plan(
        &self,
        gemm: &FusedGemm,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        out: &MatrixMut<'_>,
    ) -> Result<Option<Plan>> {
        with_w!(self, w => gemm.plan(stream, x, w, bias, &out.view()))
    }

    /// [`FusedGemm::workspace_len`] with this W.
    pub fn workspace_len(&self, gemm: &FusedGemm, stream: &CudaStream, x: &MatrixRef<'_>) -> Result<usize> {
        with_w!(self, w => gemm.workspace_len(stream, x, w))
    }

    /// [`FusedGemm::run`] with this W.
    pub fn run(
        &self,
        gemm: &FusedGemm,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &mut MatrixMut<'_>,
    ) -> Result<Option<Plan>> {
        with_w!(self, w => gemm.run(stream, x, w, bias, scale, out))
    }

    /// [`FusedGemm::run_with_workspace`] with this W.
    #[allow(clippy::too_many_arguments)]
    pub fn run_with_workspace(
        &self,
        gemm: &FusedGemm,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &mut MatrixMut<'_>,
        workspace: &mut CudaViewMut<'_, f32>,
    ) -> Result<Option<Plan>> {
        with_w!(self, w => gemm.run_with_workspace(stream, x, w, bias, scale, out, workspace))
    }
}
