//! The low-level call: validate, pick a kernel, launch on a stream. No allocation, no host
//! synchronisation, so it can be recorded into a CUDA graph.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, DeviceSlice, LaunchConfig, PushKernelArg};

use crate::device::DeviceInfo;
use crate::error::{Error, Operand, Result};
use crate::kernels::{Family, Kernel, LoadedKernels, Tf32Rounding};
use crate::launch;
use crate::matrix::{MatrixMut, MatrixRef};
use crate::sys::{self, GeProblem, GeRepackParams, GeSm90Params, GeStreamK, GeTensorMap};
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
    /// CTAs launched (1-D grid; a multiple of `cluster`).
    pub grid: u32,
    /// CTAs per thread-block cluster, along M: 1 for a plain launch, 2 for
    /// [`Kernel::Sm90PingpongCluster2`] and [`Kernel::Sm90CooperativeCluster2`] (launched with a
    /// cluster-dimension attribute).
    pub cluster: u32,
    /// Threads per CTA.
    pub block: u32,
    /// Dynamic shared memory per CTA, bytes.
    pub smem_bytes: u32,
    /// X was first copied into the workspace (rows padded to whole 128-byte lines, rounded to TF32
    /// to nearest), because its rows are not 16-byte aligned and the kernel needs them to be.
    pub repack_x: bool,
    /// Likewise for W (both are also repacked when that is how a truncating kernel gives
    /// [`Tf32Rounding::Nearest`] results).
    pub repack_w: bool,
    /// How the operands the tensor cores saw were converted to TF32: the kernel's own
    /// [`Kernel::rounding`], or [`Tf32Rounding::Nearest`] when both operands were repacked.
    pub rounding: Tf32Rounding,
    /// Tiles that [`Plan::stream_k_ctas`] CTAs share along K (stream-K, with one partial tile
    /// per such CTA in the workspace): every tile when there are fewer tiles than CTAs fit on the
    /// device at once (split-K), or on large problems the last, partial wave (with the wave
    /// before it when that one is thin). 0: none, every CTA computes whole tiles (always so
    /// without a workspace). For the cluster kernels these are cluster tiles
    /// (`cluster · TILE_M × TILE_N`).
    pub stream_k_tiles: u32,
    /// CTAs that share the stream-K tiles: the whole persistent grid of an sm_90 kernel (counted
    /// in clusters for the cluster kernels), or the last `stream_k_ctas` CTAs of an mma.sync
    /// grid, after one CTA per whole tile. 0 without stream-K.
    pub stream_k_ctas: u32,
    /// The epilogue staged `out` in shared memory and stored it with TMA (sm_90 kernels, when
    /// `out` is 16-byte aligned and N and its leading dimension are multiples of 4); false: it
    /// stored from registers.
    pub tma_store: bool,
}

impl Plan {
    /// f32 elements of workspace the plan uses (0 without repacks or stream-K).
    pub fn workspace_len(&self, m: usize, n: usize, k: usize) -> usize {
        let repacks = repack_len(Shape { m, n, k }, self.repack_x, self.repack_w);
        repacks + if self.stream_k_tiles > 0 { stream_k_len(self.kernel, self.stream_k_ctas, self.stream_k_tiles) } else { 0 }
    }
}

/// Rows of X per TMA box (`GeSm90Params::x_box_rows`): the CTA tile's, or M rounded up to whole
/// 8-row swizzle atoms when M is smaller, so that TMA does not zero-fill rows no output needs.
fn x_box_rows(m: usize, tile_m: u32) -> u32 {
    (m.div_ceil(8) * 8).min(tile_m as usize) as u32
}

/// f32 elements of one stream-K CTA's (cluster's) partial tile.
fn partial_tile_len(kernel: Kernel) -> usize {
    let (tm, tn, _) = kernel.tile();
    tm as usize * tn as usize * kernel.cluster_m() as usize
}

/// i32 arrival counters of one stream-K (cluster) tile: one per CTA of the cluster and consumer
/// sharing its tile.
fn stream_k_counters_per_tile(kernel: Kernel) -> usize {
    kernel.cluster_m() as usize * kernel.spec().tile_parts as usize
}

/// Workspace of stream-K (`GeStreamK`): `ctas` partial tiles (one per stream-K CTA or cluster),
/// then the arrival counters of the stream-K tiles and the mma.sync kernels' ticket counter.
fn stream_k_len(kernel: Kernel, ctas: u32, sk_tiles: u32) -> usize {
    ctas as usize * partial_tile_len(kernel) + stream_k_flags_len(kernel, sk_tiles)
}

/// The i32 counters of stream-K, zeroed before each launch.
fn stream_k_flags_len(kernel: Kernel, sk_tiles: u32) -> usize {
    sk_tiles as usize * stream_k_counters_per_tile(kernel) + 1
}

/// Least k-blocks per CTA for which splitting a tile along K (when there are fewer tiles than
/// SMs) is worth a partial-tile round trip.
const SPLIT_K_MIN_BLOCKS: u64 = 8;

/// Least full waves of tiles before the last, partial wave is worth sharing (stream-K tail).
const STREAM_K_MIN_WAVES: u64 = 8;

/// Stream-K, when the workspace has room after `used`: (stream-K CTAs G, stream-K tiles), else
/// None; for the cluster kernels, clusters and cluster tiles. A wave is what fits on the device
/// at once: one CTA per SM for the persistent sm_90 kernels ([`DeviceInfo::max_active_clusters`]
/// clusters for the cluster kernels), [`DeviceInfo::resident_ctas`] for mma.sync.
/// - Fewer tiles than a wave: split-K, every tile shared along K (at least SPLIT_K_MIN_BLOCKS
///   k-blocks per CTA); TMA kernels cut every tile into the same whole number of parts (none
///   with more than half a wave of tiles), mma.sync kernels spread the tiles over a wave of CTAs.
/// - At least STREAM_K_MIN_WAVES full waves and a partial last one: the tiles of the last wave
///   (plus one full wave when it is less than a quarter full) are shared along K by a wave of
///   CTAs, so the last wave no longer keeps a few SMs busy while the rest idle (the reference
///   shape: 31.03 tiles per SM on sm_90, 15.5 for the mma.sync kernels). Measured on the H200
///   (docs/TILING.md): 1–2.5 % faster with 15 and 31 waves, slower with 7 (4096³), hence the
///   threshold.
fn stream_k(device: &DeviceInfo, kernel: Kernel, s: Shape, workspace: usize, used: usize) -> Option<(u64, u64)> {
    let spec = kernel.spec();
    if s.k == 0 {
        return None;
    }
    let wave = match spec.family {
        Family::TmaWgmma if spec.cluster_m > 1 => device.max_active_clusters,
        Family::TmaWgmma => device.sm_count,
        Family::MmaSync => device.resident_ctas(kernel),
    } as u64;
    if wave == 0 {
        return None;
    }
    let t = cluster_tiles(s, kernel);
    let k_blocks = (s.k as u64).div_ceil(spec.tile_k as u64);
    let (ctas, sk) = if t < wave && spec.family == Family::TmaWgmma {
        // Whole splits: every tile cut into the same number of K ranges, so no CTA straddles two
        // tiles and each finisher adds splits - 1 partials; none with more than half a wave of
        // tiles. Measured on the H200 (docs/TILING.md, step 27): spreading 96 or 128 tiles over a
        // wave of 132 CTAs was 8–17 % slower than one CTA per tile, and whole splits were 2–9 %
        // faster than a wave of CTAs for 16 to 64 tiles.
        let splits = (wave / t).min(k_blocks / SPLIT_K_MIN_BLOCKS);
        if splits < 2 {
            return None;
        }
        (t * splits, t)
    } else if t < wave {
        let ctas = (t * k_blocks / SPLIT_K_MIN_BLOCKS).min(wave);
        if ctas <= t {
            return None;
        }
        (ctas, t)
    } else if t % wave != 0 && t / wave >= STREAM_K_MIN_WAVES {
        // A last wave at least a quarter full is shared as it is (each CTA a quarter tile or
        // more); a thinner one together with the wave before it, or a tile would be cut into
        // dozens of slivers with as many partials to add (reference shape: 4 tiles, 33 CTAs each).
        let tail = t % wave;
        (wave, if 4 * tail >= wave { tail } else { tail + wave })
    } else {
        return None;
    };
    let fits = workspace.saturating_sub(used) >= stream_k_len(kernel, ctas as u32, sk as u32);
    fits.then_some((ctas, sk))
}

