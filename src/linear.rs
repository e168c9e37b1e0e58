//! A layer-like type: `nn.Linear(in_features, out_features)` followed by `y*s + y`, fused.

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{CudaSlice, CudaStream, DeviceSlice};

use crate::epilogue::{Activation, Epilogue};
use crate::error::{Error, Operand, Result};
use crate::gemm::validate::MAX_DIM;
use crate::gemm::{FusedGemm, Gemm, Plan, PreparedWeight};
use crate::held::{CallKey, HeldWorkspace};
use crate::matrix::{MatrixMut, MatrixRef};

/// Holds the weight `W` (out_features × in_features, row-major, as in PyTorch), an optional bias
/// and the scale `s`; [`Linear::forward`] computes `(v*s) + v` with `v = x·Wᵀ + b` in one kernel.
/// It also holds W prepared for its handle's rounding ([`FusedGemm::prepare_weight`]: rounded to
/// TF32 once, in 128-byte rows), which every call reads: N × ⌈K/32⌉·32 more floats of device
/// memory, and no per-call rounding or repack of W.
///
/// It owns the workspace [`Linear::forward`] runs with (see [`FusedGemm::run_with_workspace`]):
/// allocated by the first call that needs one, grown when a call needs more, reused otherwise,
/// so calls of a shape seen before allocate nothing but their output. Calls from several
/// threads take turns for it (a mutex held while the call is queued, not while it runs); cudarc's
/// event tracking orders its uses on different streams.
#[derive(Debug)]
pub struct Linear {
    gemm: FusedGemm,
    weight: CudaSlice<f32>,
    prepared: PreparedWeight,
    bias: Option<CudaSlice<f32>>,
    in_features: usize,
    out_features: usize,
    scale: f32,
    activation: Activation,
    workspace: Mutex<HeldWorkspace>,
}

impl Linear {
    /// Wraps device buffers: `weight` must hold exactly `out_features * in_features` elements
    /// and `bias`, if any, `out_features`. Both must live in `gemm`'s context.
    pub fn new(
        gemm: FusedGemm,
        weight: CudaSlice<f32>,
        bias: Option<CudaSlice<f32>>,
        in_features: usize,
        out_features: usize,
        scale: f32,
    ) -> Result<Self> {
        let expected = out_features.checked_mul(in_features).ok_or(Error::DimensionTooLarge {
            what: "in_features (out_features · in_features overflows)",
            value: in_features,
            max: usize::MAX / out_features.max(1),
        })?;
        if weight.len() != expected {
            return Err(Error::ShapeMismatch {
                what: "weight.len() vs out_features · in_features",
                expected,
                found: weight.len(),
            });
        }
        if let Some(b) = &bias {
            if b.len() != out_features {
                return Err(Error::ShapeMismatch {
                    what: "bias.len() vs out_features",
                    expected: out_features,
                    found: b.len(),
                });
            }
        }
        let ctx = gemm.context().cu_ctx();
        if weight.context().cu_ctx() != ctx {
            return Err(Error::WrongContext { operand: Some(Operand::W) });
        }
        if bias.as_ref().is_some_and(|b| b.context().cu_ctx() != ctx) {
            return Err(Error::WrongContext { operand: Some(Operand::Bias) });
        }
        let prepared =
            gemm.prepare_weight(weight.stream(), &MatrixRef::from_slice(&weight, out_features, in_features))?;
        let activation = Activation::ScaleAdd(scale);
        Ok(Self {
            gemm,
            weight,
            prepared,
            bias,
            in_features,
            out_features,
            scale,
            activation,
            workspace: Mutex::default(),
        })
    }

    /// Input width K.
    pub fn in_features(&self) -> usize {
        self.in_features
    }
    /// Output width N.
    pub fn out_features(&self) -> usize {
        self.out_features
    }
    /// The scale `s` the layer was made with (its epilogue's unless [`Linear::with_activation`]
    /// chose another).
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// The layer with another epilogue: `f(v)` for `f` = `activation` in place of `v·s + v`
    /// (e.g. [`Activation::Gelu`] for a transformer MLP's first Linear; [`Activation::Identity`]
    /// for plain `F.linear`). A residual input: [`Linear::forward_with_residual`].
    pub fn with_activation(self, activation: Activation) -> Self {
        Self { activation, ..self }
    }

