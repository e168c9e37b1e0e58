//! candle integration (feature `candle`): [`FusedLinear`], a candle [`Module`] computing
//! `(v·s) + v`, `v = x·Wᵀ + b` — candle's `Linear` followed by `(y * s)? + y` — in one kernel, on
//! candle's CUDA tensors, through a candle custom op ([`candle_core::CustomOp1`]/`CustomOp2`).
//!
//! ```no_run
//! use candle_core::{Device, Module, Tensor};
//! use gemm_epilogue::candle::FusedLinear;
//! # fn main() -> candle_core::Result<()> {
//! let dev = Device::new_cuda(0)?;
//! let linear = candle_nn::Linear::new(
//!     Tensor::randn(0f32, 0.02, (4096, 4096), &dev)?,
//!     Some(Tensor::zeros(4096, candle_core::DType::F32, &dev)?),
//! );
//! let fused = FusedLinear::from_linear(&linear, 0.5)?; // W prepared once
//! let x = Tensor::randn(0f32, 1.0, (8, 2048, 4096), &dev)?;
//! let out = fused.forward(&x)?; // (8, 2048, 4096): what `(y * 0.5)? + y` gives, y = linear.forward(&x)?
//! # Ok(()) }
//! ```
//!
//! The layer holds the weight and bias tensors (no copy), the weight prepared for the kernels
//! (a [`PreparedWeight`]: W rounded to TF32 once, in 128-byte rows, N × ⌈K/32⌉·32 floats more
//! device memory), and a workspace reused across calls, grown when a call needs more. Inputs:
//! f32, on the layer's CUDA device, any rank ≥ 1 with `in_features` last; the batch dimensions
//! are flattened into rows as candle's `Linear` does. Strided inputs whose rows are evenly spaced
//! with unit column stride (a `narrow` of the last dimension, a slice of rows, a start offset)
//! run in place; others (a transposed input) are made contiguous first. CPU tensors, other
//! dtypes and shapes are candle errors, never panics. The kernels run on the device's stream;
//! nothing synchronises with the host.
//!
//! Other epilogues: [`FusedLinear::with_activation`] puts `f(v)` in place of `v·s + v` (a
//! [`crate::Activation`]: `Identity`, `Relu`, `Gelu` (erf: candle's `Tensor::gelu_erf`, which
//! `candle_nn::Activation::Gelu` runs), `GeluTanh` (`Tensor::gelu`,
//! `candle_nn::Activation::GeluPytorchTanh`), `Silu`), and
//! [`FusedLinear::forward_with_residual`] adds `β·C` for a tensor `C` of the output's shape:
//! `(act.forward(&linear.forward(x)?)? + (c * β)?)?` in the same one kernel (a custom op on
//! x, b and C, [`candle_core::CustomOp3`]). A transformer MLP block, both ways:
//! `examples/candle_bert_mlp.rs`.
//!
//! The rounding is this crate's: TF32 operands rounded to nearest by default
//! ([`crate::Precision`], [`FusedLinear::with_gemm`] for another). candle's own f32 matmul is
//! full FP32 unless `candle_core::cuda_backend::set_gemm_reduced_precision_f32(true)`.

mod op;
mod residual;
mod rows;

use std::sync::{Mutex, MutexGuard};

use candle_core::{DType, Module, Storage, Tensor};

use crate::gemm::{FusedGemm, PreparedWeight};
use crate::held::HeldWorkspace;
use crate::matrix::MatrixRef;

/// candle's `Linear` followed by `(y * s)? + y` (or by an activation, [`FusedLinear::with_activation`],
/// and a residual, [`FusedLinear::forward_with_residual`]), fused: see the [module docs](self).
#[derive(Debug)]
pub struct FusedLinear {
    gemm: FusedGemm,
    weight: Tensor,
    bias: Option<Tensor>,
    prepared: PreparedWeight,
    scale: f32,
    activation: crate::Activation,
    workspace: Mutex<HeldWorkspace>,
}

/// This crate's error as a candle error, `candle_core::Error::Cuda` (the original stays
/// reachable through `source()`), so `?` works in candle code.
impl From<crate::Error> for candle_core::Error {
    fn from(e: crate::Error) -> Self {
        candle_core::Error::Cuda(Box::new(e))
    }
}

pub(crate) fn candle_error(e: crate::Error) -> candle_core::Error {
    e.into()
}

fn msg(text: String) -> candle_core::Error {
    candle_core::Error::Msg(text)
}

impl FusedLinear {
    /// The layer of a candle `Linear` (its weight and bias tensors, shared, not copied) and the
    /// scale `s`, with this crate's default rounding.
    pub fn from_linear(linear: &candle_nn::Linear, scale: f32) -> candle_core::Result<Self> {
        Self::new(linear.weight().clone(), linear.bias().cloned(), scale)
    }

    /// `weight`: `out_features × in_features` (nn.Linear's layout), `bias`: `out_features`; both
    /// f32 on one CUDA device. Loads the kernels into the device's context (once per context)
    /// and prepares W on the device's stream.
    pub fn new(weight: Tensor, bias: Option<Tensor>, scale: f32) -> candle_core::Result<Self> {
        let device = weight.device().as_cuda_device().map_err(|_| {
            msg(format!("FusedLinear runs on CUDA tensors; the weight is on {:?}", weight.device().location()))
        })?;
        let gemm = FusedGemm::new(device.cuda_stream().context()).map_err(candle_error)?;
        Self::with_gemm(gemm, weight, bias, scale)
    }

