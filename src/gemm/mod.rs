//! [`FusedGemm`]: the low-level call. Validate ([`validate`]), choose a kernel and plan the
//! launch ([`dispatch`], [`stream_k`], [`workspace`]), launch on a stream ([`launch`]). No
//! allocation and no host synchronisation, so calls can be recorded into CUDA graphs.

mod dispatch;
mod launch;
mod plan;
#[cfg(test)]
mod proptests;
mod raw;
mod raw_prepared;
mod shape;
mod skinny;
mod stream_k;
#[cfg(test)]
mod test_devices;
pub(crate) mod validate;
mod weight;
mod workspace;

use std::num::NonZeroU32;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice};

pub use dispatch::Dispatch;
#[cfg(feature = "testbed")]
pub(crate) use launch::rowwise_grid;
use launch::RepackMode;
pub use plan::Plan;
pub use raw::{RawBuffer, RawGemm, RawMatrix, RawWeight};
pub use raw_prepared::RawPreparedWeight;
pub(crate) use shape::Shape;
use weight::WeightForm;
pub use weight::{PreparedWeight, Weight};

use crate::device::DeviceInfo;
use crate::epilogue::{Epilogue, Residual, Source};
use crate::error::{Error, Operand, Result};
use crate::kernels::loaded::{LoadedKernels, Occupancy};
use crate::kernels::{Kernel, Precision};
use crate::matrix::{MatrixMut, MatrixRef};
use dispatch::{Call, EpilogueKind, Policy};
use launch::Addresses;
use shape::Strided;
use validate::Extent;

/// The arguments of one call (CUTLASS's `Arguments`): `out = f(v) + β·C`, `v = x·wᵀ + b`, for
/// [`FusedGemm::run_gemm`]. `x` is M × K, `w` N × K (nn.Linear's weight), `bias` N elements or
/// `None`, `out` M × N; each may be a strided view. `workspace`: see
/// [`FusedGemm::run_with_workspace`].
#[derive(Debug)]
pub struct Gemm<'a, 'o, 's, W: Weight> {
    /// X, M × K.
    pub x: &'a MatrixRef<'a>,
    /// W, N × K, as given or prepared.
    pub w: &'a W,
    /// b, N elements, or none.
    pub bias: Option<&'a CudaView<'a, f32>>,
    /// What is applied to `v` before the store.
    pub epilogue: Epilogue<&'a MatrixRef<'a>>,
    /// The output, M × N.
    pub out: &'a mut MatrixMut<'o>,
    /// Scratch memory, or none.
    pub workspace: Option<&'a mut CudaViewMut<'s, f32>>,
}

/// The fused `out = f(v) + β·C`, `v = x·wᵀ + b` kernels, loaded into one CUDA context.
///
/// [`FusedGemm::new`] loads the module into a context once (a second `new` on the same
/// context shares it); clone it freely: clones share the loaded module.
#[derive(Clone)]
pub struct FusedGemm {
    pub(crate) kernels: Arc<LoadedKernels>,
    policy: Policy,
    /// At most this many SMs per launch ([`FusedGemm::with_sm_limit`]); `None`: all.
    sm_limit: Option<NonZeroU32>,
}

impl std::fmt::Debug for FusedGemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FusedGemm")
            .field("device", &self.kernels.device)
            .field("dispatch", &self.policy.dispatch)
            .field("precision", &self.policy.precision)
            .field("sm_limit", &self.sm_limit)
            .finish()
    }
}

