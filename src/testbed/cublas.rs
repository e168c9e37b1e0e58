//! What a user would do without this crate, for tests and benchmarks to compare against:
//! cuBLAS's TF32 GEMM (`cublasGemmEx`, `CUBLAS_COMPUTE_32F_FAST_TF32`) writing `acc` into `out`,
//! then one vectorised elementwise kernel of ours applying the fused kernels' epilogue functor in
//! a second pass over `out`: `out = f(acc + b) + β·C` for any [`Epilogue`] (PyTorch's unfused
//! `F.linear` followed by `f` and `torch.add`). Same math and rounding as the fused kernel for the
//! same `acc`; one extra read and write of the output (and a read of `C`).

use std::sync::Arc;

use cudarc::cublas::{sys as blas, CudaBlas};
use cudarc::driver::{
    CudaFunction, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceSlice, LaunchConfig, PushKernelArg,
};

use super::Result;
use crate::epilogue::{Epilogue, Residual, Source};
use crate::error::{Error, Operand};
use crate::gemm::validate::{validate_residual, Extent};
use crate::gemm::{rowwise_grid, FusedGemm, Shape};
use crate::matrix::{MatrixMut, MatrixRef};
use crate::sys::{GeElementwiseParams, GeEpilogue};

/// The elementwise pass's symbol (`csrc/elementwise/epilogue.cuh`).
const ELEMENTWISE: &str = "ge_elementwise_epilogue";