    /// Like [`FusedLinear::new`] with a handle of one's own choice: another rounding
    /// ([`FusedGemm::with_precision`]) or dispatch. The handle must belong to the tensors'
    /// context.
    pub fn with_gemm(gemm: FusedGemm, weight: Tensor, bias: Option<Tensor>, scale: f32) -> candle_core::Result<Self> {
        let device = weight.device().as_cuda_device().map_err(|_| {
            msg(format!("FusedLinear runs on CUDA tensors; the weight is on {:?}", weight.device().location()))
        })?;
        let &[n, k] = weight.dims() else {
            return Err(msg(format!(
                "FusedLinear: the weight must be out_features × in_features, not {:?}",
                weight.shape()
            )));
        };
        if weight.dtype() != DType::F32 {
            return Err(msg(format!("FusedLinear takes f32 tensors; the weight is {:?}", weight.dtype())));
        }
        if let Some(b) = &bias {
            if b.dims() != [n] {
                return Err(msg(format!(
                    "FusedLinear: the bias must have out_features = {n} elements, not shape {:?}",
                    b.shape()
                )));
            }
            if b.dtype() != DType::F32 {
                return Err(msg(format!("FusedLinear takes f32 tensors; the bias is {:?}", b.dtype())));
            }
            if !b.device().same_device(weight.device()) {
                return Err(msg("FusedLinear: the bias is on another device than the weight".into()));
            }
        }
        // The kernels read the bias as N consecutive floats.
        let bias = bias.map(|b| b.contiguous()).transpose()?;
        // W is read once, here, into the prepared copy; rows need a unit column stride.
        let w = match rows::rows_of(weight.layout(), k) {
            Some(_) => weight.clone(),
            None => weight.contiguous()?,
        };
        let (storage, layout) = w.storage_and_layout();
        let Storage::Cuda(cuda) = &*storage else {
            return Err(msg("FusedLinear runs on CUDA tensors".into()));
        };
        let (_, ld) =
            rows::rows_of(layout, k).ok_or_else(|| msg("FusedLinear: cannot read the weight's rows".into()))?;
        let data = cuda.as_cuda_slice::<f32>()?;
        let view = data
            .try_slice(layout.start_offset()..)
            .ok_or_else(|| msg("FusedLinear: the weight's offset is past its storage".into()))?;
        let prepared =
            gemm.prepare_weight(&device.cuda_stream(), &MatrixRef::with_ld(view, n, k, ld)).map_err(candle_error)?;
        drop(storage);
        let activation = crate::Activation::ScaleAdd(scale);
        Ok(Self { gemm, weight, bias, prepared, scale, activation, workspace: Mutex::default() })
    }

    /// Input width K.
    pub fn in_features(&self) -> usize {
        self.prepared.cols()
    }
    /// Output width N.
    pub fn out_features(&self) -> usize {
        self.prepared.rows()
    }
    /// The scale `s` the layer was made with (its epilogue's unless
    /// [`FusedLinear::with_activation`] chose another).
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// The layer with another epilogue: `f(v)` for `f` = `activation` in place of `v·s + v`
    /// (e.g. [`crate::Activation::Gelu`] for a BERT MLP's first Linear, `candle_nn::Activation::
    /// GeluPytorchTanh`'s counterpart being [`crate::Activation::GeluTanh`]).
    pub fn with_activation(self, activation: crate::Activation) -> Self {
        Self { activation, ..self }
    }

    /// `f` of the layer's `out = f(v)`.
    pub fn activation(&self) -> crate::Activation {
        self.activation
    }
    /// The weight tensor, out_features × in_features.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }
    /// The bias tensor, if any.
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }
    /// The handle the layer runs with.
    pub fn gemm(&self) -> &FusedGemm {
        &self.gemm
    }
    /// The weight as the kernels read it.
    pub fn prepared_weight(&self) -> &PreparedWeight {
        &self.prepared
    }
    /// f32 elements of workspace the layer holds now.
    pub fn workspace_len(&self) -> usize {
        self.held().len()
    }
    /// How many times the layer allocated its workspace (see [`crate::Linear::workspace_allocations`]).
    pub fn workspace_allocations(&self) -> u64 {
        self.held().allocations()
    }

    fn held(&self) -> MutexGuard<'_, HeldWorkspace> {
        self.workspace.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Module for FusedLinear {
    /// `x`: `(…, in_features)`, f32, on the layer's CUDA device. Returns `(…, out_features)`:
    /// `f(v)`, `v = x·Wᵀ + b`, for the layer's [`FusedLinear::activation`].
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let x = self.input(x)?;
        let op = op::FusedLinearOp { layer: self };
        match &self.bias {
            Some(b) => x.apply_op2_no_bwd(b, &op),
            None => x.apply_op1_no_bwd(&op),
        }
    }
}

impl FusedLinear {
    /// `x` checked (f32, CUDA, `(…, in_features)`) and as the kernels read it: itself, or a
    /// contiguous copy when its rows are not evenly spaced with unit column stride.
    fn input(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        if !x.device().is_cuda() {
            return Err(msg(format!(
                "FusedLinear runs on CUDA tensors; x is on {:?} (move it with x.to_device(..))",
                x.device().location()
            )));
        }
        if x.dtype() != DType::F32 {
            return Err(msg(format!("FusedLinear takes f32 tensors; x is {:?}", x.dtype())));
        }
        let k = self.in_features();
        if x.dims().last() != Some(&k) {
            return Err(msg(format!("FusedLinear: x must be (…, in_features = {k}), not {:?}", x.shape())));
        }
        // Rows the kernel cannot walk with one stride (a transposed x) are copied first.
        match rows::rows_of(x.layout(), k) {
            Some(_) => Ok(x.clone()),
            None => x.contiguous(),
        }
    }
}
