//! The best single library call we know for the same layer: one `cublasLtMatmul` with the bias
//! epilogue (`CUBLASLT_EPILOGUE_BIAS`), TF32 tensor cores (`CUBLAS_COMPUTE_32F_FAST_TF32`),
//! `alpha = 1 + s` and a bias pre-scaled by `1 + s`.
//!
//! It computes `D = (1+s)·acc + round((1+s)·b)`, which equals `(acc + b)·(1 + s)` up to rounding —
//! **not** bit-for-bit the fused kernel's `round(round(v·s) + v)` with `v = round(acc + b)`: the
//! algebra is the same, the roundings differ (one fewer, and in other places). It is what
//! `F.linear` + a folded scale would cost, and the floor for "one cuBLASLt call"; compare results
//! against it with a tolerance, never bit-exactly.
//!
//! The other epilogue forms ([`CublasLtLinear::prepare_epilogue`]) use cuBLASLt's own epilogue
//! where it has one ([`CublasLtEpilogue`]): `CUBLASLT_EPILOGUE_BIAS` for `F.linear`, `RELU_BIAS`
//! for ReLU, `GELU_BIAS` for GELU's tanh form (cuBLASLt's GELU is the tanh approximation), and a
//! residual `+ β·C` through cuBLASLt's own `β·C` where `f` is linear (cuBLASLt adds `C` before its
//! activation, PyTorch after it). It has none for GELU (erf) or SiLU, nor for an activation
//! followed by a residual: `prepare_epilogue` says so ([`super::Error::Unsupported`]).
//!
//! Everything that does not depend on the data is done once, in [`CublasLtLinear::prepare`]: the
//! descriptors, the layouts, the heuristic query (one algorithm, chosen for the shape, strides and
//! pointer alignments), and the pre-scaled bias buffer. [`CublasLtLinear::run`] is one
//! `cublasLtMatmul` and nothing else, so it can be timed (and captured) like the fused kernel.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use cudarc::driver::{CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceSlice};

use super::Result;
use crate::epilogue::{Activation, Epilogue, Residual, Source};
use crate::error::{Error, Operand};
use crate::gemm::validate::{validate_residual, Extent};
use crate::gemm::{FusedGemm, Shape};
use crate::matrix::{MatrixMut, MatrixRef};

/// Workspace handed to cuBLASLt: NVIDIA's recommendation for Hopper (32 MiB).
const WORKSPACE_BYTES: usize = 32 << 20;

/// The cuBLASLt epilogue one call applies: `D = g(α·acc + β·C + b′)` with `g` one of cuBLASLt's
/// epilogues (without a bias, the same epilogue without `_BIAS`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CublasLtEpilogue {
    /// The seed's `v·s + v`: `CUBLASLT_EPILOGUE_BIAS`, `α = 1 + s`, `b′ = round((1+s)·b)` (the
    /// same algebra, other roundings).
    ScaleAdd(f32),
    /// `F.linear`: `CUBLASLT_EPILOGUE_BIAS`.
    Bias,
    /// `torch.relu`: `CUBLASLT_EPILOGUE_RELU_BIAS`.
    ReluBias,
    /// `F.gelu(approximate="tanh")`: `CUBLASLT_EPILOGUE_GELU_BIAS`.
    GeluBias,
}

