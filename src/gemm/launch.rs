//! A planned call, launched: the repacks, stream-K's launch number, the parameter structs of
//! the header filled, and the kernel launched on its family's terms. Every address here was
//! validated and is kept alive and ordered on the stream by the caller's guards.

use cudarc::driver::{CudaStream, LaunchConfig, PushKernelArg};

use super::plan::Plan;
use super::shape::{Shape, Strided};
use super::stream_k;
use super::weight::WeightForm;
use super::workspace::{repacked_ld, Region};
use crate::driver::tma::TmaElement;
use crate::driver::{launch, tma};
use crate::epilogue::{Epilogue, Source};
use crate::error::{Error, Result};
use crate::kernels::loaded::LoadedKernels;
use crate::kernels::{Family, Kernel, Precision};
use crate::sys::{self, GeEpilogue, GeProblem, GeRepackParams, GeSm90Params, GeStreamK, GeTensorMap};

/// Device addresses of a validated call (bias 0: none; workspace 0: none).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Addresses {
    pub x: Strided,
    pub w: Strided,
    pub bias: u64,
    pub out: Strided,
    pub workspace: u64,
}

/// Launches `plan` for `shape` on `stream`.
pub(crate) fn launch(
    kernels: &LoadedKernels,
    stream: &CudaStream,
    plan: &Plan,
    shape: Shape,
    a: Addresses,
    epilogue: GeEpilogue,
) -> Result<()> {
    let layout = &plan.workspace;
    // Operands the kernel reads: the caller's, or their repacked copies in the workspace,
    // converted as the kernel expects (RepackMode::for_x, for_w).
    let repack = |src: Strided, rows: usize, region: Option<Region>, mode: RepackMode| -> Result<Strided> {
        let Some(region) = region else { return Ok(src) };
        let dst = Strided { addr: region.addr(a.workspace), ld: repacked_ld(shape.k) };
        repack(kernels, stream, src, rows, shape.k, dst, mode)?;
        Ok(dst)
    };
    let x = repack(a.x, shape.m, layout.x, RepackMode::for_x(plan.kernel))?;
    let w = repack(a.w, shape.n, layout.w, RepackMode::for_w(plan.kernel))?;
    let stream_k = match (layout.partials, layout.sync) {
        (Some(partials), Some(sync)) => {
            // The ready words, then the ticket word (the region's last 8 bytes).
            let ready = sync.addr(a.workspace);
            GeStreamK {
                partials: partials.addr(a.workspace) as *mut f32,
                ready: ready as *mut u64,
                ticket: (ready + 4 * sync.len as u64 - 8) as *mut u64,
                launch: stream_k::next_launch(),
                tiles: plan.stream_k_tiles as i32,
            }
        }
        _ => GeStreamK {
            partials: std::ptr::null_mut(),
            ready: std::ptr::null_mut(),
            ticket: std::ptr::null_mut(),
            launch: 0,
            tiles: 0,
        },
    };
    let problem = GeProblem {
        x: x.addr as *const f32,
        w: w.addr as *const f32,
        bias: a.bias as *const f32,
        out: a.out.addr as *mut f32,
        ldx: x.ld as i64,
        ldw: w.ld as i64,
        ldo: a.out.ld as i64,
        m: shape.m as i32,
        n: shape.n as i32,
        k: shape.k as i32,
        epilogue,
    };
    // select() only picks kernels the device supports, and load() loaded all of those.
    let function = kernels
        .function(plan.kernel)
        .ok_or(Error::KernelUnavailable { kernel: plan.kernel, reason: "not loaded for this device" })?;
    let cfg =
        LaunchConfig { grid_dim: (plan.grid, 1, 1), block_dim: (plan.block, 1, 1), shared_mem_bytes: plan.smem_bytes };
    match plan.kernel.family() {
        Family::MmaSync => {
            let mut launch = stream.launch_builder(function);
            launch.arg(&problem);
            launch.arg(&stream_k);
            // SAFETY: `problem` and `stream_k` match the kernel's `const GeProblem` and `const
            // GeStreamK` parameters (bindgen); their pointers are live device buffers of this
            // context whose extents were validated for the shape and strides (or workspace
            // regions sized for them by the plan's layout, written above in stream order: the
            // stream-K region holds `stream_k_ctas` partial tiles and the 8-byte aligned
            // hand-off words, which need no value at launch); the
            // caller's guards keep them alive and ordered on `stream`.
            unsafe { launch.launch(cfg) }?;
        }
        Family::Gemv => {
            let mut launch = stream.launch_builder(function);
            launch.arg(&problem);
            // SAFETY: `problem` matches the kernel's `const GeProblem` parameter (bindgen); its
            // pointers are live, validated device buffers of this context (X with at most the
            // tile's rows and 16-byte rows: select() checked both), ordered on `stream` by the
            // caller's guards. The grid is one CTA per `tile_n` rows of W; no dynamic shared memory.
            unsafe { launch.launch(cfg) }?;
        }
        Family::Skinny if plan.cluster == 1 => {
            let mut launch = stream.launch_builder(function);
            launch.arg(&problem);
            // SAFETY: `problem` matches the kernel's `const GeProblem` parameter (bindgen); its
            // pointers are live, validated device buffers of this context (X with at most the
            // tile's rows: select() checked M), ordered on `stream` by the caller's guards; a
            // one-CTA cluster is what a plain launch runs on sm_90; load() raised the function's
            // shared memory limit to `plan.smem_bytes`.
            unsafe { launch.launch(cfg) }?;
        }
        Family::Skinny => {
            // SAFETY: as above; the grid is `plan.cluster` CTAs per 16 rows of W, a whole number
            // of clusters of at most GE_SKINNY_MAX_SPLIT (portable) CTAs.
            unsafe { launch::launch_clustered(stream, function, cfg, (plan.cluster, 1, 1), &problem) }?;
        }
        Family::TmaWgmma => {
            let spec = plan.kernel.spec();
            let x_box_rows = x_box_rows(shape.m, spec.tile_m);
            let out_map = if plan.tma_store {
                tma::encode_row_major(
                    a.out.addr,
                    shape.m,
                    shape.n,
                    a.out.ld,
                    sys::GE_SM90_STORE_BOX_ROWS,
                    sys::GE_SM90_STORE_BOX_COLS,
                    TmaElement::F32,
                )?
            } else {
                GeTensorMap { opaque: [0; 16] }
            };
            // Operands through TF32 maps when the plan rounds on load: the TMA rounds them.
            // (Mutation 6, tests only: fp32 maps anyway, so a plan that says rounded truncates.)
            let operand =
                if plan.round_on_load && !cfg!(ge_mutation = "6") { TmaElement::Tf32 } else { TmaElement::F32 };
            let w_map = |addr: u64| {
                tma::encode_row_major(addr, shape.n, shape.k, w.ld, spec.w_box_rows(), spec.tile_k, operand)
            };
            // A split W (a prepared weight's, or the workspace's: RepackMode::Split) holds its N
            // rows of small parts right after its N rows of big parts.
            let w_small_map = if plan.kernel.needs_split_w() {
                w_map(w.addr + 4 * (shape.n * w.ld) as u64)?
            } else {
                GeTensorMap { opaque: [0; 16] }
            };
            let params = GeSm90Params {
                x_map: tma::encode_row_major(x.addr, shape.m, shape.k, x.ld, x_box_rows, spec.tile_k, operand)?,
                w_map: w_map(w.addr)?,
                w_small_map,
                out_map,
                problem,
                stream_k,
                store_tma: plan.tma_store as i32,
                x_box_rows: x_box_rows as i32,
            };
            if spec.cluster_m == 1 {
                let mut launch = stream.launch_builder(function);
                launch.arg(&params);
                // SAFETY: as above, with the tensor maps describing the same validated extents;
                // w_small_map is encoded only for a kernel that reads W split, which select()
                // plans only with a split W: a split prepared weight (2 · N · ld elements) or W
                // split into a workspace region of that length.
                unsafe { launch.launch(cfg) }?;
            } else {
                // SAFETY: as above; `params` is the kernel's `const GeSm90Params`; select() made
                // the grid a whole number of clusters (at most a wave of them); load() raised the
                // function's shared memory limit to `plan.smem_bytes`.
                unsafe { launch::launch_clustered(stream, function, cfg, (plan.cluster, 1, 1), &params) }?;
            }
        }
    }
    Ok(())
}