/// The fused `out = (v*s) + v`, `v = x·wᵀ + b` kernels, loaded into one CUDA context.
///
/// Create it once per context ([`FusedGemm::new`] loads the module) and clone it freely: clones
/// share the loaded module.
#[derive(Clone)]
pub struct FusedGemm {
    kernels: Arc<LoadedKernels>,
    dispatch: Dispatch,
    rounding: Tf32Rounding,
}

impl std::fmt::Debug for FusedGemm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FusedGemm").field("device", &self.kernels.device).field("dispatch", &self.dispatch).field("rounding", &self.rounding).finish()
    }
}

/// A validated call, before its pointers are taken.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// Largest M, N or K: the kernels index with 32-bit ints and round up to whole tiles (at most
/// 2·128 rows past M for a 2-CTA cluster, 31 columns past K), which must not overflow.
const MAX_DIM: usize = i32::MAX as usize - 1023;

impl FusedGemm {
    /// Loads the kernels into `ctx`. Fails with [`Error::UnsupportedDevice`] before sm_80.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let device = DeviceInfo::query(ctx)?;
        if device.compute_capability.0 < 8 {
            let (major, minor) = device.compute_capability;
            return Err(Error::UnsupportedDevice { major, minor });
        }
        let rounding = default_rounding(&device);
        Ok(Self { kernels: Arc::new(LoadedKernels::load(ctx, device)?), dispatch: Dispatch::Auto, rounding })
    }

    /// A handle sharing the loaded kernels that dispatches as `dispatch` says.
    pub fn with_dispatch(&self, dispatch: Dispatch) -> Self {
        Self { dispatch, ..self.clone() }
    }

    /// A handle sharing the loaded kernels whose [`Dispatch::Auto`] only picks kernels (or
    /// repacks) that give `rounding`. The default is the rounding of the device's fastest
    /// kernels: [`Tf32Rounding::Truncate`] on sm_90 (the TMA + wgmma kernels read TMA's tiles
    /// as they land, like CUTLASS's), [`Tf32Rounding::Nearest`] before it. On sm_90, `Nearest`
    /// runs the TMA kernel on operands repacked into the workspace of
    /// [`FusedGemm::run_with_workspace`] (≈ 0.17 ms more on 16384×4096×4096), or without one the
    /// mma.sync kernels that round in registers (about 2× slower there). docs/EPILOGUE.md has the
    /// error of each.
    pub fn with_rounding(&self, rounding: Tf32Rounding) -> Self {
        Self { rounding, ..self.clone() }
    }

    /// The dispatch rule in use.
    pub fn dispatch(&self) -> Dispatch {
        self.dispatch
    }

    /// The operand rounding [`Dispatch::Auto`] provides.
    pub fn rounding(&self) -> Tf32Rounding {
        self.rounding
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
        let (o_ptr, _o_guard) = out.data.device_ptr(stream);
        Ok(Some(self.select(shape, (x_ptr, x.ld), (w_ptr, w.ld), 0)?.for_out(shape.n, (o_ptr, out.ld))))
    }

    /// f32 elements of workspace [`FusedGemm::run_with_workspace`] would use for this call; 0
    /// when it would use none. It holds, in order: X and W repacked when their rows are not
    /// 16-byte aligned (K % 4 != 0, a misaligned view, or a leading dimension that is not a
    /// multiple of 4), or when repacking is how the rounding asked for is reached
    /// ([`FusedGemm::with_rounding`]); then, with fewer output tiles than fit on the device at
    /// once or with at least 8 such waves of them, one partial tile per stream-K CTA and a
    /// counter per shared tile for stream-K ([`Plan::stream_k_tiles`]; 8.6 MB on the reference
    /// shape on sm_90, 17 MB for the 128×256 mma.sync kernels).
    pub fn workspace_len(&self, stream: &CudaStream, x: &MatrixRef<'_>, w: &MatrixRef<'_>) -> Result<usize> {
        self.check_stream(stream)?;
        if x.cols != w.cols {
            return Err(Error::ShapeMismatch { what: "w.cols (K) vs x.cols (K)", expected: x.cols, found: w.cols });
        }
        let shape = Shape { m: x.rows, n: w.rows, k: x.cols };
        if shape.m == 0 || shape.n == 0 {
            return Ok(0);
        }
        let (x_ptr, _x_guard) = x.data.device_ptr(stream);
        let (w_ptr, _w_guard) = w.data.device_ptr(stream);
        let plan = self.select(shape, (x_ptr, x.ld), (w_ptr, w.ld), usize::MAX)?;
        Ok(plan.workspace_len(shape.m, shape.n, shape.k))
    }

    /// Computes `out[i][j] = (v*scale) + v`, `v = Σ_k x[i][k]·w[j][k] + bias[j]` on `stream`.
    ///
    /// `x` is M × K, `w` is N × K (nn.Linear's weight), `bias` has N elements (or is `None`),
    /// `out` is M × N; each may be a strided view. Everything is checked before the launch: on
    /// error nothing is written. Returns the plan that ran (`None` when M or N is 0).
    /// No allocation, no host synchronisation.
    pub fn run(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &mut MatrixMut<'_>,
    ) -> Result<Option<Plan>> {
        self.launch(stream, x, w, bias, scale, out, None)
    }

    /// Like [`FusedGemm::run`], with scratch memory (see [`FusedGemm::workspace_len`]): operands
    /// whose rows are not 16-byte aligned are first copied into it, so that the TMA + wgmma (or
    /// 16-byte mma.sync) kernels can read them, and tiles are shared along K through it
    /// (stream-K: all tiles of small problems, the last wave of large ones). The workspace must start 16-byte aligned (every allocation does) and
    /// must not be used by another call at the same time. A shorter workspace is not an error:
    /// the call then runs without what does not fit.
    #[allow(clippy::too_many_arguments)]
    pub fn run_with_workspace(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &mut MatrixMut<'_>,
        workspace: &mut CudaViewMut<'_, f32>,
    ) -> Result<Option<Plan>> {
        self.launch(stream, x, w, bias, scale, out, Some(workspace))
    }

    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        stream: &CudaStream,
        x: &MatrixRef<'_>,
        w: &MatrixRef<'_>,
        bias: Option<&CudaView<'_, f32>>,
        scale: f32,
        out: &mut MatrixMut<'_>,
        workspace: Option<&mut CudaViewMut<'_, f32>>,
    ) -> Result<Option<Plan>> {
        self.check_stream(stream)?;
        let shape = self.validate(x, w, bias, out)?;
        if let Some(ws) = &workspace {
            if ws.stream().context().cu_ctx() != self.kernels.ctx.cu_ctx() {
                return Err(Error::WrongContext { operand: Some(Operand::Workspace) });
            }
        }
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
        let plan = self.select(shape, (x_ptr, x.ld), (w_ptr, w.ld), ws_len)?.for_out(shape.n, (o_ptr, out.ld));

        // Operands the kernel reads: the caller's, or their repacked copies in the workspace.
        let padded_ld = repacked_ld(shape.k);
        let (mut xk, mut wk) = ((x_ptr, x.ld), (w_ptr, w.ld));
        let mut ws_next = ws_ptr;
        if plan.repack_x {
            self.repack(stream, (x_ptr, x.ld), shape.m, shape.k, ws_next, padded_ld)?;
            xk = (ws_next, padded_ld);
            ws_next += (shape.m * padded_ld * 4) as u64;
        }
        if plan.repack_w {
            self.repack(stream, (w_ptr, w.ld), shape.n, shape.k, ws_next, padded_ld)?;
            wk = (ws_next, padded_ld);
            ws_next += (shape.n * padded_ld * 4) as u64;
        }
        // Stream-K: one partial tile per stream-K CTA, then the per-tile arrival counters and the
        // ticket counter, zeroed here.
        let stream_k = if plan.stream_k_tiles > 0 {
            let flags = ws_next + plan.stream_k_ctas as u64 * partial_tile_len(plan.kernel) as u64 * 4;
            launch::zero_i32(stream, flags, stream_k_flags_len(plan.kernel, plan.stream_k_tiles))?;
            GeStreamK { partials: ws_next as *mut f32, flags: flags as *mut i32, tiles: plan.stream_k_tiles as i32 }
        } else {
            GeStreamK { partials: std::ptr::null_mut(), flags: std::ptr::null_mut(), tiles: 0 }
        };

        let problem = GeProblem {
            x: xk.0 as *const f32,
            w: wk.0 as *const f32,
            bias: b_ptr as *const f32,
            out: o_ptr as *mut f32,
            ldx: xk.1 as i64,
            ldw: wk.1 as i64,
            ldo: out.ld as i64,
            m: shape.m as i32,
            n: shape.n as i32,
            k: shape.k as i32,
            scale,
        };
        // select() only picks kernels the device supports, and load() loaded all of those.
        let function = self
            .kernels
            .function(plan.kernel)
            .ok_or(Error::KernelUnavailable { kernel: plan.kernel, reason: "not loaded for this device" })?;
        let cfg = LaunchConfig { grid_dim: (plan.grid, 1, 1), block_dim: (plan.block, 1, 1), shared_mem_bytes: plan.smem_bytes };
        let spec = plan.kernel.spec();
        match spec.family {
            Family::MmaSync => {
                let mut launch = stream.launch_builder(function);
                launch.arg(&problem);
                launch.arg(&stream_k);
                // SAFETY: `problem` and `stream_k` match the kernel's `const GeProblem` and `const
                // GeStreamK` parameters (bindgen); their pointers are live device buffers of this
                // context whose extents were validated for the shape and strides (or workspace
                // regions sized for them, written above in stream order: the stream-K region holds
                // `stream_k_ctas` partial tiles and zeroed counters); the guards above keep them
                // alive and ordered on `stream`.
                unsafe { launch.launch(cfg) }?;
            }
            Family::TmaWgmma => {
                // X boxes are one CTA tile (fewer rows when M is smaller); W boxes the slice of the
                // W tile one CTA of the cluster loads (and multicasts): the whole tile without a
                // cluster.
                let x_box_rows = x_box_rows(shape.m, spec.tile_m);
                let out_map = if plan.tma_store {
                    tma::encode_row_major(o_ptr, shape.m, shape.n, out.ld, spec.out_box_rows, sys::GE_SM90_STORE_BOX_COLS)?
                } else {
                    GeTensorMap { opaque: [0; 16] }
                };
                let params = GeSm90Params {
                    x_map: tma::encode_row_major(xk.0, shape.m, shape.k, xk.1, x_box_rows, spec.tile_k)?,
                    w_map: tma::encode_row_major(wk.0, shape.n, shape.k, wk.1, spec.w_box_rows, spec.tile_k)?,
                    out_map,
                    problem,
                    stream_k,
                    store_tma: plan.tma_store as i32,
                    x_box_rows: x_box_rows as i32,
                };
                if spec.cluster_m == 1 {
                    let mut launch = stream.launch_builder(function);
                    launch.arg(&params);
                    // SAFETY: as above, with the tensor maps describing the same validated extents.
                    unsafe { launch.launch(cfg) }?;
                } else {
                    // SAFETY: as above; `params` is the kernel's `const GeSm90Params`; select() made
                    // the grid a whole number of clusters (at most `max_active_clusters` of them);
                    // load() raised the function's shared memory limit to `plan.smem_bytes`; the
                    // guards above stay alive across the launch.
                    unsafe { launch::launch_clustered(stream, function, cfg, (plan.cluster, 1, 1), &params) }?;
                }
            }
        }
        Ok(Some(plan))
    }

    /// Copies `rows × k` at (src, ld) into a dense, TF32-rounded `rows × padded_ld` at `dst`.
    fn repack(&self, stream: &CudaStream, src: (u64, usize), rows: usize, k: usize, dst: u64, padded_ld: usize) -> Result<()> {
        let params = GeRepackParams {
            src: src.0 as *const f32,
            dst: dst as *mut f32,
            ld_src: src.1 as i64,
            ld_dst: padded_ld as i64,
            rows: rows as i32,
            cols: k as i32,
        };
        let grid_dim = crate::kernels::rowwise_grid(rows, padded_ld / 4, self.kernels.device.sm_count);
        let cfg = LaunchConfig { grid_dim, block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        let function: &CudaFunction = &self.kernels.repack;
        let mut launch = stream.launch_builder(function);
        launch.arg(&params);
        // SAFETY: src is a validated operand (rows × k at stride ld); dst is a 16-byte-aligned
        // workspace region of rows × padded_ld elements, checked against the workspace length by
        // select(); both ordered on `stream` by the caller's guards.
        unsafe { launch.launch(cfg) }?;
        Ok(())
    }

    pub(crate) fn check_stream(&self, stream: &CudaStream) -> Result<()> {
        if stream.context().cu_ctx() != self.kernels.ctx.cu_ctx() {
            return Err(Error::WrongContext { operand: None });
        }
        Ok(())
    }

    /// Shape, extent and context checks shared by every call (and by the baselines).
    pub(crate) fn validate(&self, x: &MatrixRef<'_>, w: &MatrixRef<'_>, bias: Option<&CudaView<'_, f32>>, out: &MatrixMut<'_>) -> Result<Shape> {
        let shape = validate_shapes(
            Extent { rows: x.rows, cols: x.cols, ld: x.ld, len: x.data.len() },
            Extent { rows: w.rows, cols: w.cols, ld: w.ld, len: w.data.len() },
            bias.map(|b| b.len()),
            Extent { rows: out.rows, cols: out.cols, ld: out.ld, len: out.data.len() },
        )?;
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

    fn select(&self, s: Shape, x: (u64, usize), w: (u64, usize), workspace: usize) -> Result<Plan> {
        select_kernel(&self.kernels.device, self.dispatch, self.rounding, s, x, w, workspace)
    }
}

/// An operand as validation sees it: `rows × cols` at stride `ld` in a buffer of `len` elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Extent {
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
    pub len: usize,
}

