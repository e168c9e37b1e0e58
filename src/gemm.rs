//! The low-level call: validate, pick a kernel, launch on a stream. No allocation, no host
//! synchronisation, so it can be recorded into a CUDA graph.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceSlice, LaunchConfig, PushKernelArg};

use crate::device::DeviceInfo;
use crate::error::{Error, Operand, Result};
use crate::kernels::{Family, Kernel, LoadedKernels};
use crate::matrix::{MatrixMut, MatrixRef};
use crate::sys::{GeProblem, GeSm90Params};
use crate::tma;

/// How [`FusedGemm`] picks a kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dispatch {
    /// The fastest kernel that can run the call (see docs/TILING.md for the rules).
    #[default]
    Auto,
    /// Exactly this kernel; a call it cannot run fails with [`Error::KernelUnavailable`].
    Force(Kernel),
}

/// What a call ran (or would run): the kernel and its launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The kernel.
    pub kernel: Kernel,
    /// CTAs launched (1-D grid).
    pub grid: u32,
    /// Threads per CTA.
    pub block: u32,
    /// Dynamic shared memory per CTA, bytes.
    pub smem_bytes: u32,
}

/// The fused `out = (v*s) + v`, `v = x·wᵀ + b` kernels, loaded into one CUDA context.
///
/// Create it once per context ([`FusedGemm::new`] loads the module) and clone it freely: clones
/// share the loaded module.
#[derive(Clone)]
pub struct FusedGemm {
    kernels: Arc<LoadedKernels>,
    dispatch: Dispatch,
}

impl std::fmt::Debug for FusedGemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FusedGemm").field("device", &self.kernels.device).field("dispatch", &self.dispatch).finish()
    }
}

/// A validated call, before its pointers are taken.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

const MAX_DIM: usize = i32::MAX as usize;