impl CublasLtEpilogue {
    /// cuBLASLt's epilogue for `epilogue`, or why it has none.
    pub fn of<M>(epilogue: &Epilogue<M>) -> Result<Self, &'static str> {
        let lt = match epilogue.activation {
            Activation::ScaleAdd(s) => CublasLtEpilogue::ScaleAdd(s),
            Activation::Identity => CublasLtEpilogue::Bias,
            Activation::Relu => CublasLtEpilogue::ReluBias,
            Activation::GeluTanh => CublasLtEpilogue::GeluBias,
            Activation::Gelu => return Err("cuBLASLt has no erf GELU epilogue (its GELU is the tanh form)"),
            Activation::Silu => return Err("cuBLASLt has no SiLU epilogue"),
        };
        let linear = matches!(lt, CublasLtEpilogue::ScaleAdd(_) | CublasLtEpilogue::Bias);
        if epilogue.residual.is_some() && !linear {
            return Err("cuBLASLt adds beta*C before its activation, not after it");
        }
        Ok(lt)
    }

    /// cuBLASLt's name for it, with a bias or without (`CUBLASLT_EPILOGUE_RELU_BIAS`).
    pub fn name(self, bias: bool) -> &'static str {
        self.code(bias).1
    }

    fn code(self, bias: bool) -> (sys::cublasLtEpilogue_t, &'static str) {
        use sys::cublasLtEpilogue_t as E;
        match (self, bias) {
            (CublasLtEpilogue::ScaleAdd(_) | CublasLtEpilogue::Bias, true) => {
                (E::CUBLASLT_EPILOGUE_BIAS, "CUBLASLT_EPILOGUE_BIAS")
            }
            (CublasLtEpilogue::ScaleAdd(_) | CublasLtEpilogue::Bias, false) => {
                (E::CUBLASLT_EPILOGUE_DEFAULT, "CUBLASLT_EPILOGUE_DEFAULT")
            }
            (CublasLtEpilogue::ReluBias, true) => (E::CUBLASLT_EPILOGUE_RELU_BIAS, "CUBLASLT_EPILOGUE_RELU_BIAS"),
            (CublasLtEpilogue::ReluBias, false) => (E::CUBLASLT_EPILOGUE_RELU, "CUBLASLT_EPILOGUE_RELU"),
            (CublasLtEpilogue::GeluBias, true) => (E::CUBLASLT_EPILOGUE_GELU_BIAS, "CUBLASLT_EPILOGUE_GELU_BIAS"),
            (CublasLtEpilogue::GeluBias, false) => (E::CUBLASLT_EPILOGUE_GELU, "CUBLASLT_EPILOGUE_GELU"),
        }
    }
}

/// A cuBLASLt handle and its workspace on one stream.
///
/// ```no_run
/// # use gemm_epilogue::{cuda_context, FusedGemm, MatrixMut, MatrixRef};
/// # use gemm_epilogue::testbed::CublasLtLinear;
/// # fn main() -> Result<(), gemm_epilogue::testbed::Error> {
/// let ctx = cuda_context(0)?;
/// let stream = ctx.default_stream();
/// let gemm = FusedGemm::new(&ctx)?;
/// let lt = CublasLtLinear::new(&gemm, stream.clone())?;
/// let (m, k, n) = (256, 512, 128);
/// let x = stream.clone_htod(&vec![1.0f32; m * k])?;
/// let w = stream.clone_htod(&vec![0.01f32; n * k])?;
/// let b = stream.clone_htod(&vec![0.5f32; n])?;
/// let mut out = stream.alloc_zeros::<f32>(m * n)?;
/// let (xr, wr) = (MatrixRef::from_slice(&x, m, k), MatrixRef::from_slice(&w, n, k));
/// let plan = lt.prepare(&xr, &wr, Some(&b.as_view()), 0.5, &MatrixMut::from_slice(&mut out, m, n))?;
/// lt.run(&plan, &xr, &wr, &mut MatrixMut::from_slice(&mut out, m, n))?; // one cublasLtMatmul
/// # Ok(()) }
/// ```
pub struct CublasLtLinear {
    handle: sys::cublasLtHandle_t,
    workspace: CudaSlice<u8>,
    stream: Arc<CudaStream>,
    gemm: FusedGemm,
}

impl std::fmt::Debug for CublasLtLinear {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CublasLtLinear").field("workspace_bytes", &WORKSPACE_BYTES).finish_non_exhaustive()
    }
}