/// Checks that x (M×K), w (N×K), bias (N) and out (M×N) agree and fit their buffers.
pub(crate) fn validate_shapes(x: Extent, w: Extent, bias_len: Option<usize>, out: Extent) -> Result<Shape> {
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
    if let Some(len) = bias_len {
        if len != n {
            return Err(Error::ShapeMismatch { what: "bias.len() (N) vs w.rows (N)", expected: n, found: len });
        }
    }
    for (what, value) in [("M", m), ("N", n), ("K", k)] {
        if value > MAX_DIM {
            return Err(Error::DimensionTooLarge { what, value, max: MAX_DIM });
        }
    }
    check_extent(Operand::X, x)?;
    check_extent(Operand::W, w)?;
    check_extent(Operand::Out, out)?;
    Ok(Shape { m, n, k })
}

/// Rows of an operand can be read 16 bytes at a time (and by TMA).
fn rows_aligned(k: usize, (addr, ld): (u64, usize)) -> bool {
    k % 4 == 0 && addr % 16 == 0 && ld % 4 == 0 && ld * 4 < (1 << 40)
}

/// Leading dimension of a repacked operand: whole 128-byte lines per row. A multiple of 4 would
/// satisfy TMA, but rows that straddle 128-byte lines make every TMA box row touch two lines:
/// on the H200 (16383×4095×4097) ld = 4100 ran the wgmma kernel in 3.49 ms (ncu), docs/TILING.md.
fn repacked_ld(k: usize) -> usize {
    k.next_multiple_of(32)
}

/// f32 elements of workspace that repacking X (when `x`) and W (when `w`) of shape `s` takes.
fn repack_len(s: Shape, x: bool, w: bool) -> usize {
    let ld = repacked_ld(s.k);
    (x as usize) * s.m * ld + (w as usize) * s.n * ld
}

/// [`FusedGemm::new`]'s rounding: that of the device's fastest kernel family.
fn default_rounding(device: &DeviceInfo) -> Tf32Rounding {
    if device.is_hopper() {
        Tf32Rounding::Truncate
    } else {
        Tf32Rounding::Nearest
    }
}

/// Least waves of [`Kernel::Sm90CooperativeCluster2`]'s 256×256 cluster tiles for which
/// [`Dispatch::Auto`] prefers it to the ping-pong kernel. On the H200 (docs/BENCHMARKS.md, step
/// 26 and the bench runs at e65fa3b and ca392a3) it took 0.95–1.03× cuBLAS's time under
/// sustained load on 4096³ (3.9 waves), 8192³ and the reference shape, against the ping-pong's
/// 0.97–1.08×, and stayed within 2 % of the ping-pong in single calls. With one or two waves
/// (2048³, 1024×4096×4096) its four-times-larger tile quantizes worse, and the ping-pong was
/// 5–12 % faster.
const LARGE_WAVES: u64 = 3;

/// Below this many multiply-adds, repacking (two extra launches) costs more than it saves.
const REPACK_MIN_MACS: u64 = 1 << 27;