    /// `f` of the layer's `out = f(v)`: [`Activation::ScaleAdd`] of [`Linear::scale`] unless
    /// [`Linear::with_activation`] chose another.
    pub fn activation(&self) -> Activation {
        self.activation
    }
    /// The weight, out_features × in_features.
    pub fn weight(&self) -> &CudaSlice<f32> {
        &self.weight
    }
    /// The weight as the kernels read it.
    pub fn prepared_weight(&self) -> &PreparedWeight {
        &self.prepared
    }
    /// The bias, if any.
    pub fn bias(&self) -> Option<&CudaSlice<f32>> {
        self.bias.as_ref()
    }

    /// f32 elements of workspace the layer holds now (0 before a call needed one).
    pub fn workspace_len(&self) -> usize {
        self.held().len()
    }
    /// How many times the layer allocated its workspace: the first call that needed one and
    /// every call that needed more than any before it. Calls of a shape seen before add none.
    pub fn workspace_allocations(&self) -> u64 {
        self.held().allocations()
    }

    /// `x` is `rows × in_features`, dense. Allocates the `rows × out_features` output on `x`'s
    /// stream and fills it there (asynchronously; no host synchronisation), with the workspace
    /// the call wants (to repack x when `in_features` is not a multiple of 4; stream-K's partial
    /// tiles): the layer's own, grown first if this call needs more than it holds. A repeated
    /// shape plans once and allocates only the output. [`Linear::forward_into`] allocates
    /// nothing and uses no workspace.
    ///
    /// Returns `Ok(None)` when the output is empty (`rows` or `out_features` is 0): nothing is
    /// allocated or launched, as [`FusedGemm::run`] returns `Ok(None)` for an empty problem. An
    /// empty batch is valid input (PyTorch returns an empty tensor), so it is not an error; and
    /// it cannot be an empty `CudaSlice`, since the driver allocates no 0-byte buffer
    /// (`cuMemAlloc` rejects a size of 0) — a 1-element stand-in would hand the caller an
    /// uninitialised element. An allocation the driver refuses (out of memory) is
    /// [`Error::Driver`], one whose byte count overflows is [`Error::DimensionTooLarge`]; neither
    /// panics.
    pub fn forward(&self, x: &CudaSlice<f32>, rows: usize) -> Result<Option<CudaSlice<f32>>> {
        self.forward_epilogue(x, rows, None)
    }

    /// [`Linear::forward`] plus a residual: `out = f(v) + β·C`, PyTorch's
    /// `torch.add(act(linear(x)), residual, alpha=beta)` (`f` is the layer's
    /// [`Linear::activation`]; the add is one fused multiply-add, exactly `f(v) + C` for β = 1).
    /// `residual` is `rows × out_features`, possibly strided, in the layer's context. One of
    /// another shape or context is refused before anything is allocated
    /// ([`Error::ShapeMismatch`], [`Error::WrongContext`]); one that does not fit its buffer, by
    /// the call ([`Error::BufferTooSmall`], [`Error::LeadingDimension`]: the output is dropped
    /// unwritten).
    pub fn forward_with_residual(
        &self,
        x: &CudaSlice<f32>,
        rows: usize,
        residual: &MatrixRef<'_>,
        beta: f32,
    ) -> Result<Option<CudaSlice<f32>>> {
        if (residual.rows(), residual.cols()) != (rows, self.out_features) {
            let (what, expected, found) = if residual.rows() != rows {
                ("residual.rows vs rows", rows, residual.rows())
            } else {
                ("residual.cols vs out_features", self.out_features, residual.cols())
            };
            return Err(Error::ShapeMismatch { what, expected, found });
        }
        if residual.data.stream().context().cu_ctx() != self.gemm.context().cu_ctx() {
            return Err(Error::WrongContext { operand: Some(Operand::Residual) });
        }
        self.forward_epilogue(x, rows, Some((residual, beta)))
    }