/// The header's epilogue parameters for a validated epilogue whose `C`, if any, is at `Strided`
/// (`Source::Out`: at `out`).
pub(crate) fn epilogue_params(e: &Epilogue<Strided>, out: Strided) -> GeEpilogue {
    let (activation, scale) = e.activation.code();
    let (source, beta) = match &e.residual {
        Some(r) => (
            match r.source {
                Source::Matrix(c) => c,
                Source::Out => out,
            },
            r.beta,
        ),
        None => (Strided { addr: 0, ld: 0 }, 0.0),
    };
    GeEpilogue { source: source.addr as *const f32, ldc: source.ld as i64, scale, beta, activation }
}

/// Rows of X per TMA box (`GeSm90Params::x_box_rows`): the CTA tile's, or M rounded up to whole
/// 8-row swizzle atoms when M is smaller, so that TMA does not zero-fill rows no output needs.
fn x_box_rows(m: usize, tile_m: u32) -> u32 {
    (m.div_ceil(8) * 8).min(tile_m as usize) as u32
}

/// What a repack writes (`GeRepackParams::mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RepackMode {
    /// The fp32 bits.
    Copy,
    /// Rounded to TF32, to nearest, ties away.
    Round,
    /// 3xTF32's big parts, then (`rows · dst.ld` elements further) the small parts.
    Split,
}

impl RepackMode {
    /// The mode that writes a weight in `form`.
    pub fn to(form: WeightForm) -> Self {
        match form {
            WeightForm::Raw => RepackMode::Copy,
            WeightForm::Rounded => RepackMode::Round,
            WeightForm::Split => RepackMode::Split,
        }
    }