/// cuBLAS's compute types the testbed times (`cublasGemmEx`'s `computeType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CublasCompute {
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`: one TF32 product (the baseline of [`crate::Precision::Tf32`]).
    Tf32,
    /// `CUBLAS_COMPUTE_32F`: fp32 products on the CUDA cores, cuBLAS's only FP32-accurate path on sm_90.
    Fp32,
    /// `CUBLAS_COMPUTE_32F_EMULATED_16BFX9`: fp32 emulated with nine BF16 products on the GPUs
    /// that support it; accepted on sm_90, where it runs as plain fp32 (docs/BENCHMARKS.md).
    Bf16x9,
}

/// cuBLAS TF32 GEMM + our elementwise epilogue (any [`Epilogue`]), on one stream.
#[derive(Debug)]
pub struct CublasBaseline {
    blas: CudaBlas,
    stream: Arc<CudaStream>,
    gemm: FusedGemm,
    elementwise: CudaFunction,
}

impl CublasBaseline {
    /// A cuBLAS handle on `stream`; `gemm` supplies the elementwise kernel and the
    /// validation.
    /// [`super::Error::NoLibrary`] where cudarc cannot load libcublas.
    pub fn new(gemm: &FusedGemm, stream: Arc<CudaStream>) -> Result<Self> {
        gemm.check_stream(&stream)?;
        super::cublas_library()?;
        let elementwise = gemm.load_function(ELEMENTWISE)?;
        Ok(Self { blas: CudaBlas::new(stream.clone())?, stream, gemm: gemm.clone(), elementwise })
    }

    /// The stream every call runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// `out = x·wᵀ` with cuBLAS TF32 tensor cores (no bias, no epilogue): the ceiling to beat.
    pub fn gemm(&self, x: &MatrixRef<'_>, w: &MatrixRef<'_>, out: &mut MatrixMut<'_>) -> Result<()> {
        self.gemm_as(CublasCompute::Tf32, x, w, out)
    }

    /// [`CublasBaseline::gemm`] in another of cuBLAS's compute types (the baselines of
    /// [`crate::Precision::Tf32x3`]).
    pub fn gemm_as(
        &self,
        compute: CublasCompute,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        out: &mut MatrixMut<'_>,
    ) -> Result<()> {
        let shape = self.gemm.validate(x, w, None, &out.view())?;
        if shape.m == 0 || shape.n == 0 {
            return Ok(());
        }
        let int = |what: &'static str, v: usize| -> Result<i32> {
            i32::try_from(v.max(1))
                .map_err(|_| Error::DimensionTooLarge { what, value: v, max: i32::MAX as usize }.into())
        };
        let (ldx, ldw, ldo) = (int("ldx (cuBLAS)", x.ld)?, int("ldw (cuBLAS)", w.ld)?, int("ldo (cuBLAS)", out.ld)?);
        let stream = self.stream.clone();
        let (x_ptr, _xg) = x.data.device_ptr(&stream);
        let (w_ptr, _wg) = w.data.device_ptr(&stream);
        let (o_ptr, _og) = out.data.device_ptr_mut(&stream);
        let (one, zero) = (1.0f32, 0.0f32);
        // Row-major out (M × N) is column-major outᵀ (N × M) = W (N × K) · Xᵀ (K × M): cuBLAS sees
        // W as a column-major K × N matrix (op T) and X as a column-major K × M matrix (op N).
        // SAFETY: validated extents; live device buffers ordered on `stream` by the guards;
        // alpha/beta are host pointers (cuBLAS's default pointer mode).
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *self.blas.handle(),
                blas::cublasOperation_t::CUBLAS_OP_T,
                blas::cublasOperation_t::CUBLAS_OP_N,
                shape.n as i32,
                shape.m as i32,
                shape.k as i32,
                (&one as *const f32).cast(),
                w_ptr as *const _,
                blas::cudaDataType::CUDA_R_32F,
                ldw,
                x_ptr as *const _,
                blas::cudaDataType::CUDA_R_32F,
                ldx,
                (&zero as *const f32).cast(),
                o_ptr as *mut _,
                blas::cudaDataType::CUDA_R_32F,
                ldo,
                match compute {
                    CublasCompute::Tf32 => blas::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
                    CublasCompute::Fp32 => blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    CublasCompute::Bf16x9 => blas::cublasComputeType_t::CUBLAS_COMPUTE_32F_EMULATED_16BFX9,
                },
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }?;
        Ok(())
    }

    /// The second pass alone, in place on `out` (which holds a GEMM's `acc`):
    /// `out = f(out + b) + β·C` with `epilogue`'s `f`, `β` and `C`, each element rounded as the
    /// fused kernels round the same `v = acc + b` (their functor, `csrc/common/epilogue.cuh`).
    /// `C` is an M × N view, or [`Source::Out`]: `out` as this pass finds it (the `acc` it reads),
    /// each element read by the thread that then writes it.
    pub fn elementwise(
        &self,
        bias: Option<&CudaView<'_, f32>>,
        epilogue: Epilogue<&MatrixRef<'_>>,
        out: &mut MatrixMut<'_>,
    ) -> Result<()> {
        let (m, n) = (out.rows, out.cols);
        if let Some(b) = bias {
            if b.len() != n {
                return Err(Error::ShapeMismatch {
                    what: "bias.len() (N) vs out.cols (N)",
                    expected: n,
                    found: b.len(),
                }
                .into());
            }
        }
        let c = match epilogue.residual {
            Some(Residual { source: Source::Matrix(c), .. }) => Some(c),
            _ => None,
        };
        let ctx = self.stream.context().cu_ctx();
        if out.data.stream().context().cu_ctx() != ctx {
            return Err(Error::WrongContext { operand: Some(Operand::Out) }.into());
        }
        if bias.is_some_and(|b| b.stream().context().cu_ctx() != ctx) {
            return Err(Error::WrongContext { operand: Some(Operand::Bias) }.into());
        }
        if let Some(c) = c {
            self.check_residual(Shape { m, n, k: 0 }, c)?;
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        if m > i32::MAX as usize || n > i32::MAX as usize {
            return Err(
                Error::DimensionTooLarge { what: "out rows/cols", value: m.max(n), max: i32::MAX as usize }.into()
            );
        }
        let needed = (m - 1).saturating_mul(out.ld).saturating_add(n);
        if out.ld < n {
            return Err(Error::LeadingDimension { operand: Operand::Out, ld: out.ld, cols: n }.into());
        }
        if needed > out.data.len() {
            return Err(Error::BufferTooSmall { operand: Operand::Out, needed, len: out.data.len() }.into());
        }
        let stream = self.stream.clone();
        let (b_ptr, _bg) = match bias {
            Some(b) => {
                let (p, g) = b.device_ptr(&stream);
                (p, Some(g))
            }
            None => (0, None),
        };
        let (c_ptr, _cg) = match c {
            Some(c) => {
                let (p, g) = c.data.device_ptr(&stream);
                (p, Some(g))
            }
            None => (0, None),
        };
        let (o_ptr, _og) = out.data.device_ptr_mut(&stream);
        let (activation, scale) = epilogue.activation.code();
        let (source, ldc, beta) = match epilogue.residual {
            Some(Residual { source: Source::Matrix(c), beta }) => (c_ptr, c.ld, beta),
            // The kernel reads each element of C before the same thread writes it to out.
            Some(Residual { source: Source::Out, beta }) => (o_ptr, out.ld, beta),
            None => (0, 0, 0.0),
        };
        let params = GeElementwiseParams {
            out: o_ptr as *mut f32,
            bias: b_ptr as *const f32,
            ldo: out.ld as i64,
            epilogue: GeEpilogue { source: source as *const f32, ldc: ldc as i64, scale, beta, activation },
            m: m as i32,
            n: n as i32,
        };
        let grid_dim = rowwise_grid(m, n.div_ceil(4), self.gemm.device().sm_count);
        let cfg = LaunchConfig { grid_dim, block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let mut launch = stream.launch_builder(&self.elementwise);
        launch.arg(&params);
        // SAFETY: params match the kernel's `const GeElementwiseParams`; extents validated above
        // (C's as the fused calls validate it; C cannot overlap out but as out itself, which the
        // kernel reads before it writes).
        unsafe { launch.launch(cfg) }?;
        Ok(())
    }

    /// cuBLAS GEMM then the elementwise pass: the unfused `f(F.linear(x, w, b)) + β·C`, what
    /// PyTorch runs for the same expression. [`super::Error::Unsupported`] for a residual
    /// through [`Source::Out`]: the GEMM overwrites `out` before the pass could read it as `C`.
    pub fn linear_epilogue(
        &self,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        epilogue: Epilogue<&MatrixRef<'_>>,
        out: &mut MatrixMut<'_>,
    ) -> Result<()> {
        self.linear_epilogue_as(CublasCompute::Tf32, x, w, bias, epilogue, out)
    }

    /// [`CublasBaseline::linear_epilogue`] with the GEMM in another of cuBLAS's compute types.
    pub fn linear_epilogue_as(
        &self,
        compute: CublasCompute,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        epilogue: Epilogue<&MatrixRef<'_>>,
        out: &mut MatrixMut<'_>,
    ) -> Result<()> {
        if matches!(epilogue.residual, Some(Residual { source: Source::Out, .. })) {
            return Err(super::Error::Unsupported {
                what: "an in-place residual (C = out) after cuBLAS's GEMM: the GEMM overwrites out first",
            });
        }
        // Everything checked before the GEMM writes out: on error nothing is written.
        let shape = self.gemm.validate(x, w, bias, &out.view())?;
        if let Some(Residual { source: Source::Matrix(c), .. }) = epilogue.residual {
            self.check_residual(shape, c)?;
        }
        self.gemm_as(compute, x, w, out)?;
        self.elementwise(bias, epilogue, out)
    }

    /// A residual source `C`: M × N in its buffer, in this context (as the fused calls check it).
    fn check_residual(&self, shape: Shape, c: &MatrixRef<'_>) -> Result<()> {
        if c.data.stream().context().cu_ctx() != self.stream.context().cu_ctx() {
            return Err(Error::WrongContext { operand: Some(Operand::Residual) }.into());
        }
        validate_residual(shape, Extent { rows: c.rows, cols: c.cols, ld: c.ld, len: c.data.len() })?;
        Ok(())
    }

    /// cuBLAS GEMM then the elementwise pass: the unfused `linear(x) * s + linear(x)` (the seed
    /// form of [`CublasBaseline::linear_epilogue`]).
    pub fn linear_scale_residual(
        &self,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &mut MatrixMut<'_>,
    ) -> Result<()> {
        self.linear_epilogue(x, w, bias, Epilogue::scale_add(scale), out)
    }
}