impl FusedGemm {
    /// Loads the kernels into `ctx`. Fails with [`Error::UnsupportedDevice`] before sm_80.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let device = DeviceInfo::query(ctx)?;
        if device.compute_capability.0 < 8 {
            let (major, minor) = device.compute_capability;
            return Err(Error::UnsupportedDevice { major, minor });
        }
        Ok(Self { kernels: Arc::new(LoadedKernels::load(ctx, device)?), dispatch: Dispatch::Auto })
    }

    /// A handle sharing the loaded kernels that dispatches as `dispatch` says.
    pub fn with_dispatch(&self, dispatch: Dispatch) -> Self {
        Self { kernels: self.kernels.clone(), dispatch }
    }

    /// The dispatch rule in use.
    pub fn dispatch(&self) -> Dispatch {
        self.dispatch
    }

    /// The device the kernels were loaded for.
    pub fn device(&self) -> DeviceInfo {
        self.kernels.device
    }

    pub(crate) fn elementwise_function(&self) -> &cudarc::driver::CudaFunction {
        &self.kernels.elementwise
    }

    /// The context the kernels were loaded into.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.kernels.ctx
    }

    /// Checks a call and says which kernel it would launch on `stream` (CUTLASS's
    /// `can_implement`), without launching. `Ok(None)`: M or N is 0, there is nothing to do.
    pub fn plan(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        out: &MatrixMut<'_>,
    ) -> Result<Option<Plan>> {
        self.check_stream(stream)?;
        let shape = self.validate(x, w, bias, out)?;
        if shape.m == 0 || shape.n == 0 {
            return Ok(None);
        }
        let (x_ptr, _x_guard) = x.data.device_ptr(stream);
        let (w_ptr, _w_guard) = w.data.device_ptr(stream);
        self.select(shape, (x_ptr, x.ld), (w_ptr, w.ld)).map(Some)
    }

    /// Computes `out[i][j] = (v*scale) + v`, `v = Σ_k x[i][k]·w[j][k] + bias[j]` on `stream`.
    ///
    /// `x` is M × K, `w` is N × K (nn.Linear's weight), `bias` has N elements (or is `None`),
    /// `out` is M × N; each may be a strided view. Everything is checked before the launch: on
    /// error nothing is written. Returns the plan that ran (`None` when M or N is 0).
    pub fn run(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &mut MatrixMut<'_>,
    ) -> Result<Option<Plan>> {
        self.check_stream(stream)?;
        let shape = self.validate(x, w, bias, out)?;
        if shape.m == 0 || shape.n == 0 {
            return Ok(None);
        }
        let (x_ptr, _x_guard) = x.data.device_ptr(stream);
        let (w_ptr, _w_guard) = w.data.device_ptr(stream);
        let (b_ptr, _b_guard) = match bias {
            Some(b) => {
                let (p, g) = b.device_ptr(stream);
                (p, Some(g))
            }
            None => (0, None),
        };
        let (o_ptr, _o_guard) = out.data.device_ptr_mut(stream);
        let plan = self.select(shape, (x_ptr, x.ld), (w_ptr, w.ld))?;

        let problem = GeProblem {
            x: x_ptr as *const f32,
            w: w_ptr as *const f32,
            bias: b_ptr as *const f32,
            out: o_ptr as *mut f32,
            ldx: x.ld as i64,
            ldw: w.ld as i64,
            ldo: out.ld as i64,
            m: shape.m as i32,
            n: shape.n as i32,
            k: shape.k as i32,
            scale,
        };
        let function = self.kernels.function(plan.kernel).expect("select() only returns loaded kernels");
        let cfg = LaunchConfig { grid_dim: (plan.grid, 1, 1), block_dim: (plan.block, 1, 1), shared_mem_bytes: plan.smem_bytes };
        let mut launch = stream.launch_builder(function);
        match plan.kernel.family() {
            Family::MmaSync => {
                launch.arg(&problem);
                // SAFETY: `problem` matches the kernel's `const GeProblem` parameter (bindgen); its
                // pointers are live device buffers of this context whose extents were validated for
                // the shape and strides; the guards above keep them alive and ordered on `stream`.
                unsafe { launch.launch(cfg) }?;
            }
            Family::TmaWgmma => {
                let (tm, tn, tk) = plan.kernel.tile();
                let params = GeSm90Params {
                    x_map: tma::encode_k_major(x_ptr, shape.m, shape.k, x.ld, tm, tk)?,
                    w_map: tma::encode_k_major(w_ptr, shape.n, shape.k, w.ld, tn, tk)?,
                    problem,
                };
                launch.arg(&params);
                // SAFETY: as above, with the tensor maps describing the same validated extents.
                unsafe { launch.launch(cfg) }?;
            }
        }
        Ok(Some(plan))
    }

    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.kernels.ctx.cu_ctx() {
            return Err(Error::WrongContext { operand: None });
        }
        Ok(())
    }

    pub(crate) fn validate(&self, x: &MatrixRef<'_>, w: &MatrixRef<'_>, bias: Option<&CudaView<'_, f32>>, out: &MatrixMut<'_>) -> Result<Shape> {
        let (m, k, n) = (x.rows, x.cols, w.rows);
        if w.cols != k {
            return Err(Error::ShapeMismatch { what: "w.cols (K) vs x.cols (K)", expected: k, found: w.cols });
        }
        if out.rows != m {
            return Err(Error::ShapeMismatch { what: "out.rows (M) vs x.rows (M)", expected: m, found: out.rows });
        }
        if out.cols != n {
            return Err(Error::ShapeMismatch { what: "out.cols (N) vs w.rows (N)", expected: n, found: out.cols });
        }
        for (what, value) in [("M", m), ("N", n), ("K", k)] {
            if value > MAX_DIM {
                return Err(Error::DimensionTooLarge { what, value, max: MAX_DIM });
            }
        }
        check_extent(Operand::X, x.rows, x.cols, x.ld, x.data.len())?;
        check_extent(Operand::W, w.rows, w.cols, w.ld, w.data.len())?;
        check_extent(Operand::Out, out.rows, out.cols, out.ld, out.data.len())?;
        if let Some(b) = bias {
            if b.len() != n {
                return Err(Error::ShapeMismatch { what: "bias.len() (N) vs w.rows (N)", expected: n, found: b.len() });
            }
        }
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
        Ok(Shape { m, n, k })
    }

    /// Chooses the kernel for a validated, non-empty call.
    fn select(&self, s: Shape, x: (u64, usize), w: (u64, usize)) -> Result<Plan> {
        let device = &self.kernels.device;
        let vec4 = s.k % 4 == 0 && x.0 % 16 == 0 && w.0 % 16 == 0 && x.1 % 4 == 0 && w.1 % 4 == 0;
        let tma = vec4 && s.k > 0 && x.1 * 4 < (1 << 40) && w.1 * 4 < (1 << 40);
        let refusal = |kernel: Kernel| -> Option<&'static str> {
            if let Some(why) = kernel.unsupported_on(device) {
                return Some(why);
            }
            let spec = kernel.spec();
            match spec.family {
                Family::TmaWgmma if !tma => Some("TMA needs K % 4 == 0, K > 0, 16-byte-aligned x and w, and leading dimensions that are multiples of 4"),
                Family::MmaSync if spec.needs_vec4 && !vec4 => Some("16-byte loads need K % 4 == 0, 16-byte-aligned x and w, and leading dimensions that are multiples of 4"),
                _ => None,
            }
        };
        let kernel = match self.dispatch {
            Dispatch::Force(kernel) => match refusal(kernel) {
                Some(reason) => return Err(Error::KernelUnavailable { kernel, reason }),
                None => kernel,
            },
            Dispatch::Auto => {
                let large_tiles = tiles(s, Kernel::Sm80Large);
                let small = large_tiles < device.sm_count as u64;
                let preference: &[Kernel] = match (small, vec4) {
                    (false, true) => &[Kernel::Sm90Pingpong, Kernel::Sm80Large, Kernel::Sm80Small],
                    (true, true) => &[Kernel::Sm90Pingpong, Kernel::Sm80Small],
                    (false, false) => &[Kernel::Sm80LargeScalar, Kernel::Sm80SmallScalar],
                    (true, false) => &[Kernel::Sm80SmallScalar],
                };
                *preference
                    .iter()
                    .find(|k| refusal(**k).is_none())
                    .ok_or(Error::KernelUnavailable { kernel: preference[0], reason: "no kernel fits this device" })?
            }
        };
        let spec = kernel.spec();
        let tile_count = tiles(s, kernel);
        let grid = match spec.family {
            Family::MmaSync => tile_count,
            Family::TmaWgmma => tile_count.min(device.sm_count as u64),
        };
        if grid > i32::MAX as u64 {
            return Err(Error::DimensionTooLarge { what: "output tiles (M/TILE_M · N/TILE_N)", value: grid as usize, max: MAX_DIM });
        }
        Ok(Plan { kernel, grid: grid as u32, block: spec.threads, smem_bytes: spec.smem_bytes })
    }
}

fn tiles(s: Shape, kernel: Kernel) -> u64 {
    let (tm, tn, _) = kernel.tile();
    (s.m as u64).div_ceil(tm as u64) * (s.n as u64).div_ceil(tn as u64)
}

/// `rows` rows of `cols` elements at stride `ld` must fit in `len` elements.
fn check_extent(operand: Operand, rows: usize, cols: usize, ld: usize, len: usize) -> Result<()> {
    if ld < cols {
        return Err(Error::LeadingDimension { operand, ld, cols });
    }
    let needed = if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1).checked_mul(ld).and_then(|v| v.checked_add(cols)).unwrap_or(usize::MAX)
    };
    if needed > len {
        return Err(Error::BufferTooSmall { operand, needed, len });
    }
    Ok(())
}