    /// How X is repacked for `kernel`: as it is for the Tf32x3 kernels (they split it
    /// themselves), else rounded (the truncating kernels then see X rounded: more accurate, and
    /// free in a pass that moves the data anyway).
    pub fn for_x(kernel: Kernel) -> Self {
        if kernel.precision() == Precision::Tf32x3 {
            RepackMode::Copy
        } else {
            RepackMode::Round
        }
    }

    /// How W is repacked for `kernel`: split for the kernels that read it split, as it is for
    /// the other Tf32x3 kernels, else rounded.
    pub fn for_w(kernel: Kernel) -> Self {
        match (kernel.needs_split_w(), kernel.precision()) {
            (true, _) => RepackMode::Split,
            (false, Precision::Tf32x3) => RepackMode::Copy,
            _ => RepackMode::Round,
        }
    }
}

/// Copies `rows × k` of `src` into a dense copy at `dst` (rows of `dst.ld`, padding zeroed),
/// converted as `mode` says; [`RepackMode::Split`] writes `2 · rows · dst.ld` elements.
pub(crate) fn repack(
    kernels: &LoadedKernels,
    stream: &CudaStream,
    src: Strided,
    rows: usize,
    k: usize,
    dst: Strided,
    mode: RepackMode,
) -> Result<()> {
    let params = GeRepackParams {
        src: src.addr as *const f32,
        dst: dst.addr as *mut f32,
        ld_src: src.ld as i64,
        ld_dst: dst.ld as i64,
        rows: rows as i32,
        cols: k as i32,
        mode: match mode {
            RepackMode::Copy => sys::GE_REPACK_COPY,
            RepackMode::Round => sys::GE_REPACK_ROUND,
            RepackMode::Split => sys::GE_REPACK_SPLIT,
        } as i32,
        small_offset: (rows * dst.ld) as i64,
    };
    let cfg = LaunchConfig {
        grid_dim: rowwise_grid(rows, dst.ld / 4, kernels.device.sm_count),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut launch = stream.launch_builder(&kernels.repack);
    launch.arg(&params);
    // SAFETY: src is a validated operand (rows × k at stride ld); dst is 16-byte aligned with
    // rows × dst.ld elements (twice that for Split) (a workspace region of the plan's layout, which select() fitted
    // into the workspace, or a prepared weight's allocation); both ordered on `stream` by the
    // caller's guards.
    unsafe { launch.launch(cfg) }?;
    Ok(())
}

/// Grid for the row-wise memory-bound kernels (repack, the testbed's elementwise pass): x covers
/// one row's `units` (16-byte groups) with 256-thread blocks, y keeps about 16 blocks per SM in
/// flight.
pub(crate) fn rowwise_grid(rows: usize, units: usize, sm_count: u32) -> (u32, u32, u32) {
    let x = units.div_ceil(256).clamp(1, i32::MAX as usize);
    let y = (sm_count as usize * 16 / x).clamp(1, rows.clamp(1, 65_535));
    (x as u32, y as u32, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x_boxes_stop_at_m_in_whole_swizzle_atoms() {
        assert_eq!([1, 8, 9, 63, 64, 65, 16384].map(|m| x_box_rows(m, 64)), [8, 8, 16, 64, 64, 64, 64]);
        assert_eq!([1, 100, 128, 129].map(|m| x_box_rows(m, 128)), [8, 104, 128, 128]);
    }

    #[test]
    fn repacks_hand_each_kernel_the_values_its_rounding_expects() {
        // What dispatch's plan_precision assumes of a repack: the Tf32x3 kernels get X as it is
        // (they split it), and W split when they read it so, else as it is; every other kernel
        // gets both rounded to TF32, also the truncating ones.
        for k in Kernel::ALL {
            let x3 = k.precision() == Precision::Tf32x3;
            assert_eq!(RepackMode::for_x(k), if x3 { RepackMode::Copy } else { RepackMode::Round }, "{k:?}");
            let w = match (k.needs_split_w(), x3) {
                (true, _) => RepackMode::Split,
                (false, true) => RepackMode::Copy,
                (false, false) => RepackMode::Round,
            };
            assert_eq!(RepackMode::for_w(k), w, "{k:?}");
        }
        // Both kinds of Tf32x3 kernel exist (else the loop above would not see one of the arms).
        assert!(Kernel::ALL.iter().any(|k| k.needs_split_w()));
        assert!(Kernel::ALL.iter().any(|k| !k.needs_split_w() && k.precision() == Precision::Tf32x3));
    }

    #[test]
    fn rowwise_grids_cover_rows_and_columns() {
        assert_eq!(rowwise_grid(16384, 1025, 132), (5, 422, 1));
        assert_eq!(rowwise_grid(1, 1, 132), (1, 1, 1));
        assert_eq!(rowwise_grid(1_000_000, 1, 132), (1, 2112, 1));
        assert_eq!(rowwise_grid(3, 1 << 20, 132), (4096, 1, 1));
    }
}