    /// `forward` with the layer's activation and, if given, `+ β·C`.
    fn forward_epilogue(
        &self,
        x: &CudaSlice<f32>,
        rows: usize,
        residual: Option<(&MatrixRef<'_>, f32)>,
    ) -> Result<Option<CudaSlice<f32>>> {
        let stream = x.stream().clone();
        let x = MatrixRef::from_slice(x, rows, self.in_features);
        let len = rows.checked_mul(self.out_features).ok_or(Error::DimensionTooLarge {
            what: "rows (rows · out_features overflows)",
            value: rows,
            max: usize::MAX / self.out_features.max(1),
        })?;
        // Validate before allocating, so a bad call allocates nothing.
        self.check_input(&x)?;
        if len == 0 {
            return Ok(None);
        }
        // rows against the kernels' limit, before anything is allocated (the rest of the
        // validation is the call's own).
        if rows > MAX_DIM {
            return Err(Error::DimensionTooLarge { what: "rows", value: rows, max: MAX_DIM });
        }
        // SAFETY: every one of the rows × out_features elements is written by the kernel before
        // anything can read it (stream order); on a launch error the buffer is dropped unread.
        let mut out = unsafe { alloc_f32(&stream, len, "rows · out_features (output bytes)") }?;
        let mut out_view = MatrixMut::new(out.slice_mut(0..len), rows, self.out_features);
        let bias = self.bias.as_ref().map(|b| b.as_view());
        // A whole allocation: x starts 256-byte aligned.
        let key = CallKey { rows, ld: self.in_features, offset_mod_4: 0 };
        let epilogue = match residual {
            Some((c, beta)) => Epilogue::activation(self.activation).with_residual(c, beta),
            None => Epilogue::activation(self.activation),
        };
        self.held().run(&self.gemm, &stream, key, &x, &self.prepared, bias.as_ref(), epilogue, &mut out_view)?;
        Ok(Some(out))
    }

    /// Like [`Linear::forward`] into a caller-provided (possibly strided) output, on `stream`,
    /// without allocating. Returns the plan that ran (`None` when there was nothing to do).
    pub fn forward_into(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        out: &mut MatrixMut<'_>,
    ) -> Result<Option<Plan>> {
        let bias = self.bias.as_ref().map(|b| b.as_view());
        let epilogue = Epilogue::activation(self.activation);
        let bias = bias.as_ref();
        self.gemm.run_gemm(stream, Gemm { x, w: &self.prepared, bias, epilogue, out, workspace: None })
    }

    /// [`Linear::forward_into`] with the workspace `forward` uses (the layer's own, grown if
    /// this call needs more), on `stream`, through `gemm` (the layer's handle or one derived
    /// from it, e.g. with an SM limit; the same precision): what a caller that owns the output
    /// buffer runs (the sharded layer writes its shards into its gather buffers so).
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) fn forward_into_held(
        &self,
        gemm: &FusedGemm,
        stream: &Arc<CudaStream>,
        x: &MatrixRef<'_>,
        out: &mut MatrixMut<'_>,
    ) -> Result<Option<Plan>> {
        let key = CallKey { rows: x.rows(), ld: x.ld(), offset_mod_4: x.offset_mod_4(stream) };
        let bias = self.bias.as_ref().map(|b| b.as_view());
        let epilogue = Epilogue::activation(self.activation);
        self.held().run(gemm, stream, key, x, &self.prepared, bias.as_ref(), epilogue, out)
    }

    /// The handle the layer runs with.
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    pub(crate) fn gemm(&self) -> &FusedGemm {
        &self.gemm
    }

    /// The held workspace. A poisoned lock (a panic elsewhere while it was held) leaves a valid
    /// workspace: at worst one sized for another call, which the next call re-sizes.
    fn held(&self) -> MutexGuard<'_, HeldWorkspace> {
        self.workspace.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `forward` can check before it allocates: x's length and context.
    fn check_input(&self, x: &MatrixRef<'_>) -> Result<()> {
        let expected = x.rows().saturating_mul(self.in_features);
        if x.data.len() != expected {
            return Err(Error::ShapeMismatch { what: "x.len() vs rows · in_features", expected, found: x.data.len() });
        }
        if x.data.stream().context().cu_ctx() != self.gemm.context().cu_ctx() {
            return Err(Error::WrongContext { operand: Some(Operand::X) });
        }
        Ok(())
    }
}

/// `len` (> 0) uninitialised f32 on `stream`, or a typed error. cudarc computes the byte count
/// as `len · 4` unchecked — a panic in a debug build, a wrapped (too small) allocation in a
/// release build — so it is checked here first; a refusal by the driver (out of memory) comes
/// back as [`Error::Driver`].
///
/// # Safety
/// The memory is uninitialised: the caller writes it before anything reads it.
pub(crate) unsafe fn alloc_f32(stream: &Arc<CudaStream>, len: usize, what: &'static str) -> Result<CudaSlice<f32>> {
    f32_bytes(len, what)?;
    Ok(stream.alloc::<f32>(len)?)
}

/// The bytes of `len` f32, or [`Error::DimensionTooLarge`] (naming `what`) past what one
/// allocation may hold (`isize::MAX` bytes).
pub(crate) fn f32_bytes(len: usize, what: &'static str) -> Result<usize> {
    const MAX: usize = isize::MAX as usize / std::mem::size_of::<f32>();
    if len > MAX {
        return Err(Error::DimensionTooLarge { what, value: len, max: MAX });
    }
    Ok(len * std::mem::size_of::<f32>())
}
