//! The custom op: x (and the bias) as candle hands them to a CUDA op, run through the layer's
//! held workspace into a fresh output. [`run`] also serves the residual op (`super::residual`),
//! which adds `β·C`.

use candle_core::{CpuStorage, CudaStorage, CustomOp1, CustomOp2, Layout, Shape};

use super::{candle_error, msg, rows, FusedLinear};
use crate::epilogue::Epilogue;
use crate::held::CallKey;
use crate::matrix::MatrixMut;

pub(super) struct FusedLinearOp<'a> {
    pub layer: &'a FusedLinear,
}

const NAME: &str = "gemm-epilogue-fused-linear";

pub(super) fn cpu_error() -> candle_core::Error {
    msg("FusedLinear runs on CUDA tensors only; this tensor is on the CPU".into())
}

/// `out = f(v) + β·C` for the layer's `f`, `v = x·Wᵀ + b`, into a fresh `(…, out_features)`
/// tensor of x's batch dimensions; without `residual` just `f(v)`. `residual`: C, of the
/// output's shape, read in place (rows evenly spaced, unit column stride), and β.
pub(super) fn run(
    layer: &FusedLinear,
    x: &CudaStorage,
    xl: &Layout,
    bias: Option<(&CudaStorage, &Layout)>,
    residual: Option<(&CudaStorage, &Layout, f32)>,
) -> candle_core::Result<(CudaStorage, Shape)> {
    let (k, n) = (layer.in_features(), layer.out_features());
    let x_matrix = rows::matrix(x, xl, k, "x")?;
    let (rows, ld) = (x_matrix.rows(), x_matrix.ld());
    let mut dims = xl.dims().to_vec();
    if let Some(last) = dims.last_mut() {
        *last = n;
    }
    let residual = match residual {
        Some((_, cl, _)) if cl.dims() != dims.as_slice() => {
            return Err(msg(format!("FusedLinear: the residual must be {dims:?} (the output's shape), not {cl:?}")))
        }
        Some((c, cl, beta)) => Some((rows::matrix(c, cl, n, "the residual")?, beta)),
        None => None,
    };
    let bias_view = match bias {
        Some((b, bl)) => {
            let start = bl.start_offset();
            let view = b
                .as_cuda_slice::<f32>()?
                .try_slice(start..start.saturating_add(n))
                .ok_or_else(|| msg("FusedLinear: the bias is shorter than out_features".into()))?;
            Some(view)
        }
        None => None,
    };
    let epilogue = match &residual {
        Some((c, beta)) => Epilogue::activation(layer.activation).with_residual(c, *beta),
        None => Epilogue::activation(layer.activation),
    };
    let len = rows.checked_mul(n).ok_or_else(|| msg("FusedLinear: rows · out_features overflows".into()))?;
    let device = &x.device;
    let stream = device.cuda_stream();
    // SAFETY: the kernel writes every one of the rows × n elements before anything reads
    // them (stream order); on error the buffer is dropped unread.
    let mut out = unsafe { device.alloc::<f32>(len.max(1)) }?;
    let mut out_matrix = MatrixMut::new(out.slice_mut(0..len), rows, n);
    // Allocations start 256-byte aligned: x's alignment is that of its offset.
    let key = CallKey { rows, ld, offset_mod_4: xl.start_offset() % 4 };
    layer
        .held()
        .run(&layer.gemm, &stream, key, &x_matrix, &layer.prepared, bias_view.as_ref(), epilogue, &mut out_matrix)
        .map_err(candle_error)?;
    Ok((CudaStorage::wrap_cuda_slice(out, device.clone()), Shape::from(dims)))
}

impl CustomOp1 for FusedLinearOp<'_> {
    fn name(&self) -> &'static str {
        NAME
    }
    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(cpu_error())
    }
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        run(self.layer, x, xl, None, None)
    }
}

impl CustomOp2 for FusedLinearOp<'_> {
    fn name(&self) -> &'static str {
        NAME
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(cpu_error())
    }
    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        b: &CudaStorage,
        bl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        run(self.layer, x, xl, Some((b, bl)), None)
    }
}
