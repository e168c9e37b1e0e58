//! The residual input: [`FusedLinear::forward_with_residual`], `out = f(v) + β·C` in the one
//! kernel, through a candle custom op on (x, C) or (x, b, C) (`CustomOp2`/`CustomOp3`).

use candle_core::{CpuStorage, CudaStorage, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor};

use super::op::{cpu_error, run};
use super::{msg, rows, FusedLinear};

impl FusedLinear {
    /// `out = f(v) + β·C`, `v = x·Wᵀ + b`, in the one kernel [`candle_core::Module::forward`]
    /// runs: candle's `(act.forward(&linear.forward(x)?)? + (c * β)?)?`, PyTorch's
    /// `act(linear(x)) + c * β`, with `f` = `act` the layer's [`FusedLinear::activation`]
    /// (`v·s + v` unless [`FusedLinear::with_activation`] chose another). The add is one fused
    /// multiply-add, as PyTorch's `torch.add(f(v), c, alpha=β)` rounds it: exactly `f(v) + C`
    /// for β = 1 (candle's `c * β` then `+` round twice for other β).
    ///
    /// `x` as [`candle_core::Module::forward`] takes it. `residual`: f32, on x's CUDA device, of
    /// the output's shape (x's dimensions with `out_features` last; its batch dimensions are
    /// flattened into rows as x's are). Read in place when its rows are evenly spaced with unit
    /// column stride (a `narrow` of the last dimension, a slice of rows, a start offset), made
    /// contiguous first otherwise (a transposed tensor). Another dtype, device or shape is a
    /// candle error, never a panic. Returns a fresh `(…, out_features)` tensor.
    pub fn forward_with_residual(&self, x: &Tensor, residual: &Tensor, beta: f32) -> candle_core::Result<Tensor> {
        let x = self.input(x)?;
        if !residual.device().is_cuda() {
            return Err(msg(format!(
                "FusedLinear runs on CUDA tensors; the residual is on {:?}",
                residual.device().location()
            )));
        }
        if residual.device().location() != x.device().location() {
            return Err(msg(format!(
                "FusedLinear: the residual is on {:?}, x on {:?}",
                residual.device().location(),
                x.device().location()
            )));
        }
        if residual.dtype() != DType::F32 {
            return Err(msg(format!("FusedLinear takes f32 tensors; the residual is {:?}", residual.dtype())));
        }
        let n = self.out_features();
        let mut out_dims = x.dims().to_vec();
        if let Some(last) = out_dims.last_mut() {
            *last = n;
        }
        if residual.dims() != out_dims.as_slice() {
            return Err(msg(format!(
                "FusedLinear: the residual's shape must be the output's, {out_dims:?}, not {:?}",
                residual.dims()
            )));
        }
        let residual = match rows::rows_of(residual.layout(), n) {
            Some(_) => residual.clone(),
            None => residual.contiguous()?,
        };
        let op = ResidualOp { layer: self, beta };
        match &self.bias {
            Some(b) => x.apply_op3_no_bwd(b, &residual, &op),
            None => x.apply_op2_no_bwd(&residual, &op),
        }
    }
}

/// The layer's op with `+ β·C`: on (x, C) without a bias, (x, b, C) with one.
struct ResidualOp<'a> {
    layer: &'a FusedLinear,
    beta: f32,
}

const NAME: &str = "gemm-epilogue-fused-linear-residual";

impl CustomOp2 for ResidualOp<'_> {
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
        c: &CudaStorage,
        cl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        run(self.layer, x, xl, None, Some((c, cl, self.beta)))
    }
}

impl CustomOp3 for ResidualOp<'_> {
    fn name(&self) -> &'static str {
        NAME
    }
    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
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
        c: &CudaStorage,
        cl: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        run(self.layer, x, xl, Some((b, bl)), Some((c, cl, self.beta)))
    }
}