impl Drop for CublasLtLinear {
    fn drop(&mut self) {
        // SAFETY: the handle was created in `new` and is destroyed exactly once, here. Errors are
        // ignored: there is nothing useful to do with them in a destructor.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

/// Everything [`CublasLtLinear::run`] needs for one shape: descriptors, the chosen algorithm,
/// the epilogue (for the seed's, `alpha = 1 + s` and the bias pre-scaled by `1 + s`). Made by
/// [`CublasLtLinear::prepare`] or [`CublasLtLinear::prepare_epilogue`].
///
/// A plan is tied to the shape, the leading dimensions and (at least) the pointer alignments it
/// was prepared with, `C`'s too; `run` checks them. Bias, scale and epilogue are baked in: a new
/// bias, scale or epilogue needs a new plan (a new `C` of the same layout does not).
pub struct CublasLtPlan {
    key: PlanKey,
    /// `None` when M or N is 0: nothing to launch.
    call: Option<Call>,
}

impl std::fmt::Debug for CublasLtPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CublasLtPlan")
            .field("m", &self.key.m)
            .field("n", &self.key.n)
            .field("k", &self.key.k)
            .field("epilogue", &self.call.as_ref().map(|c| c.epilogue))
            .field("alpha", &self.call.as_ref().map(|c| c.alpha))
            .field("beta", &self.call.as_ref().map(|c| c.beta))
            .field("bias", &self.call.as_ref().map(|c| c.bias.is_some()))
            .finish()
    }
}

impl CublasLtPlan {
    /// `(M, N, K)` the plan was prepared for.
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.key.m, self.key.n, self.key.k)
    }

    /// Workspace bytes the chosen algorithm uses (0 when there is nothing to launch).
    pub fn workspace_bytes(&self) -> usize {
        self.call.as_ref().map_or(0, |c| c.algo_workspace)
    }

    /// cuBLASLt's epilogue the call applies (`None` when there is nothing to launch).
    pub fn epilogue_name(&self) -> Option<&'static str> {
        self.call.as_ref().map(|c| c.epilogue.name(c.bias.is_some()))
    }

    /// Whether [`CublasLtLinear::run_with`] needs a residual matrix `C`.
    pub fn needs_c(&self) -> bool {
        matches!(self.key.c, PlanC::Matrix { .. })
    }
}