/// Chooses the kernel for a validated, non-empty call; `x` and `w` are (device address, ld);
/// `workspace` is the f32 length available for repacking operands. With [`Dispatch::Auto`], the
/// fastest kernel whose result is rounded as `rounding` asks (docs/TILING.md); a forced kernel
/// runs as it is (its [`Plan::rounding`] says what that means).
pub(crate) fn select_kernel(
    device: &DeviceInfo,
    dispatch: Dispatch,
    rounding: Tf32Rounding,
    s: Shape,
    x: (u64, usize),
    w: (u64, usize),
    workspace: usize,
) -> Result<Plan> {
    let (x_ok, w_ok) = (rows_aligned(s.k, x), rows_aligned(s.k, w));
    let can_repack = s.k > 0 && repack_len(s, !x_ok, !w_ok) <= workspace;
    let direct = x_ok && w_ok;
    // 16-byte rows, directly or after repacking into the workspace.
    let vec4 = direct || can_repack;
    let refusal = |kernel: Kernel| -> Option<&'static str> {
        if let Some(why) = kernel.unsupported_on(device) {
            return Some(why);
        }
        let spec = kernel.spec();
        match spec.family {
            Family::TmaWgmma if s.k == 0 => Some("TMA needs K > 0"),
            Family::TmaWgmma if !vec4 => Some("TMA needs K % 4 == 0, 16-byte-aligned x and w, and leading dimensions that are multiples of 4 (or a workspace to repack them)"),
            Family::MmaSync if spec.needs_vec4 && !vec4 => Some("16-byte loads need K % 4 == 0, 16-byte-aligned x and w, and leading dimensions that are multiples of 4 (or a workspace to repack them)"),
            _ => None,
        }
    };
    // Repack (and so round) both operands even when aligned: how a truncating TMA kernel gives
    // round-to-nearest results.
    let mut round_by_repack = false;
    let kernel = match dispatch {
        Dispatch::Force(kernel) => match refusal(kernel) {
            Some(reason) => return Err(Error::KernelUnavailable { kernel, reason }),
            None => kernel,
        },
        Dispatch::Auto => {
            let worth_repacking = (s.m as u64) * (s.n as u64) * (s.k as u64) >= REPACK_MIN_MACS;
            let vec4 = direct || (can_repack && worth_repacking);
            let small = tiles(s, Kernel::Sm80Large) < device.sm_count as u64;
            // The 64-row ping-pongs' tiles fit in one wave: more parallelism than the 128-row
            // tiles, with fewer and smaller split-K partials (docs/TILING.md: M ≤ 128 for 64×64
            // and M ≤ 256 for 64×128 tiles on N = 4096).
            let one_wave_of = |k: Kernel| tiles(s, k) <= device.sm_count as u64;
            // At least LARGE_WAVES waves of the cooperative cluster kernel's 256×256 cluster tiles.
            let large = device.max_active_clusters > 0
                && cluster_tiles(s, Kernel::Sm90CooperativeCluster2) >= LARGE_WAVES * device.max_active_clusters as u64;
            // Measured on the H200 (docs/TILING.md): the TMA kernels first (on large problems the
            // cooperative cluster kernel, which moves the fewest bytes per FLOP and so keeps the
            // highest clock under the power cap; on small ones the 64×64, then the 64×128
            // ping-pong while their tiles fit in one wave; else the 128×128 ping-pong), then 128×256 before
            // 128×128; devices without 144 KiB of shared memory per block fall through to 128×128.
            // Scalar-load kernels (any shape) only round to nearest: they are load-bound.
            let preference: &[Kernel] = match (small, vec4, rounding) {
                (false, true, Tf32Rounding::Truncate) if large => &[Kernel::Sm90CooperativeCluster2, Kernel::Sm90Pingpong, Kernel::Sm80WideTrunc, Kernel::Sm80LargeTrunc, Kernel::Sm80Small],
                (false, true, Tf32Rounding::Truncate) => &[Kernel::Sm90Pingpong, Kernel::Sm80WideTrunc, Kernel::Sm80LargeTrunc, Kernel::Sm80Small],
                (false, true, Tf32Rounding::Nearest) if large => &[Kernel::Sm90CooperativeCluster2, Kernel::Sm90Pingpong, Kernel::Sm80Wide, Kernel::Sm80Large, Kernel::Sm80Small],
                (false, true, Tf32Rounding::Nearest) => &[Kernel::Sm90Pingpong, Kernel::Sm80Wide, Kernel::Sm80Large, Kernel::Sm80Small],
                (true, true, Tf32Rounding::Truncate) if one_wave_of(Kernel::Sm90Pingpong64x64) => &[Kernel::Sm90Pingpong64x64, Kernel::Sm80Small],
                (true, true, Tf32Rounding::Truncate) if one_wave_of(Kernel::Sm90Pingpong64) => &[Kernel::Sm90Pingpong64, Kernel::Sm80Small],
                (true, true, Tf32Rounding::Truncate) => &[Kernel::Sm90Pingpong, Kernel::Sm80Small],
                (true, true, Tf32Rounding::Nearest) => &[Kernel::Sm80Small],
                (false, false, _) => &[Kernel::Sm80WideScalar, Kernel::Sm80LargeScalar, Kernel::Sm80SmallScalar],
                (true, false, _) => &[Kernel::Sm80SmallScalar],
            };
            let whole_repack = repack_len(s, true, true);
            let rounds = |kernel: Kernel| {
                rounding == Tf32Rounding::Truncate
                    || kernel.rounding() == Tf32Rounding::Nearest
                    || (s.k > 0 && worth_repacking && whole_repack <= workspace)
            };
            let kernel = *preference
                .iter()
                .find(|k| refusal(**k).is_none() && rounds(**k))
                .ok_or(Error::KernelUnavailable { kernel: preference[0], reason: "no kernel fits this device" })?;
            round_by_repack = rounding == Tf32Rounding::Nearest && kernel.rounding() == Tf32Rounding::Truncate;
            kernel
        }
    };
    let spec = kernel.spec();
    let repack = spec.needs_vec4 && !direct;
    let (repack_x, repack_w) = (round_by_repack || (repack && !x_ok), round_by_repack || (repack && !w_ok));
    let stream_k = stream_k(device, kernel, s, workspace, repack_len(s, repack_x, repack_w));
    let grid = match (spec.family, stream_k) {
        (Family::TmaWgmma, Some((ctas, _))) => spec.cluster_m as u64 * ctas,
        // One CTA per whole tile, then the stream-K CTAs.
        (Family::MmaSync, Some((ctas, sk))) => tiles(s, kernel) - sk + ctas,
        (Family::MmaSync, None) => tiles(s, kernel),
        // Persistent: one CTA (cluster) per (cluster) tile, at most as many as are resident at
        // once: one CTA per SM, or what cuOccupancyMaxActiveClusters said at load time.
        (Family::TmaWgmma, None) => {
            let resident = if spec.cluster_m == 1 { device.sm_count } else { device.max_active_clusters };
            spec.cluster_m as u64 * cluster_tiles(s, kernel).min(resident as u64)
        }
    };
    if grid > i32::MAX as u64 {
        return Err(Error::DimensionTooLarge { what: "output tiles (M/TILE_M · N/TILE_N)", value: grid as usize, max: MAX_DIM });
    }
    Ok(Plan {
        kernel,
        grid: grid as u32,
        cluster: spec.cluster_m,
        block: spec.threads,
        smem_bytes: spec.smem_bytes,
        repack_x,
        repack_w,
        rounding: if repack_x && repack_w { Tf32Rounding::Nearest } else { spec.rounding },
        stream_k_tiles: stream_k.map_or(0, |(_, sk)| sk as u32),
        stream_k_ctas: stream_k.map_or(0, |(ctas, _)| ctas as u32),
        tma_store: false,
    })
}

impl Plan {
    /// The plan for an `n`-column output at `out`: TMA kernels store through TMA when its rows
    /// are whole 16-byte units at 16-byte-aligned addresses. TMA clips a store box at N only to
    /// 16-byte granularity (measured: with N = 130 and ldo = 136 it wrote columns 130 and 131),
    /// so N % 4 == 0 is part of the rule, or padding past N would be overwritten.
    fn for_out(self, n: usize, out: (u64, usize)) -> Plan {
        Plan { tma_store: self.kernel.family() == Family::TmaWgmma && rows_aligned(n, out), ..self }
    }
}

fn tiles(s: Shape, kernel: Kernel) -> u64 {
    let (tm, tn, _) = kernel.tile();
    (s.m as u64).div_ceil(tm as u64) * (s.n as u64).div_ceil(tn as u64)
}

