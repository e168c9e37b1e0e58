//! The custom op: x (and the bias) as candle hands them to a CUDA op, run through the layer's
//! held workspace into a fresh output.

use candle_core::{CpuStorage, CudaStorage, CustomOp1, CustomOp2, Layout, Shape};

use super::{candle_error, msg, rows, FusedLinear};
use crate::held::CallKey;
use crate::matrix::{MatrixMut, MatrixRef};

pub(super) struct FusedLinearOp<'a> {
    pub layer: &'a FusedLinear,
}

const NAME: &str = "gemm-epilogue-fused-linear";

fn cpu_error() -> candle_core::Error {
    msg("FusedLinear runs on CUDA tensors only; this tensor is on the CPU".into())
}

impl FusedLinearOp<'_> {
    fn cuda(
        &self,
        x: &CudaStorage,
        xl: &Layout,
        bias: Option<(&CudaStorage, &Layout)>,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let layer = self.layer;
        let (k, n) = (layer.in_features(), layer.out_features());
        let (rows, ld) = rows::rows_of(xl, k)
            .ok_or_else(|| msg(format!("FusedLinear: x's layout {xl:?} is not rows of in_features = {k}")))?;
        let x_data = x.as_cuda_slice::<f32>()?;
        let x_view = x_data
            .try_slice(xl.start_offset()..)
            .ok_or_else(|| msg("FusedLinear: x's offset is past its storage".into()))?;
        let x_matrix = MatrixRef::with_ld(x_view, rows, k, ld);
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
            .run(
                &layer.gemm,
                &stream,
                key,
                &x_matrix,
                &layer.prepared,
                bias_view.as_ref(),
                layer.activation,
                &mut out_matrix,
            )
            .map_err(candle_error)?;
        let mut dims = xl.dims().to_vec();
        if let Some(last) = dims.last_mut() {
            *last = n;
        }
        Ok((CudaStorage::wrap_cuda_slice(out, device.clone()), Shape::from(dims)))
    }
}

impl CustomOp1 for FusedLinearOp<'_> {
    fn name(&self) -> &'static str {
        NAME
    }
    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        Err(cpu_error())
    }
    fn cuda_fwd(&self, x: &CudaStorage, xl: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        self.cuda(x, xl, None)
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
        self.cuda(x, xl, Some((b, bl)))
    }
}