/// Where a plan's `C` comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PlanC {
    /// No residual (`beta = 0`; cuBLASLt is handed D as C and does not read it).
    None,
    /// `out` itself: cuBLASLt's in-place `C == D` (same layout).
    Out,
    /// A matrix of its own, at row stride `ld` and (at least) this alignment in bytes.
    Matrix { ld: usize, align: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PlanKey {
    m: usize,
    n: usize,
    k: usize,
    ldx: usize,
    ldw: usize,
    ldo: usize,
    /// Alignments (bytes, ≤ 256) the algorithm was chosen for: x, w, out.
    align: [u32; 3],
    c: PlanC,
}

struct Call {
    desc: Desc,
    a: Layout,
    b: Layout,
    d: Layout,
    /// C's layout where C is a matrix of its own (else C is D: `d`).
    c: Option<Layout>,
    algo: sys::cublasLtMatmulAlgo_t,
    algo_workspace: usize,
    epilogue: CublasLtEpilogue,
    alpha: f32,
    beta: f32,
    /// `round((1+s)·b)` (the seed's) or `b`; its device pointer is stored in `desc`, so it must
    /// live as long.
    bias: Option<CudaSlice<f32>>,
}

struct Desc(sys::cublasLtMatmulDesc_t);
impl Drop for Desc {
    fn drop(&mut self) {
        // SAFETY: created by `create_matmul_desc`, owned here, destroyed once.
        let _ = unsafe { lt::destroy_matmul_desc(self.0) };
    }
}

struct Layout(sys::cublasLtMatrixLayout_t);
impl Drop for Layout {
    fn drop(&mut self) {
        // SAFETY: created by `create_matrix_layout`, owned here, destroyed once.
        let _ = unsafe { lt::destroy_matrix_layout(self.0) };
    }
}

struct Pref(sys::cublasLtMatmulPreference_t);
impl Drop for Pref {
    fn drop(&mut self) {
        // SAFETY: created by `create_matmul_pref`, owned here, destroyed once.
        let _ = unsafe { lt::destroy_matmul_pref(self.0) };
    }
}

/// Largest power of two ≤ 256 dividing `ptr` (cuBLASLt's alignment preferences top out at 256).
fn alignment(ptr: u64) -> u32 {
    if ptr == 0 {
        256
    } else {
        (1u64 << ptr.trailing_zeros().min(8)) as u32
    }
}

fn set_desc<T>(desc: &Desc, attr: sys::cublasLtMatmulDescAttributes_t, value: &T) -> Result<()> {
    // SAFETY: `desc` is live; `value` points to `size_of::<T>()` readable bytes, and every caller
    // passes the C type cuBLASLt documents for `attr` (int32 op, uint32 epilogue, void* bias).
    unsafe { lt::set_matmul_desc_attribute(desc.0, attr, (value as *const T).cast(), std::mem::size_of::<T>()) }?;
    Ok(())
}

fn set_pref<T>(pref: &Pref, attr: sys::cublasLtMatmulPreferenceAttributes_t, value: &T) -> Result<()> {
    // SAFETY: as for `set_desc` (uint64 workspace size, uint32 alignments).
    unsafe { lt::set_matmul_pref_attribute(pref.0, attr, (value as *const T).cast(), std::mem::size_of::<T>()) }?;
    Ok(())
}

fn layout(rows: usize, cols: usize, ld: usize) -> Result<Layout> {
    Ok(Layout(lt::create_matrix_layout(sys::cudaDataType::CUDA_R_32F, rows as u64, cols as u64, ld.max(1) as i64)?))
}

impl CublasLtLinear {
    /// A cuBLASLt handle and a 32 MiB workspace on `stream`; `gemm` supplies the validation.
    /// [`super::Error::NoLibrary`] where cudarc cannot load libcublasLt.
    pub fn new(gemm: &FusedGemm, stream: Arc<CudaStream>) -> Result<Self> {
        gemm.check_stream(&stream)?;
        super::cublaslt_library()?;
        stream.context().bind_to_thread()?;
        let workspace = stream.alloc_zeros::<u8>(WORKSPACE_BYTES)?;
        let handle = lt::create_handle()?;
        Ok(Self { handle, workspace, stream, gemm: gemm.clone() })
    }

    /// The stream every call runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Builds the plan for `out = (1+s)·(x·wᵀ) + round((1+s)·b)` on these operands: validates
    /// them, creates the descriptors, asks cuBLASLt's heuristic once for the best algorithm and
    /// uploads the pre-scaled bias. Copies `bias` to the host and back (synchronises `stream`):
    /// call it outside anything timed.
    pub fn prepare(
        &self,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &MatrixMut<'_>,
    ) -> Result<CublasLtPlan> {
        self.prepare_epilogue(x, w, bias, Epilogue::scale_add(scale), out)
    }

    /// [`CublasLtLinear::prepare`] for any epilogue cuBLASLt has one of its own for
    /// ([`CublasLtEpilogue::of`]; [`super::Error::Unsupported`] otherwise): `out = g(x·wᵀ + b)`
    /// (the seed's as `prepare`), plus `β·C` where `g` is linear. `C` is read at
    /// [`CublasLtLinear::run_with`]; here only its layout and alignment count. Copies `bias` to
    /// the host and back (synchronises `stream`): call it outside anything timed.
    pub fn prepare_epilogue(
        &self,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        epilogue: Epilogue<&MatrixRef<'_>>,
        out: &MatrixMut<'_>,
    ) -> Result<CublasLtPlan> {
        let lt_epilogue = CublasLtEpilogue::of(&epilogue).map_err(|what| super::Error::Unsupported { what })?;
        self.gemm.check_stream(&self.stream)?;
        let shape = self.gemm.validate(x, w, bias, &out.view())?;
        let (c, beta) = match epilogue.residual {
            None => (PlanC::None, 0.0f32),
            Some(Residual { source: Source::Out, beta }) => (PlanC::Out, beta),
            Some(Residual { source: Source::Matrix(c), beta }) => {
                check_c(&self.stream, shape.m, shape.n, c)?;
                let (cp, _cg) = c.data.device_ptr(&self.stream);
                (PlanC::Matrix { ld: c.ld, align: alignment(cp) }, beta)
            }
        };
        let align = {
            let (xp, _xg) = x.data.device_ptr(&self.stream);
            let (wp, _wg) = w.data.device_ptr(&self.stream);
            let (op, _og) = out.data.device_ptr(&self.stream);
            [alignment(xp), alignment(wp), alignment(op)]
        };
        let key = PlanKey { m: shape.m, n: shape.n, k: shape.k, ldx: x.ld, ldw: w.ld, ldo: out.ld, align, c };
        if shape.m == 0 || shape.n == 0 {
            return Ok(CublasLtPlan { key, call: None });
        }
        let ldc = match c {
            PlanC::Matrix { ld, .. } => ld,
            PlanC::None | PlanC::Out => out.ld,
        };
        for (what, v) in
            [("ldx (cuBLASLt)", x.ld), ("ldw (cuBLASLt)", w.ld), ("ldo (cuBLASLt)", out.ld), ("ldc (cuBLASLt)", ldc)]
        {
            if v > i64::MAX as usize {
                return Err(Error::DimensionTooLarge { what, value: v, max: i64::MAX as usize }.into());
            }
        }

        // The seed's v·s + v as (1+s)·acc + (1+s)·b; the other forms take acc and b as they are.
        let (alpha, factor) = match lt_epilogue {
            CublasLtEpilogue::ScaleAdd(s) => (1.0f32 + s, 1.0 + s as f64),
            _ => (1.0f32, 1.0f64),
        };
        let bias = match bias {
            Some(b) => {
                let host = self.stream.clone_dtoh(b)?;
                let scaled: Vec<f32> = host.iter().map(|&v| (factor * v as f64) as f32).collect();
                Some(self.stream.clone_htod(&scaled)?)
            }
            None => None,
        };

        // Row-major out (M × N) is column-major outᵀ (N × M) = W (N × K) · Xᵀ (K × M): cuBLASLt
        // sees W as a column-major K × N matrix (op T) and X as a column-major K × M matrix
        // (op N), exactly as `CublasBaseline::gemm`. The bias then runs along D's rows (N).
        let desc = Desc(lt::create_matmul_desc(
            sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
            sys::cudaDataType::CUDA_R_32F,
        )?);
        let (op_t, op_n) = (1i32, 0i32); // CUBLAS_OP_T, CUBLAS_OP_N
        set_desc(&desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA, &op_t)?;
        set_desc(&desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB, &op_n)?;
        if let Some(b) = &bias {
            let (b_ptr, _bg) = b.device_ptr(&self.stream);
            let b_ptr = b_ptr as *const c_void;
            set_desc(&desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b_ptr)?;
        }
        let (code, _) = lt_epilogue.code(bias.is_some());
        set_desc(&desc, sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE, &(code as u32))?;

        let a = layout(shape.k, shape.n, w.ld)?;
        let b = layout(shape.k, shape.m, x.ld)?;
        let d = layout(shape.n, shape.m, out.ld)?;
        let c_layout = match c {
            PlanC::Matrix { ld, .. } => Some(layout(shape.n, shape.m, ld)?),
            PlanC::None | PlanC::Out => None,
        };
        let c_align = match c {
            PlanC::Matrix { align, .. } => align,
            PlanC::None | PlanC::Out => align[2],
        };

        let pref = Pref(lt::create_matmul_pref()?);
        set_pref(
            &pref,
            sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            &(WORKSPACE_BYTES as u64),
        )?;
        use sys::cublasLtMatmulPreferenceAttributes_t as P;
        set_pref(&pref, P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align[1])?;
        set_pref(&pref, P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align[0])?;
        set_pref(&pref, P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &c_align)?;
        set_pref(&pref, P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align[2])?;

        self.stream.context().bind_to_thread()?;
        let c_desc = c_layout.as_ref().unwrap_or(&d).0;
        // SAFETY: handle, descriptor, layouts and preference are live; C has D's shape (its own
        // layout, or D's).
        let heuristic = unsafe { lt::get_matmul_algo_heuristic(self.handle, desc.0, a.0, b.0, c_desc, d.0, pref.0) }?;
        Ok(CublasLtPlan {
            key,
            call: Some(Call {
                desc,
                a,
                b,
                d,
                c: c_layout,
                algo: heuristic.algo,
                algo_workspace: heuristic.workspaceSize,
                epilogue: lt_epilogue,
                alpha,
                beta,
                bias,
            }),
        })
    }

    /// One `cublasLtMatmul`: `out = (1+s)·(x·wᵀ) + round((1+s)·b)` with the plan's algorithm
    /// (or the epilogue it was prepared with: [`CublasLtLinear::run_with`], without a `C`).
    /// The operands must have the shape, leading dimensions and at least the pointer alignments
    /// `plan` was prepared with ([`Error::ShapeMismatch`] otherwise). No allocation, no host
    /// synchronisation.
    pub fn run(
        &self,
        plan: &CublasLtPlan,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        out: &mut MatrixMut<'_>,
    ) -> Result<()> {
        self.run_with(plan, x, w, None, out)
    }

    /// [`CublasLtLinear::run`] for a plan of any epilogue: `c` is the residual matrix `C` of a
    /// plan prepared with one ([`CublasLtPlan::needs_c`]; its shape, row stride and at least its
    /// alignment), `None` for every other plan (an in-place residual reads `out`).
    pub fn run_with(
        &self,
        plan: &CublasLtPlan,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        c: Option<&MatrixRef<'_>>,
        out: &mut MatrixMut<'_>,
    ) -> Result<()> {
        let shape = self.gemm.validate(x, w, None, &out.view())?;
        let k = &plan.key;
        let checks = [
            ("M vs prepared plan", k.m, shape.m),
            ("N vs prepared plan", k.n, shape.n),
            ("K vs prepared plan", k.k, shape.k),
            ("x.ld vs prepared plan", k.ldx, x.ld),
            ("w.ld vs prepared plan", k.ldw, w.ld),
            ("out.ld vs prepared plan", k.ldo, out.ld),
            ("residual matrices (C) vs prepared plan", plan.needs_c() as usize, c.is_some() as usize),
        ];
        for (what, expected, found) in checks {
            if expected != found {
                return Err(Error::ShapeMismatch { what, expected, found }.into());
            }
        }
        if let (Some(c), PlanC::Matrix { ld, .. }) = (c, k.c) {
            check_c(&self.stream, shape.m, shape.n, c)?;
            if c.ld != ld {
                return Err(Error::ShapeMismatch { what: "c.ld vs prepared plan", expected: ld, found: c.ld }.into());
            }
        }
        let Some(call) = &plan.call else { return Ok(()) };
        let stream = self.stream.clone();
        let (x_ptr, _xg) = x.data.device_ptr(&stream);
        let (w_ptr, _wg) = w.data.device_ptr(&stream);
        let c_guard = c.map(|c| c.data.device_ptr(&stream));
        let (o_ptr, _og) = out.data.device_ptr_mut(&stream);
        let (ws_ptr, _wsg) = self.workspace.device_ptr(&stream);
        let bias_guard = call.bias.as_ref().map(|b| b.device_ptr(&stream));
        let c_ptr = c_guard.as_ref().map_or(o_ptr, |(p, _)| *p);
        let c_align = match k.c {
            PlanC::Matrix { align, .. } => align,
            PlanC::None | PlanC::Out => 0,
        };
        for (what, needed, ptr) in [
            ("x pointer alignment (bytes) vs prepared plan", k.align[0], x_ptr),
            ("w pointer alignment (bytes) vs prepared plan", k.align[1], w_ptr),
            ("out pointer alignment (bytes) vs prepared plan", k.align[2], o_ptr),
            ("c pointer alignment (bytes) vs prepared plan", c_align, c_ptr),
        ] {
            if alignment(ptr) < needed {
                return Err(
                    Error::ShapeMismatch { what, expected: needed as usize, found: alignment(ptr) as usize }.into()
                );
            }
        }
        let c_layout = call.c.as_ref().unwrap_or(&call.d).0;
        // SAFETY: handle, descriptor and layouts are live (owned by `self` and `plan`); the
        // operands were validated against the shape and strides the layouts describe (C against
        // its own layout, or C is D); the bias pointer stored in the descriptor is `call.bias`,
        // alive as long as `plan` and ordered on `stream` by `bias_guard`; with beta = 0, C (= D)
        // is not read, and C = D is cuBLASLt's in-place case (same layout); C of its own is a
        // shared borrow, so it cannot overlap out; alpha/beta are host pointers (default pointer
        // mode); the workspace is ours and at least as large as the preference allowed; every
        // buffer is ordered on `stream` by its guard.
        unsafe {
            lt::matmul(
                self.handle,
                call.desc.0,
                (&call.alpha as *const f32).cast(),
                (&call.beta as *const f32).cast(),
                w_ptr as *const c_void,
                call.a.0,
                x_ptr as *const c_void,
                call.b.0,
                c_ptr as *const c_void,
                c_layout,
                o_ptr as *mut c_void,
                call.d.0,
                &call.algo,
                ws_ptr as *mut c_void,
                WORKSPACE_BYTES,
                stream.cu_stream() as sys::cudaStream_t,
            )
        }?;
        drop(bias_guard);
        drop(c_guard);
        Ok(())
    }
}

/// `C` is M × N in its buffer (as the fused calls check it) and in `stream`'s context.
fn check_c(stream: &CudaStream, m: usize, n: usize, c: &MatrixRef<'_>) -> Result<()> {
    if c.data.stream().context().cu_ctx() != stream.context().cu_ctx() {
        return Err(Error::WrongContext { operand: Some(Operand::Residual) }.into());
    }
    validate_residual(Shape { m, n, k: 0 }, Extent { rows: c.rows, cols: c.cols, ld: c.ld, len: c.data.len() })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cublaslt_epilogues_exist_where_its_math_is_the_form_s() {
        let e = |a| Epilogue::<()>::activation(a);
        assert_eq!(CublasLtEpilogue::of(&e(Activation::ScaleAdd(0.5))), Ok(CublasLtEpilogue::ScaleAdd(0.5)));
        assert_eq!(CublasLtEpilogue::of(&e(Activation::Identity)), Ok(CublasLtEpilogue::Bias));
        assert_eq!(CublasLtEpilogue::of(&e(Activation::Relu)), Ok(CublasLtEpilogue::ReluBias));
        assert_eq!(CublasLtEpilogue::of(&e(Activation::GeluTanh)), Ok(CublasLtEpilogue::GeluBias));
        assert!(CublasLtEpilogue::of(&e(Activation::Gelu)).is_err());
        assert!(CublasLtEpilogue::of(&e(Activation::Silu)).is_err());
        // β·C is added before cuBLASLt's activation: only the linear forms take a residual.
        assert_eq!(CublasLtEpilogue::of(&Epilogue::<()>::linear().with_residual((), 1.0)), Ok(CublasLtEpilogue::Bias));
        assert!(CublasLtEpilogue::of(&e(Activation::Relu).with_residual_out(1.0)).is_err());
        assert_eq!(CublasLtEpilogue::ReluBias.name(true), "CUBLASLT_EPILOGUE_RELU_BIAS");
        assert_eq!(CublasLtEpilogue::GeluBias.name(false), "CUBLASLT_EPILOGUE_GELU");
        assert_eq!(CublasLtEpilogue::ScaleAdd(0.5).name(true), "CUBLASLT_EPILOGUE_BIAS");
    }
}