/// Tiles of `cluster_m · TILE_M × TILE_N`, one per cluster (`tiles` when there is no cluster).
fn cluster_tiles(s: Shape, kernel: Kernel) -> u64 {
    let (tm, tn, _) = kernel.tile();
    (s.m as u64).div_ceil(tm as u64 * kernel.cluster_m() as u64) * (s.n as u64).div_ceil(tn as u64)
}

/// `rows` rows of `cols` elements at stride `ld` must fit in `len` elements.
fn check_extent(operand: Operand, Extent { rows, cols, ld, len }: Extent) -> Result<()> {
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


#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::KERNEL_COUNT;

    /// `select_kernel` with the device's default rounding.
    fn select(device: &DeviceInfo, dispatch: Dispatch, s: Shape, x: (u64, usize), w: (u64, usize), workspace: usize) -> Result<Plan> {
        select_kernel(device, dispatch, default_rounding(device), s, x, w, workspace)
    }

    // max_active_clusters, ctas_per_sm: what load() fills in. 66 = one 2-CTA cluster per SM pair
    // (an assumption: clusters must fit in one GPC, so the real H200 figure may be lower); 0 off
    // sm_90. CTAs per SM: the 96 KiB mma.sync kernels fit twice on sm_80/sm_90, the 64 KiB ones
    // three times (what the occupancy query says on the H200), everything else once.
    const fn ctas_per_sm(large: u32, small: u32) -> [u32; KERNEL_COUNT] {
        let mut r = [1; KERNEL_COUNT];
        let mut i = 0;
        while i < KERNEL_COUNT {
            r[i] = match Kernel::ALL[i] {
                Kernel::Sm80Large | Kernel::Sm80LargeTrunc | Kernel::Sm80LargeScalar => large,
                Kernel::Sm80Small | Kernel::Sm80SmallScalar => small,
                _ => 1,
            };
            i += 1;
        }
        r
    }
    const H200: DeviceInfo = DeviceInfo {
        compute_capability: (9, 0),
        sm_count: 132,
        max_smem_per_block: 232_448,
        max_active_clusters: 66,
        ctas_per_sm: ctas_per_sm(2, 3),
    };
    const A100: DeviceInfo = DeviceInfo {
        compute_capability: (8, 0),
        sm_count: 108,
        max_smem_per_block: 166_912,
        max_active_clusters: 0,
        ctas_per_sm: ctas_per_sm(1, 2),
    };
    const RTX4090: DeviceInfo = DeviceInfo {
        compute_capability: (8, 9),
        sm_count: 128,
        max_smem_per_block: 101_376,
        max_active_clusters: 0,
        ctas_per_sm: ctas_per_sm(1, 1),
    };

    fn dense(rows: usize, cols: usize) -> Extent {
        Extent { rows, cols, ld: cols, len: rows * cols }
    }
    fn shape(m: usize, n: usize, k: usize) -> Shape {
        Shape { m, n, k }
    }
    const ALIGNED: u64 = 0x7f00_0000_0000;

    #[test]
    fn accepts_matching_dense_and_strided_shapes() {
        let s = validate_shapes(dense(5, 7), dense(3, 7), Some(3), dense(5, 3)).unwrap();
        assert_eq!((s.m, s.n, s.k), (5, 3, 7));
        // Strided: last row needs only `cols` elements.
        let x = Extent { rows: 5, cols: 7, ld: 10, len: 4 * 10 + 7 };
        assert!(validate_shapes(x, dense(3, 7), None, dense(5, 3)).is_ok());
        // K = 0 and M = 0 are valid.
        assert!(validate_shapes(dense(5, 0), dense(3, 0), Some(3), dense(5, 3)).is_ok());
        assert!(validate_shapes(dense(0, 7), dense(3, 7), None, dense(0, 3)).is_ok());
    }

    #[test]
    fn rejects_each_mismatch_with_its_own_variant() {
        let e = validate_shapes(dense(5, 7), dense(3, 8), None, dense(5, 3)).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { expected: 7, found: 8, .. }), "{e}");
        let e = validate_shapes(dense(5, 7), dense(3, 7), None, dense(4, 3)).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { expected: 5, found: 4, .. }), "{e}");
        let e = validate_shapes(dense(5, 7), dense(3, 7), None, dense(5, 4)).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { expected: 3, found: 4, .. }), "{e}");
        let e = validate_shapes(dense(5, 7), dense(3, 7), Some(4), dense(5, 3)).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { expected: 3, found: 4, .. }), "{e}");
        assert!(e.to_string().contains("bias"), "{e}");
    }

    #[test]
    fn rejects_short_buffers_and_small_leading_dimensions() {
        let short = Extent { rows: 5, cols: 7, ld: 7, len: 34 };
        let e = validate_shapes(short, dense(3, 7), None, dense(5, 3)).unwrap_err();
        assert!(matches!(e, Error::BufferTooSmall { operand: Operand::X, needed: 35, len: 34 }), "{e}");
        let e = validate_shapes(dense(5, 7), Extent { rows: 3, cols: 7, ld: 6, len: 100 }, None, dense(5, 3)).unwrap_err();
        assert!(matches!(e, Error::LeadingDimension { operand: Operand::W, ld: 6, cols: 7 }), "{e}");
        let out = Extent { rows: 5, cols: 3, ld: 4, len: 18 };
        let e = validate_shapes(dense(5, 7), dense(3, 7), None, out).unwrap_err();
        assert!(matches!(e, Error::BufferTooSmall { operand: Operand::Out, needed: 19, len: 18 }), "{e}");
        assert!(e.to_string().starts_with("out:"), "{e}");
        // Overflowing extents are "too small", never a wrap-around.
        let huge = Extent { rows: usize::MAX / 2, cols: 1, ld: 4, len: 8 };
        assert!(validate_shapes(huge, Extent { rows: 1, cols: 1, ld: 1, len: 1 }, None, huge).is_err());
    }

    #[test]
    fn rejects_dimensions_past_i32() {
        let big = MAX_DIM + 1;
        let x = Extent { rows: 1, cols: big, ld: big, len: big };
        let w = Extent { rows: 1, cols: big, ld: big, len: big };
        let e = validate_shapes(x, w, None, dense(1, 1)).unwrap_err();
        assert!(matches!(e, Error::DimensionTooLarge { what: "K", .. }), "{e}");
    }

    #[test]
    fn auto_prefers_wgmma_on_hopper_and_mma_sync_elsewhere() {
        let s = shape(16384, 4096, 4096);
        let p = select(&H200, Dispatch::Auto, s, (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
        assert_eq!(p.kernel, Kernel::Sm90CooperativeCluster2);
        assert_eq!(p.grid, 132, "persistent: one CTA per SM (66 clusters of 2)");
        let p = select(&A100, Dispatch::Auto, s, (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
        assert_eq!((p.kernel, p.grid), (Kernel::Sm80Wide, 128 * 16));
        let p = select(&RTX4090, Dispatch::Auto, s, (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
        assert_eq!(p.kernel, Kernel::Sm80Large, "144 KiB does not fit sm_89's 99 KiB; 96 KiB does");
    }

    #[test]
    fn unaligned_or_ragged_k_falls_back_to_scalar_loads() {
        let s = shape(16383, 4095, 4097);
        let p = select(&H200, Dispatch::Auto, s, (ALIGNED, 4097), (ALIGNED, 4097), 0).unwrap();
        assert_eq!(p.kernel, Kernel::Sm80WideScalar);
        let s = shape(4096, 4096, 4096);
        let p = select(&H200, Dispatch::Auto, s, (ALIGNED + 4, 4096), (ALIGNED, 4096), 0).unwrap();
        assert_eq!(p.kernel, Kernel::Sm80WideScalar, "x misaligned by one float");
        let p = select(&RTX4090, Dispatch::Auto, s, (ALIGNED, 4098), (ALIGNED, 4096), 0).unwrap();
        assert_eq!(p.kernel, Kernel::Sm80LargeScalar, "ldx not a multiple of 4");
        let p = select(&H200, Dispatch::Auto, shape(7, 9, 0), (ALIGNED, 0), (ALIGNED, 0), 0).unwrap();
        assert_eq!(p.kernel, Kernel::Sm80Small, "K = 0: no TMA, bias-only tile");
    }

    #[test]
    fn a_workspace_lets_unaligned_operands_reach_the_fast_kernels() {
        let s = shape(16383, 4095, 4097);
        let need = (16383 + 4095) * 4128;
        let p = select(&H200, Dispatch::Auto, s, (ALIGNED, 4097), (ALIGNED, 4097), need).unwrap();
        assert_eq!((p.kernel, p.repack_x, p.repack_w), (Kernel::Sm90CooperativeCluster2, true, true));
        assert_eq!(p.workspace_len(s.m, s.n, s.k), need);
        // One element short: no repack, the scalar kernel, and still no error.
        let p = select(&H200, Dispatch::Auto, s, (ALIGNED, 4097), (ALIGNED, 4097), need - 1).unwrap();
        assert_eq!((p.kernel, p.repack_x, p.repack_w), (Kernel::Sm80WideScalar, false, false));
        // Only the misaligned operand is repacked.
        let s = shape(4096, 4096, 4096);
        let p = select(&A100, Dispatch::Auto, s, (ALIGNED + 4, 4096), (ALIGNED, 4096), usize::MAX).unwrap();
        assert_eq!((p.kernel, p.repack_x, p.repack_w), (Kernel::Sm80Wide, true, false));
        // Tiny problems are not worth two extra launches...
        let p = select(&H200, Dispatch::Auto, shape(33, 65, 4095), (ALIGNED, 4095), (ALIGNED, 4095), usize::MAX).unwrap();
        assert_eq!((p.kernel, p.repack_x), (Kernel::Sm80SmallScalar, false));
        // ...unless a kernel that needs them is forced.
        let g = Dispatch::Force(Kernel::Sm90Pingpong);
        let p = select(&H200, g, shape(33, 65, 4095), (ALIGNED, 4095), (ALIGNED, 4095), usize::MAX).unwrap();
        assert!(p.repack_x && p.repack_w);
        // Scalar kernels never repack.
        let g = Dispatch::Force(Kernel::Sm80LargeScalar);
        let p = select(&H200, g, shape(4096, 4096, 4097), (ALIGNED, 4097), (ALIGNED, 4097), usize::MAX).unwrap();
        assert!(!p.repack_x && !p.repack_w);
    }

    #[test]
    fn rounding_decides_between_truncating_and_rounding_kernels() {
        use Tf32Rounding::{Nearest, Truncate};
        let s = shape(16384, 4096, 4096);
        let a = (ALIGNED, 4096);
        let pick = |d: &DeviceInfo, r, ws| select_kernel(d, Dispatch::Auto, r, s, a, a, ws).unwrap();
        // The defaults: truncate on sm_90 (TMA), round before it.
        assert_eq!(default_rounding(&H200), Truncate);
        assert_eq!(default_rounding(&A100), Nearest);
        // A100: the truncating mma.sync kernels only when asked for.
        let p = pick(&A100, Truncate, 0);
        assert_eq!((p.kernel, p.rounding), (Kernel::Sm80WideTrunc, Truncate));
        let p = pick(&A100, Nearest, usize::MAX);
        assert_eq!((p.kernel, p.rounding, p.repack_x), (Kernel::Sm80Wide, Nearest, false));
        let p = pick(&RTX4090, Truncate, 0);
        assert_eq!(p.kernel, Kernel::Sm80LargeTrunc, "128×256 does not fit sm_89");
        // H200, Nearest: the TMA kernel on both operands repacked (rounded), given the room...
        let need = 2 * 4096 * 4096 + 16384 * 4096;
        let p = pick(&H200, Nearest, 16384 * 4096 + 4096 * 4096);
        assert_eq!((p.kernel, p.repack_x, p.repack_w, p.rounding), (Kernel::Sm90CooperativeCluster2, true, true, Nearest));
        assert!(p.workspace_len(s.m, s.n, s.k) < need);
        // ...else the mma.sync kernels that round in registers.
        let p = pick(&H200, Nearest, 16384 * 4096 + 4096 * 4096 - 1);
        assert_eq!((p.kernel, p.repack_x, p.repack_w, p.rounding), (Kernel::Sm80Wide, false, false, Nearest));
        let p = pick(&H200, Truncate, usize::MAX);
        assert_eq!((p.kernel, p.repack_x, p.rounding), (Kernel::Sm90CooperativeCluster2, false, Truncate));
        // Small problems round with the 64×64 tile either way (not worth a repack).
        let small = shape(128, 256, 64);
        let p = select_kernel(&H200, Dispatch::Auto, Nearest, small, (ALIGNED, 64), (ALIGNED, 64), usize::MAX).unwrap();
        assert_eq!((p.kernel, p.rounding, p.repack_x), (Kernel::Sm80Small, Nearest, false));
        // A forced kernel runs as it is, and the plan says how it rounds.
        let p = select_kernel(&H200, Dispatch::Force(Kernel::Sm80WideTrunc), Nearest, s, a, a, usize::MAX).unwrap();
        assert_eq!((p.rounding, p.repack_x), (Truncate, false));
        // Unaligned operands: repacking rounds them, so even the TMA kernel gives Nearest.
        let u = (ALIGNED, 4097);
        let s = shape(16383, 4095, 4097);
        let p = select_kernel(&H200, Dispatch::Auto, Truncate, s, u, u, usize::MAX).unwrap();
        assert_eq!((p.kernel, p.rounding), (Kernel::Sm90CooperativeCluster2, Nearest));
    }

    #[test]
    fn x_boxes_stop_at_m_in_whole_swizzle_atoms() {
        assert_eq!([1, 8, 9, 63, 64, 65, 16384].map(|m| x_box_rows(m, 64)), [8, 8, 16, 64, 64, 64, 64]);
        assert_eq!([1, 100, 128, 129].map(|m| x_box_rows(m, 128)), [8, 104, 128, 128]);
    }

    #[test]
    fn stream_k_when_a_workspace_has_room() {
        let a = |k| (ALIGNED, k);
        // The ping-pong kernel (Auto's choice for fewer than 3 waves of 256×256 cluster tiles).
        let pp = Dispatch::Force(Kernel::Sm90Pingpong);
        let plan = |s: Shape, ws| select(&H200, pp, s, a(s.k), a(s.k), ws).unwrap();
        let sk_len = |grid: usize, sk: usize| grid * 128 * 128 + sk + 1;
        // At least 8 full waves and a partial one: the reference shape's 4096 tiles are 31 waves
        // of 132 and 4 tiles; those 4 are shared with the wave before (136 stream-K tiles).
        let s = shape(16384, 4096, 4096);
        let p = plan(s, usize::MAX);
        assert_eq!((p.kernel, p.grid, p.stream_k_tiles), (Kernel::Sm90Pingpong, 132, 136));
        assert_eq!(p.workspace_len(s.m, s.n, s.k), sk_len(132, 136));
        // 2048 tiles: 15 waves and 68 tiles, more than a quarter wave: those 68 alone.
        assert_eq!(plan(shape(8192, 4096, 4096), usize::MAX).stream_k_tiles, 68);
        // Without room for the partial tiles, or with fewer than 8 waves (4096³: 7 waves and 100
        // tiles), or whole waves only: the plain persistent schedule, and no workspace for it.
        let p = plan(s, sk_len(132, 136) - 1);
        assert_eq!((p.grid, p.stream_k_tiles, p.workspace_len(s.m, s.n, s.k)), (132, 0, 0));
        assert_eq!(plan(shape(4096, 4096, 4096), usize::MAX).stream_k_tiles, 0);
        assert_eq!(plan(shape(132 * 128, 8 * 128, 64), usize::MAX).stream_k_tiles, 0);
        // Fewer tiles than SMs: split-K, every tile into the same number of parts (4 × 32 CTAs),
        // at least 8 k-blocks per CTA.
        let s = shape(1, 4096, 4096);
        let p = plan(s, usize::MAX);
        assert_eq!((p.grid, p.stream_k_ctas, p.stream_k_tiles), (128, 128, 32));
        assert_eq!(p.workspace_len(s.m, s.n, s.k), sk_len(128, 32));
        // One element short of the partial tiles: one CTA per tile, no error.
        let p = plan(s, sk_len(128, 32) - 1);
        assert_eq!((p.grid, p.stream_k_tiles, p.workspace_len(s.m, s.n, s.k)), (32, 0, 0));
        let p = plan(shape(300, 520, 512), usize::MAX);
        assert_eq!((p.grid, p.stream_k_tiles), (30, 15));
        // Too little K to split: 15 tiles × 2 k-blocks.
        assert_eq!(plan(shape(300, 520, 64), usize::MAX).stream_k_tiles, 0);
        // More than half a wave of tiles (96, 128): one CTA per tile, no split.
        for m in [384, 512] {
            let p = plan(shape(m, 4096, 4096), usize::MAX);
            assert_eq!((p.grid as usize, p.stream_k_tiles), (m / 128 * 32, 0), "{m}");
        }
        // Repacks come first in the workspace; split-K only if room is left after them.
        let u = shape(1000, 3000, 4097);
        let repacks = (1000 + 3000) * 4128;
        let p = select(&H200, Dispatch::Auto, u, a(4097), a(4097), repacks).unwrap();
        assert_eq!((p.repack_x, p.grid, p.stream_k_tiles), (true, 132, 0), "192 tiles: no split");
        // 64 × 3000: 47 tiles of the 64×64 ping-pong (Auto's pick), each cut in 2 (94 CTAs).
        let u = shape(64, 3000, 4097);
        let repacks = (64 + 3000) * 4128;
        let sk = 94 * 64 * 64 + 47 + 1;
        let p = select(&H200, Dispatch::Auto, u, a(4097), a(4097), repacks + sk).unwrap();
        assert_eq!((p.kernel, p.repack_x, p.grid, p.stream_k_tiles), (Kernel::Sm90Pingpong64x64, true, 94, 47));
        assert_eq!(p.workspace_len(u.m, u.n, u.k), repacks + sk);
    }

    #[test]
    fn stream_k_for_cluster_and_cooperative_kernels_counts_clusters() {
        let a = |k| (ALIGNED, k);
        let forced = |k, s: Shape| select(&H200, Dispatch::Force(k), s, a(s.k), a(s.k), usize::MAX).unwrap();
        let reference = shape(16384, 4096, 4096);
        // Cooperative 128×256, no cluster: 2048 tiles = 15 waves of 132 and 68 tiles; two
        // counters per tile (one per consumer warpgroup).
        let p = forced(Kernel::Sm90Cooperative, reference);
        assert_eq!((p.grid, p.stream_k_ctas, p.stream_k_tiles), (132, 132, 68));
        assert_eq!(p.workspace_len(16384, 4096, 4096), 132 * 128 * 256 + 68 * 2 + 1);
        // Its 2-CTA clusters: 1024 cluster tiles of 256×256 = 15 waves of 66 clusters and 34; a
        // slot of two 128×256 tiles per cluster, a counter per (cluster tile, CTA, consumer).
        let p = forced(Kernel::Sm90CooperativeCluster2, reference);
        assert_eq!((p.grid, p.cluster, p.stream_k_ctas, p.stream_k_tiles), (132, 2, 66, 34));
        assert_eq!(p.workspace_len(16384, 4096, 4096), 66 * 2 * 128 * 256 + 34 * 2 * 2 + 1);
        // Ping-pong clusters: 2048 cluster tiles = 31 waves of 66 and 2, under a quarter wave:
        // shared with the wave before.
        let p = forced(Kernel::Sm90PingpongCluster2, reference);
        assert_eq!((p.grid, p.stream_k_ctas, p.stream_k_tiles), (132, 66, 68));
        assert_eq!(p.workspace_len(16384, 4096, 4096), 66 * 2 * 128 * 128 + 68 * 2 + 1);
        // Split-K: M = 1 has 16 cluster tiles of 256×256, each shared by 4 of the 66 clusters.
        let p = forced(Kernel::Sm90CooperativeCluster2, shape(1, 4096, 4096));
        assert_eq!((p.grid, p.stream_k_ctas, p.stream_k_tiles), (128, 64, 16));
        // 4096³: 256 cluster tiles, 3 waves and 58: too few waves to share the last.
        let p = forced(Kernel::Sm90CooperativeCluster2, shape(4096, 4096, 4096));
        assert_eq!((p.grid, p.stream_k_tiles), (132, 0));
        // No cluster fits (max_active_clusters = 0): the cluster kernels are refused, never split.
        let no_clusters = DeviceInfo { max_active_clusters: 0, ..H200 };
        let forced_c2 = Dispatch::Force(Kernel::Sm90CooperativeCluster2);
        assert!(select(&no_clusters, forced_c2, reference, a(4096), a(4096), usize::MAX).is_err());
    }

    #[test]
    fn stream_k_for_mma_sync_kernels_counts_resident_ctas() {
        let a = |k| (ALIGNED, k);
        let s = shape(16384, 4096, 4096);
        let force = |d: &DeviceInfo, k: Kernel, s: Shape| select(d, Dispatch::Force(k), s, a(s.k), a(s.k), usize::MAX).unwrap();
        // 2048 tiles of 128×256, one CTA per SM: 15 waves and 68 tiles, shared by 132 CTAs that
        // follow the 1980 whole-tile CTAs.
        let p = force(&H200, Kernel::Sm80WideTrunc, s);
        assert_eq!((p.stream_k_tiles, p.stream_k_ctas, p.grid), (68, 132, 1980 + 132));
        assert_eq!(p.workspace_len(s.m, s.n, s.k), 132 * 128 * 256 + 68 + 1);
        // 4096 tiles of 128×128, two CTAs per SM: waves of 264, 15 of them and 136 tiles.
        let p = force(&H200, Kernel::Sm80LargeTrunc, s);
        assert_eq!((p.stream_k_tiles, p.stream_k_ctas, p.grid), (136, 264, 3960 + 264));
        // The A100's default (rounding) kernel: 108 SMs, 18 waves and 104 tiles.
        let p = select(&A100, Dispatch::Auto, s, a(4096), a(4096), usize::MAX).unwrap();
        assert_eq!((p.kernel, p.stream_k_tiles, p.stream_k_ctas, p.grid), (Kernel::Sm80Wide, 104, 108, 2052));
        // Split-K: 128 tiles of 64×64 and 128 k-blocks, two per SM fit: 216 CTAs share them all.
        let small = shape(128, 4096, 4096);
        let p = select(&A100, Dispatch::Auto, small, a(4096), a(4096), usize::MAX).unwrap();
        assert_eq!((p.kernel, p.stream_k_tiles, p.stream_k_ctas, p.grid), (Kernel::Sm80Small, 128, 216, 216));
        // The scalar kernels too (any K), and without a workspace nobody splits.
        let odd = shape(1, 4095, 4097);
        let p = select(&A100, Dispatch::Auto, odd, (ALIGNED + 4, 4097), (ALIGNED + 4, 4097), usize::MAX).unwrap();
        assert_eq!(p.kernel, Kernel::Sm80SmallScalar);
        assert!(p.stream_k_tiles == 64 && p.stream_k_ctas > 64, "{p:?}");
        let p = select(&A100, Dispatch::Auto, s, a(4096), a(4096), 0).unwrap();
        assert_eq!((p.stream_k_tiles, p.stream_k_ctas, p.grid, p.workspace_len(s.m, s.n, s.k)), (0, 0, 2048, 0));
    }

    #[test]
    fn tma_store_needs_16_byte_rows_of_out() {
        let (s, a) = (shape(512, 512, 512), (ALIGNED, 512));
        let p = select(&H200, Dispatch::Auto, s, a, a, 0).unwrap();
        assert_eq!(p.kernel.family(), Family::TmaWgmma);
        assert!(!p.tma_store, "select() does not know out");
        assert!(p.for_out(512, (ALIGNED, 512)).tma_store);
        assert!(p.for_out(512, (ALIGNED + 48, 516)).tma_store);
        assert!(!p.for_out(512, (ALIGNED + 8, 512)).tma_store, "8-byte aligned base");
        assert!(!p.for_out(512, (ALIGNED, 514)).tma_store, "ldo % 4 != 0");
        assert!(!p.for_out(510, (ALIGNED, 512)).tma_store, "N % 4 != 0: the last box would write padding");
        let m = select(&A100, Dispatch::Auto, s, a, a, 0).unwrap();
        assert!(!m.for_out(512, (ALIGNED, 512)).tma_store, "mma.sync kernels store from registers");
    }

    #[test]
    fn small_problems_take_the_small_tile() {
        let p = select(&A100, Dispatch::Auto, shape(128, 4096, 4096), (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
        assert_eq!((p.kernel, p.grid), (Kernel::Sm80Small, 2 * 64));
        let p = select(&A100, Dispatch::Auto, shape(1, 3, 5), (ALIGNED, 5), (ALIGNED, 5), 0).unwrap();
        assert_eq!((p.kernel, p.grid), (Kernel::Sm80SmallScalar, 1));
    }

    #[test]
    fn forcing_a_kernel_that_cannot_run_is_an_error() {
        let s = shape(64, 64, 64);
        let e = select(&A100, Dispatch::Force(Kernel::Sm90Pingpong), s, (ALIGNED, 64), (ALIGNED, 64), 0).unwrap_err();
        assert!(matches!(e, Error::KernelUnavailable { kernel: Kernel::Sm90Pingpong, .. }), "{e}");
        let e = select(&H200, Dispatch::Force(Kernel::Sm90Pingpong), shape(64, 64, 63), (ALIGNED, 63), (ALIGNED, 63), 0).unwrap_err();
        assert!(matches!(e, Error::KernelUnavailable { .. }), "{e}");
        let e = select(&H200, Dispatch::Force(Kernel::Sm80Large), s, (ALIGNED + 8, 64), (ALIGNED, 64), 0).unwrap_err();
        assert!(e.to_string().contains("16-byte"), "{e}");
        let p = select(&H200, Dispatch::Force(Kernel::Sm80SmallScalar), s, (ALIGNED + 4, 64), (ALIGNED, 64), 0).unwrap();
        assert_eq!((p.kernel, p.grid, p.block), (Kernel::Sm80SmallScalar, 1, 128));
        assert!(!p.repack_x && !p.repack_w);
    }

    const C2: Dispatch = Dispatch::Force(Kernel::Sm90PingpongCluster2);

    #[test]
    fn the_cluster_kernel_launches_whole_resident_clusters() {
        // (M, N) -> cluster tiles of 256 × 128, capped at 66 resident clusters, 2 CTAs each.
        for (m, n, expected) in [
            (16384, 4096, 64 * 32),
            (4096, 4096, 16 * 32),
            (1, 1, 1),
            (128, 128, 1),      // m <= 128: the second CTA's rows are all past M
            (129, 128, 1),      // one row in the second CTA
            (200, 300, 3),
            (256, 128, 1),
            (257, 129, 2 * 2),  // a third 128-row tile opens a second cluster row
            (300, 4096, 2 * 32),
            (1000, 256, 4 * 2), // 1000 % 256 = 232: the second CTA of the last row has 104 rows
        ] {
            let s = shape(m, n, 64);
            let p = select(&H200, C2, s, (ALIGNED, 64), (ALIGNED, 64), 0).unwrap();
            assert_eq!(p.kernel, Kernel::Sm90PingpongCluster2);
            assert_eq!(cluster_tiles(s, p.kernel), expected, "{m}×{n}");
            assert_eq!(p.grid, 2 * expected.min(66) as u32, "{m}×{n}: 2 · min(cluster tiles, clusters)");
            assert!(p.grid % 2 == 0 && p.grid <= 2 * H200.max_active_clusters, "{p:?}");
            assert_eq!((p.cluster, p.block, p.smem_bytes), (2, 384, Kernel::Sm90Pingpong.spec().smem_bytes));
            assert!(!p.repack_x && !p.repack_w);
        }
        // The cap is what the occupancy query said, not SMs / 2 (clusters live inside one GPC).
        let fragmented = DeviceInfo { max_active_clusters: 60, ..H200 };
        let p = select(&fragmented, C2, shape(16384, 4096, 4096), (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
        assert_eq!((p.grid, p.cluster), (120, 2));
        // The plain ping-pong kernel: no cluster, one CTA per SM.
        let p = select(&H200, Dispatch::Force(Kernel::Sm90Pingpong), shape(16384, 4096, 4096), (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
        assert_eq!((p.grid, p.cluster), (132, 1));
        // Every other kernel runs without clusters.
        for k in Kernel::ALL.into_iter().filter(|&k| k.cluster_m() == 1) {
            let p = select(&H200, Dispatch::Force(k), shape(300, 200, 64), (ALIGNED, 64), (ALIGNED, 64), 0).unwrap();
            assert_eq!(p.cluster, 1, "{p:?}");
        }
    }

    #[test]
    fn auto_picks_the_cooperative_cluster_kernel_for_at_least_three_waves() {
        let a = |k| (ALIGNED, k);
        // 66 clusters: 198 cluster tiles of 256×256 or more.
        for (m, n, k) in [(16384, 4096, 4096), (4096, 4096, 4096), (8192, 8192, 8192), (12800, 4096, 64)] {
            let p = select(&H200, Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
            assert_eq!((p.kernel, p.cluster, p.grid), (Kernel::Sm90CooperativeCluster2, 2, 132), "{m}×{n}×{k}");
        }
        // Fewer: the ping-pong (3072 × 4096: 768 tiles of 128×128, but 192 cluster tiles).
        for (m, n, k) in [(3072, 4096, 4096), (2048, 2048, 2048), (1024, 4096, 4096), (384, 4096, 4096), (512, 4096, 4096)] {
            let p = select(&H200, Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
            assert_eq!((p.kernel, p.cluster), (Kernel::Sm90Pingpong, 1), "{m}×{n}×{k}");
        }
        // At most one wave (132) of 64×64 tiles: the 64×64 ping-pong; else of 64×128 tiles: the
        // 64×128 one.
        for (m, n, k) in [(1, 4096, 4096), (128, 4096, 4096), (64, 8192, 64), (257, 129, 4096), (300, 1024, 512)] {
            let p = select(&H200, Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
            assert_eq!((p.kernel, p.cluster), (Kernel::Sm90Pingpong64x64, 1), "{m}×{n}×{k}");
        }
        for (m, n, k) in [(129, 4096, 4096), (256, 4096, 4096), (64, 8512, 64), (300, 2048, 512)] {
            let p = select(&H200, Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
            assert_eq!((p.kernel, p.cluster), (Kernel::Sm90Pingpong64, 1), "{m}×{n}×{k}");
        }
        // K % 4 != 0 with room to repack: the operands are repacked for it too.
        let s = shape(16383, 4095, 4097);
        let p = select(&H200, Dispatch::Auto, s, a(4097), a(4097), usize::MAX).unwrap();
        assert_eq!((p.kernel, p.repack_x, p.repack_w), (Kernel::Sm90CooperativeCluster2, true, true));
        // No cluster fits: the ping-pong, whatever the size.
        let no_clusters = DeviceInfo { max_active_clusters: 0, ..H200 };
        let p = select(&no_clusters, Dispatch::Auto, shape(16384, 4096, 4096), a(4096), a(4096), 0).unwrap();
        assert_eq!((p.kernel, p.cluster), (Kernel::Sm90Pingpong, 1));
    }

    #[test]
    fn the_cluster_kernel_is_refused_where_it_cannot_run() {
        let s = shape(512, 512, 64);
        let a = (ALIGNED, 64);
        for device in [A100, RTX4090] {
            let e = select(&device, C2, s, a, a, 0).unwrap_err();
            assert!(matches!(e, Error::KernelUnavailable { kernel: Kernel::Sm90PingpongCluster2, .. }), "{e}");
            assert!(e.to_string().contains("sm_90"), "{e}");
        }
        // sm_90, but load() found no room for a cluster (or the occupancy query failed).
        let no_clusters = DeviceInfo { max_active_clusters: 0, ..H200 };
        let e = select(&no_clusters, C2, s, a, a, 0).unwrap_err();
        assert!(e.to_string().contains("cluster"), "{e}");
        assert!(select(&no_clusters, Dispatch::Force(Kernel::Sm90Pingpong), s, a, a, 0).is_ok());
        // TMA's rules: K = 0, K % 4 != 0, a misaligned base, ld % 4 != 0 (without a workspace).
        let e = select(&H200, C2, shape(64, 64, 0), (ALIGNED, 0), (ALIGNED, 0), 0).unwrap_err();
        assert!(e.to_string().contains("K > 0"), "{e}");
        for (x, w, k) in [
            ((ALIGNED, 63), (ALIGNED, 63), 63),
            ((ALIGNED + 4, 64), (ALIGNED, 64), 64),
            ((ALIGNED, 64), (ALIGNED + 8, 64), 64),
            ((ALIGNED, 66), (ALIGNED, 64), 64),
        ] {
            let e = select(&H200, C2, shape(300, 200, k), x, w, 0).unwrap_err();
            assert!(matches!(e, Error::KernelUnavailable { kernel: Kernel::Sm90PingpongCluster2, .. }), "{e}");
            assert!(e.to_string().contains("TMA"), "{e}");
            // With a workspace the unaligned operands are repacked, as for the plain kernel.
            let p = select(&H200, C2, shape(300, 200, k), x, w, usize::MAX).unwrap();
            assert_eq!((p.kernel, p.grid, p.cluster), (Kernel::Sm90PingpongCluster2, 2 * 2 * 2, 2));
            assert!(p.repack_x || p.repack_w, "{p:?}");
        }
    }
}