impl FusedGemm {
    /// Loads the kernels into `ctx`, or takes them from another handle of the same context
    /// (the module is loaded once per context and unloaded with its last handle). Fails with
    /// [`Error::UnsupportedDevice`] before sm_80.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let kernels = crate::kernels::shared::loaded_kernels(ctx)?;
        let policy = Policy { dispatch: Dispatch::Auto, precision: dispatch::default_precision(&kernels.device) };
        Ok(Self { kernels, policy, sm_limit: None })
    }

    /// A handle sharing the loaded kernels that dispatches as `dispatch` says.
    pub fn with_dispatch(&self, dispatch: Dispatch) -> Self {
        Self { policy: Policy { dispatch, ..self.policy }, ..self.clone() }
    }

    /// A handle sharing the loaded kernels whose [`Dispatch::Auto`] gives `precision` or a more
    /// accurate one: [`Precision::Tf32`] and [`Precision::Tf32x3`] exactly (with W as given, or
    /// prepared by a handle of the same precision); [`Precision::Tf32Truncated`] where a
    /// truncating kernel can run the call, and [`Precision::Tf32`] where it falls back to a
    /// rounding kernel (the 64×64 and scalar-load mma.sync kernels, operands repacked into the
    /// workspace, the decoding kernels' rounding builds where no truncating one fits).
    /// [`crate::Plan::precision`] says which a call got. The default is [`Precision::Tf32`] on every device,
    /// as cuBLAS's TF32 GEMM rounds. On sm_90 the TMA rounds X and W as it loads them (TF32
    /// tensor maps, [`crate::Plan::round_on_load`]: to nearest, ties to even), at the truncating
    /// kernels' speed with any W; elsewhere the mma.sync kernels round in registers.
    /// [`Precision::Tf32Truncated`] is an opt-in: faster where rounding costs instructions
    /// (sm_80), with a larger error biased toward zero. docs/EPILOGUE.md has the error of each,
    /// docs/BENCHMARKS.md the cost.
    pub fn with_precision(&self, precision: Precision) -> Self {
        Self { policy: Policy { precision, ..self.policy }, ..self.clone() }
    }

    /// A handle sharing the loaded kernels whose launches occupy at most `sms` SMs (`None`: the
    /// whole device), as cuBLASLt's `CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET`: the persistent sm_90
    /// kernels launch at most that many CTAs (half as many 2-CTA clusters) and stream-K shares
    /// its tiles among them, leaving the other SMs to work on other streams (an NCCL collective
    /// overlapping the GEMM: `ShardedLinear`, feature `nccl`). A limit at or above the device's SM
    /// count changes nothing; a limit of 1 rules the cluster kernels out. The results may
    /// differ in the last bits from an unlimited call's (stream-K splits K elsewhere).
    pub fn with_sm_limit(&self, sms: Option<NonZeroU32>) -> Self {
        Self { sm_limit: sms, ..self.clone() }
    }

    /// The SM limit in use ([`FusedGemm::with_sm_limit`]).
    pub fn sm_limit(&self) -> Option<NonZeroU32> {
        self.sm_limit
    }

    /// The device and occupancy dispatch plans with: the device's, within the SM limit.
    fn resources(&self) -> (DeviceInfo, Occupancy) {
        let (mut device, mut occupancy) = (self.kernels.device, self.kernels.occupancy);
        if let Some(limit) = self.sm_limit {
            device.sm_count = device.sm_count.min(limit.get());
            // Every cluster kernel runs 2-CTA clusters (Occupancy::max_active_clusters).
            occupancy.max_active_clusters = occupancy.max_active_clusters.min(device.sm_count / 2);
        }
        (device, occupancy)
    }

    /// The dispatch rule in use.
    pub fn dispatch(&self) -> Dispatch {
        self.policy.dispatch
    }

    /// The operand rounding [`Dispatch::Auto`] provides.
    pub fn precision(&self) -> Precision {
        self.policy.precision
    }

    /// The device the kernels were loaded for.
    pub fn device(&self) -> DeviceInfo {
        self.kernels.device
    }

    /// The context the kernels were loaded into.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.kernels.ctx
    }

    /// How many CTAs of `kernel` run on this device at once (counted in clusters for a cluster
    /// kernel): a persistent sm_90 kernel launches at most this many, and stream-K shares tiles
    /// among this many. 0 when the kernel cannot run here.
    pub fn wave(&self, kernel: Kernel) -> u32 {
        match self.kernels.function(kernel) {
            Some(_) => {
                let (device, occupancy) = self.resources();
                occupancy.wave(&device, kernel)
            }
            None => 0,
        }
    }

    /// Checks a call and says which kernel it would launch on `stream` (CUTLASS's
    /// `can_implement`), without launching: what [`FusedGemm::run`] (no workspace) runs. That is
    /// the seed form's plan, and also plain Linear's and ReLU's where `out`'s rows take a tensor map;
    /// [`FusedGemm::run_gemm`] with another epilogue runs the ping-pong twin where this plan
    /// shows the cooperative cluster kernel, and the ping-pong without a cluster where K ≤ 1024
    /// and this plan shows the ping-pong cluster kernel (docs/TILING.md, `Size`), and returns the
    /// plan it ran. `Ok(None)`: M or N is 0, there is nothing to do.
    pub fn plan(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        w: &impl Weight,
        bias: Option<&CudaView<'_, f32>>,
        out: &MatrixRef<'_>,
    ) -> Result<Option<Plan>> {
        self.plan_with_workspace(stream, x, w, bias, out, 0)
    }

    // ---- Sizing a workspace that a caller holds across calls ----

    /// Like [`FusedGemm::plan`], for [`FusedGemm::run_with_workspace`] with a workspace of
    /// `workspace_len` f32 elements: the plan that call would run. A workspace shorter than
    /// what Auto wants ([`FusedGemm::workspace_len`]) is not an error, with one exception: a
    /// weight prepared by a [`Precision::Tf32x3`] handle on sm_90 is stored split, only the sm_90
    /// `Tf32x3` kernels read it, and they need X with TMA-readable rows or room to repack X;
    /// without either the call fails with [`Error::KernelUnavailable`]. Otherwise the plan shows
    /// what the shortfall costs: no repack (a slower kernel, or [`Plan::precision`] other than
    /// asked when only a repack would have rounded) or no stream-K ([`Plan::stream_k_tiles`] 0),
    /// and [`Plan::workspace_len`] what it uses.
    pub fn plan_with_workspace(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        w: &impl Weight,
        bias: Option<&CudaView<'_, f32>>,
        out: &MatrixRef<'_>,
        workspace_len: usize,
    ) -> Result<Option<Plan>> {
        self.check_stream(stream)?;
        let (w, prepared) = self.weight(w)?;
        let w = &w;
        let shape = self.validate(x, w, bias, out)?;
        if shape.m == 0 || shape.n == 0 {
            return Ok(None);
        }
        let (x_ptr, _x_guard) = x.data.device_ptr(stream);
        let (w_ptr, _w_guard) = w.data.device_ptr(stream);
        let (o_ptr, _o_guard) = out.data.device_ptr(stream);
        let call = Call {
            shape,
            x: Strided { addr: x_ptr, ld: x.ld },
            w: Strided { addr: w_ptr, ld: w.ld },
            w_prepared: prepared,
            workspace: workspace_len,
            epilogue: EpilogueKind::Unrolled,
        };
        Ok(Some(self.select(call)?.for_out(shape.n, Strided { addr: o_ptr, ld: out.ld })))
    }

    /// An upper bound, from the shape alone, on the f32 elements of workspace that
    /// [`FusedGemm::run_with_workspace`] uses for an M × K input and an N × K weight on this
    /// device, whatever their alignment and strides, prepared or not, whatever the rounding
    /// and dispatch: X and W both repacked plus the largest stream-K part of any kernel. What
    /// a framework can reserve once per shape; the exact need of one call, usually far less
    /// (no repack of aligned operands), is [`FusedGemm::workspace_len`]. Fails like the calls
    /// on a dimension the kernels cannot index ([`Error::DimensionTooLarge`]); 0 when M or N is
    /// 0.
    pub fn max_workspace_len(&self, m: usize, n: usize, k: usize) -> Result<usize> {
        let shape = Shape { m, n, k };
        validate::check_dims(shape)?;
        if m == 0 || n == 0 {
            return Ok(0);
        }
        let (device, occupancy) = self.resources();
        Ok(workspace::max_len(&device, &occupancy, shape))
    }

    // ---- end of workspace sizing ----

    /// f32 elements of workspace [`FusedGemm::run_with_workspace`] (or [`FusedGemm::run_gemm`]
    /// with any epilogue: Auto may give a rolled form another kernel than the seed's) would use
    /// for this call; 0 when it would use none. It holds, in order: X and W repacked when their rows are not
    /// 16-byte aligned (K % 4 != 0, a misaligned view, or a leading dimension that is not a
    /// multiple of 4), and W rounded to TF32 for the sm_90 kernels that round X in registers
    /// but read W rounded (not needed with a [`PreparedWeight`]); then, for stream-K, one
    /// partial tile and a 64-bit ready word per stream-K CTA and a ticket word
    /// ([`Plan::stream_k_tiles`]): with fewer output tiles than fit on the device at once
    /// (split-K), or with at least 8 full waves of them and a partial last one — for the TMA
    /// kernels only when each tile has at least 48 k-blocks (K ≥ 1536) and the last wave is at
    /// most 3/5 full. Its contents before a call do not matter: nothing in it needs zeroing.
    pub fn workspace_len(&self, stream: &CudaStream, x: &MatrixRef<'_>, w: &impl Weight) -> Result<usize> {
        self.check_stream(stream)?;
        let (w, prepared) = self.weight(w)?;
        let w = &w;
        let shape = validate::validate_operands(x.extent(), w.extent())?;
        if shape.m == 0 || shape.n == 0 {
            return Ok(0);
        }
        let (x_ptr, _x_guard) = x.data.device_ptr(stream);
        let (w_ptr, _w_guard) = w.data.device_ptr(stream);
        let call = Call {
            shape,
            x: Strided { addr: x_ptr, ld: x.ld },
            w: Strided { addr: w_ptr, ld: w.ld },
            w_prepared: prepared,
            workspace: usize::MAX,
            epilogue: EpilogueKind::Unrolled,
        };
        self.workspace_need(call)
    }

    /// Computes `out[i][j] = (v*scale) + v`, `v = Σ_k x[i][k]·w[j][k] + bias[j]` on `stream`:
    /// [`FusedGemm::run_gemm`] with [`Epilogue::scale_add`] and no workspace.
    ///
    /// `x` is M × K, `w` is N × K (nn.Linear's weight), `bias` has N elements (or is `None`),
    /// `out` is M × N; each may be a strided view. Everything is checked before the launch: on
    /// error nothing is written. Returns the plan that ran (`None` when M or N is 0).
    /// No allocation, no host synchronisation.
    pub fn run(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        w: &impl Weight,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &mut MatrixMut<'_>,
    ) -> Result<Option<Plan>> {
        self.run_gemm(stream, Gemm { x, w, bias, epilogue: Epilogue::scale_add(scale), out, workspace: None })
    }

    /// Like [`FusedGemm::run`], with scratch memory (see [`FusedGemm::workspace_len`]): operands
    /// whose rows are not 16-byte aligned are first copied into it, so that the TMA + wgmma (or
    /// 16-byte mma.sync) kernels can read them, and tiles are shared along K through it
    /// (stream-K: all tiles of small problems, the last wave of large ones). The workspace must
    /// start 16-byte aligned (every allocation does) and must not be used by another call at
    /// the same time. A shorter workspace is not an error: the call then runs without what does
    /// not fit, and the returned [`Plan`] says what ran.
    #[allow(clippy::too_many_arguments)]
    pub fn run_with_workspace(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        w: &impl Weight,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &mut MatrixMut<'_>,
        workspace: &mut CudaViewMut<'_, f32>,
    ) -> Result<Option<Plan>> {
        let epilogue = Epilogue::scale_add(scale);
        self.run_gemm(stream, Gemm { x, w, bias, epilogue, out, workspace: Some(workspace) })
    }

    /// Runs one call described by its arguments: `out = f(v) + β·C`, `v = x·wᵀ + b`, with the
    /// epilogue `gemm.epilogue` ([`Epilogue`]: the seed's `v·s + v`, plain Linear, an activation,
    /// and a residual source `C`, an M × N view or `out` itself). The workspace, if any, as in
    /// [`FusedGemm::run_with_workspace`]. Everything is checked before the launch (a residual
    /// of another shape, or in another context, is refused): on error nothing is written.
    /// Returns the plan that ran (`None` when M or N is 0). No allocation, no host
    /// synchronisation.
    pub fn run_gemm<W: Weight>(&self, stream: &CudaStream, gemm: Gemm<'_, '_, '_, W>) -> Result<Option<Plan>> {
        let Gemm { x, w, bias, epilogue, out, workspace } = gemm;
        self.check_stream(stream)?;
        let (w, prepared) = self.weight(w)?;
        let w = &w;
        let shape = self.validate(x, w, bias, &out.view())?;
        if let Some(Residual { source: Source::Matrix(c), .. }) = &epilogue.residual {
            validate::validate_residual(shape, c.extent())?;
            if c.data.stream().context().cu_ctx() != self.kernels.ctx.cu_ctx() {
                return Err(Error::WrongContext { operand: Some(Operand::Residual) });
            }
        }
        if let Some(ws) = &workspace {
            if ws.stream().context().cu_ctx() != self.kernels.ctx.cu_ctx() {
                return Err(Error::WrongContext { operand: Some(Operand::Workspace) });
            }
        }
        if shape.m == 0 || shape.n == 0 {
            return Ok(None);
        }
        // The guards keep every buffer alive and ordered on `stream` until the launch is queued.
        let (x_ptr, _x_guard) = x.data.device_ptr(stream);
        let (w_ptr, _w_guard) = w.data.device_ptr(stream);
        let (b_ptr, _b_guard) = match bias {
            Some(b) => {
                let (p, g) = b.device_ptr(stream);
                (p, Some(g))
            }
            None => (0, None),
        };
        let mut c_guard = None;
        let epilogue = epilogue.map(|c| {
            let (p, g) = c.data.device_ptr(stream);
            c_guard = Some(g);
            Strided { addr: p, ld: c.ld }
        });
        let (ws_ptr, ws_len, _ws_guard) = match workspace {
            Some(ws) => {
                let len = ws.len();
                let (p, g) = ws.device_ptr_mut(stream);
                if p % 16 != 0 {
                    return Err(Error::MisalignedWorkspace { address: p });
                }
                (p, len, Some(g))
            }
            None => (0, 0, None),
        };
        let (o_ptr, _o_guard) = out.data.device_ptr_mut(stream);
        let a = Addresses {
            x: Strided { addr: x_ptr, ld: x.ld },
            w: Strided { addr: w_ptr, ld: w.ld },
            bias: b_ptr,
            out: Strided { addr: o_ptr, ld: out.ld },
            workspace: ws_ptr,
        };
        let kind = EpilogueKind::of(&epilogue, a.out.rows_aligned(shape.n));
        let call = Call { shape, x: a.x, w: a.w, w_prepared: prepared, workspace: ws_len, epilogue: kind };
        let plan = self.select(call)?.for_out(shape.n, a.out);
        launch::launch(&self.kernels, stream, &plan, shape, a, launch::epilogue_params(&epilogue, a.out))?;
        drop(c_guard);
        Ok(Some(plan))
    }

    /// Copies W (N × K, any stride) into a [`PreparedWeight`] on `stream`: rows of whole 128-byte
    /// lines, rounded to TF32 to nearest (ties away) when this handle rounds to nearest. Every
    /// call of a handle with this rounding then takes it in place of W, and the sm_90 kernels
    /// read it without repacking it (no workspace needed for it; rounding it on load again
    /// changes nothing). Allocates N × ⌈K/32⌉·32
    /// floats; the copy runs asynchronously on `stream`.
    pub fn prepare_weight(&self, stream: &Arc<CudaStream>, w: &MatrixRef<'_>) -> Result<PreparedWeight> {
        self.check_stream(stream)?;
        if w.data.stream().context().cu_ctx() != self.kernels.ctx.cu_ctx() {
            return Err(Error::WrongContext { operand: Some(Operand::W) });
        }
        let shape = validate::validate_weight(w.extent())?;
        let (ld, form, len) = self.prepared_layout(shape)?;
        // SAFETY: the repack below writes every one of the len elements (zeros past K; both parts
        // when split) before anything can read them (stream order); the one element a 0 × 0
        // weight allocates is never read.
        let mut data = unsafe { stream.alloc::<f32>(len.max(1)) }?;
        if len > 0 {
            let (src, _src_guard) = w.data.device_ptr(stream);
            let (dst, _dst_guard) = data.device_ptr_mut(stream);
            let dst = Strided { addr: dst, ld };
            launch::repack(
                &self.kernels,
                stream,
                Strided { addr: src, ld: w.ld },
                shape.n,
                shape.k,
                dst,
                RepackMode::to(form),
            )?;
        }
        Ok(PreparedWeight::new(data, shape.n, shape.k, ld, self.policy.precision, form))
    }

    /// How this handle prepares an N × K weight: its row stride (K rounded up to whole 128-byte
    /// lines), the form of its values, and the f32 elements it takes (both parts when split).
    pub(crate) fn prepared_layout(&self, shape: Shape) -> Result<(usize, WeightForm, usize)> {
        let ld = workspace::repacked_ld(shape.k);
        let form = match self.policy.precision {
            Precision::Tf32 => WeightForm::Rounded,
            // Only the sm_90 kernels read W split; the mma.sync ones split it themselves.
            Precision::Tf32x3 if self.kernels.device.is_hopper() => WeightForm::Split,
            _ => WeightForm::Raw,
        };
        let parts = if form == WeightForm::Split { 2 } else { 1 };
        let len = shape.n.checked_mul(ld).and_then(|l| l.checked_mul(parts));
        let len = len.ok_or(Error::DimensionTooLarge { what: "N · K", value: shape.n, max: validate::MAX_DIM })?;
        Ok((ld, form, len))
    }

    /// W as a matrix view and the form of a prepared weight's values, once checked that a
    /// prepared weight serves this handle: only handles of the precision it was prepared for take it.
    fn weight<'w>(&self, w: &'w impl Weight) -> Result<(MatrixRef<'w>, Option<WeightForm>)> {
        let (view, prepared) = w.view();
        match prepared {
            Some(p) if p.precision != self.policy.precision => {
                Err(Error::PreparedForOtherPrecision { prepared: p.precision, asked: self.policy.precision })
            }
            _ => Ok((view, prepared.map(|p| p.form))),
        }
    }

    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.kernels.ctx.cu_ctx() {
            return Err(Error::WrongContext { operand: None });
        }
        Ok(())
    }

    /// Shape, extent and context checks shared by every call (and by the testbed's baselines).
    pub(crate) fn validate(
        &self,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        out: &MatrixRef<'_>,
    ) -> Result<Shape> {
        let shape = validate::validate_shapes(x.extent(), w.extent(), bias.map(|b| b.len()), out.extent())?;
        let ctx = self.kernels.ctx.cu_ctx();
        let same = |s: &Arc<CudaStream>| s.context().cu_ctx() == ctx;
        for (op, ok) in [
            (Operand::X, same(x.data.stream())),
            (Operand::W, same(w.data.stream())),
            (Operand::Out, same(out.data.stream())),
            (Operand::Bias, bias.is_none_or(|b| same(b.stream()))),
        ] {
            if !ok {
                return Err(Error::WrongContext { operand: Some(op) });
            }
        }
        Ok(shape)
    }

    /// A kernel of the loaded fatbins by its symbol (the testbed's elementwise pass).
    #[cfg(feature = "testbed")]
    pub(crate) fn load_function(&self, name: &str) -> Result<cudarc::driver::CudaFunction> {
        self.kernels.load_function(name)
    }

    pub(crate) fn select(&self, call: Call) -> Result<Plan> {
        let (device, occupancy) = self.resources();
        dispatch::select(&device, &occupancy, self.policy, call)
    }

    /// The workspace `call` needs with any epilogue: Auto may plan another kernel for a form
    /// that takes the rolled loop (dispatch::EpilogueKind), whose stream-K part may be larger.
    pub(crate) fn workspace_need(&self, call: Call) -> Result<usize> {
        let seed = self.select(Call { epilogue: EpilogueKind::Unrolled, ..call })?;
        let (device, occupancy) = self.resources();
        if !dispatch::epilogue_may_change_plan(call.shape, &device, &occupancy) {
            return Ok(seed.workspace_len());
        }
        let other = self.select(Call { epilogue: EpilogueKind::Rolled, ..call })?;
        Ok(seed.workspace_len().max(other.workspace_len()))
    }
}

impl MatrixRef<'_> {
    fn extent(&self) -> Extent {
        Extent { rows: self.rows, cols: self.cols, ld: self.ld, len: self.data.len() }
    }
}
