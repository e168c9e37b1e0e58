//! The embedded fatbin, the list of kernels in it, and their launch contracts.
//!
//! Every number here comes from `csrc/include/gemm_epilogue.h` through [`crate::sys`]; the entry
//! point names are the `extern "C"` symbols in `csrc/sm80/entries.cuh` and `csrc/sm90/entries.cuh`
//! (a test checks each name is in the image).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, LaunchConfig};
use cudarc::nvrtc::Ptx;

use crate::device::DeviceInfo;
use crate::error::Result;
use crate::{launch, sys};

/// The fatbin nvcc built from `csrc/kernels.cu`: SASS for sm_80 and sm_90a, PTX for newer chips.
pub static FATBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/gemm_epilogue.fatbin"));

/// The two kernel families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// `cp.async` multistage pipeline + `mma.sync.m16n8k8` TF32 (sm_80 and newer; any shape).
    MmaSync,
    /// TMA loads + warp-specialised persistent `wgmma` TF32 (sm_90 only; TMA-compatible operands).
    TmaWgmma,
}

/// How a kernel turns fp32 operands into TF32 for the tensor cores (docs/EPILOGUE.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tf32Rounding {
    /// To nearest, ties away from zero (`cvt.rna.tf32.f32`), as cuBLAS's TF32 GEMM does: a
    /// relative error of at most 2⁻¹¹ per operand, unbiased.
    Nearest,
    /// The fp32 bits go to the tensor cores, which ignore the low 13 mantissa bits (what CUTLASS's
    /// TF32 kernels on fp32 data do): up to 2⁻¹⁰ per operand, always toward zero, so products are
    /// biased small by about 7·10⁻⁴ on random data. Saves the conversion: 1.5× faster mma.sync
    /// kernels on the H200 (docs/TILING.md).
    Truncate,
}

/// Every kernel in the fatbin. Pick one with [`crate::Dispatch::Force`], or let dispatch choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Kernel {
    /// mma.sync, 128×128×32 CTA tile, 3 stages, 16-byte loads (aligned operands, K % 4 == 0).
    Sm80Large,
    /// mma.sync, 128×128×32 CTA tile, 3 stages, 4-byte loads (any shape and alignment).
    Sm80LargeScalar,
    /// mma.sync, 128×256×32 CTA tile, 8 warps, 3 stages, 16-byte loads (144 KiB: sm_80, sm_90).
    Sm80Wide,
    /// mma.sync, 128×256×32 CTA tile, 8 warps, 3 stages, 4-byte loads (any shape and alignment).
    Sm80WideScalar,
    /// [`Kernel::Sm80Large`] with [`Tf32Rounding::Truncate`].
    Sm80LargeTrunc,
    /// [`Kernel::Sm80Wide`] with [`Tf32Rounding::Truncate`].
    Sm80WideTrunc,
    /// mma.sync, 64×64×32 CTA tile, 4 stages, 16-byte loads: small problems.
    Sm80Small,
    /// mma.sync, 64×64×32 CTA tile, 4 stages, 4-byte loads: small problems, any shape.
    Sm80SmallScalar,
    /// TMA + wgmma ping-pong, 128×128×32 tile per consumer warpgroup, persistent (sm_90): Auto's
    /// TMA kernel below 3 waves of [`Kernel::Sm90CooperativeCluster2`]'s cluster tiles and above
    /// one wave of [`Kernel::Sm90Pingpong64`]'s tiles. It
    /// reads its operands straight from TMA's shared-memory tiles: [`Tf32Rounding::Truncate`],
    /// unless they were repacked (and so rounded) first.
    Sm90Pingpong,
    /// [`Kernel::Sm90Pingpong`] with 64×128×32 tiles per consumer warpgroup and 8 stages (the
    /// same shared memory): twice the tiles, so a small-M problem is cut into half as many
    /// stream-K parts per tile, each finisher adding half as many half-size partials. Auto's
    /// TMA kernel when its tiles fit in one wave (at most one per SM) and
    /// [`Kernel::Sm90Pingpong64x64`]'s do not: 128 < M ≤ 256 on N = 4096 (docs/TILING.md).
    Sm90Pingpong64,
    /// [`Kernel::Sm90Pingpong`] with 64×64×32 tiles and 12 stages (the same shared memory):
    /// cuBLAS's tile for M ≤ 128, where a wave of them needs no split along K, or half as many
    /// parts as [`Kernel::Sm90Pingpong64`]'s. Auto's TMA kernel when its tiles fit in one wave
    /// (M ≤ 128 on N = 4096).
    Sm90Pingpong64x64,
    /// [`Kernel::Sm90Pingpong`] with its CTAs paired into clusters of 2 along M: the two CTAs
    /// compute vertically adjacent 128×128 tiles and each TMA-multicasts half of their shared W
    /// tile to both (sm_90; launched with `cuLaunchKernelEx`, at most
    /// [`DeviceInfo::max_active_clusters`] clusters). Only [`crate::Dispatch::Force`] selects it.
    Sm90PingpongCluster2,
    /// TMA + wgmma cooperative, 128×256×32 tile shared by both consumer warpgroups (64 rows each,
    /// `m64n256k8`), 4 stages, persistent (sm_90). cuBLAS's tile for large TF32 GEMMs: fewer
    /// shared-memory and L2 bytes per FLOP than the ping-pong, but its epilogue is not overlapped
    /// with the tensor cores. [`Tf32Rounding::Truncate`], like [`Kernel::Sm90Pingpong`]. Only
    /// [`crate::Dispatch::Force`] selects it.
    Sm90Cooperative,
    /// [`Kernel::Sm90Cooperative`] with its CTAs paired into clusters of 2 along M, as
    /// [`Kernel::Sm90PingpongCluster2`] pairs them: each CTA TMA-multicasts half of the shared
    /// 256-row W tile to both (a third less L2 traffic per CTA). cuBLAS's own configuration on
    /// the H200. [`crate::Dispatch::Auto`] picks it on sm_90 for problems of at least 3 waves of
    /// its 256×256 cluster tiles, where it holds a higher clock under the power cap than
    /// [`Kernel::Sm90Pingpong`] (docs/TILING.md).
    Sm90CooperativeCluster2,
}

/// How a kernel is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spec {
    pub name: &'static str,
    pub family: Family,
    pub tile_m: u32,
    pub tile_n: u32,
    pub tile_k: u32,
    pub stages: u32,
    pub threads: u32,
    pub smem_bytes: u32,
    /// Needs k % 4 == 0, 16-byte-aligned x/w and leading dimensions that are multiples of 4.
    pub needs_vec4: bool,
    /// What the kernel does to fp32 operands.
    pub rounding: Tf32Rounding,
    /// CTAs per thread-block cluster, along M (1: a plain launch, no cluster).
    pub cluster_m: u32,
    /// Rows of W per TMA box (TMA kernels): `tile_n`, or `tile_n / cluster_m` when each CTA of a
    /// cluster loads one slice of the W tile and multicasts it. Unused by mma.sync kernels.
    pub w_box_rows: u32,
    /// Rows of out per epilogue TMA store box (TMA kernels): the rows one consumer warpgroup
    /// holds, `tile_m` (ping-pong) or `tile_m / 2` (cooperative). Unused by mma.sync kernels.
    pub out_box_rows: u32,
    /// Consumer warpgroups that share one CTA tile, each publishing its own part of a stream-K
    /// partial tile with its own arrival counter: 2 for the cooperative kernels, else 1.
    pub tile_parts: u32,
}

#[allow(clippy::too_many_arguments)]
const fn sm80(name: &'static str, m: u32, n: u32, k: u32, stages: u32, threads: u32, vec4: bool, rounding: Tf32Rounding) -> Spec {
    Spec {
        name,
        family: Family::MmaSync,
        tile_m: m,
        tile_n: n,
        tile_k: k,
        stages,
        threads,
        smem_bytes: stages * (m + n) * k * 4,
        needs_vec4: vec4,
        rounding,
        cluster_m: 1,
        w_box_rows: n,
        out_box_rows: m,
        tile_parts: 1,
    }
}

/// The sm_90 ping-pong configuration, launched in clusters of `cluster_m` CTAs along M.
const fn sm90_pingpong(name: &'static str, cluster_m: u32, w_box_rows: u32) -> Spec {
    use sys::*;
    Spec {
        name,
        family: Family::TmaWgmma,
        tile_m: GE_SM90_PINGPONG_TILE_M,
        tile_n: GE_SM90_PINGPONG_TILE_N,
        tile_k: GE_SM90_PINGPONG_TILE_K,
        stages: GE_SM90_PINGPONG_STAGES,
        threads: GE_SM90_PINGPONG_THREADS,
        smem_bytes: GE_SM90_PINGPONG_SMEM_BYTES,
        needs_vec4: true,
        rounding: Tf32Rounding::Truncate,
        cluster_m,
        w_box_rows,
        out_box_rows: GE_SM90_PINGPONG_TILE_M,
        tile_parts: 1,
    }
}

/// The sm_90 ping-pong kernel's contract with another tile and stage count (no cluster): the
/// 64-row configurations, whose header constants come in the same five.
const fn sm90_pingpong_tile(name: &'static str, tile: (u32, u32, u32), stages: u32, threads: u32, smem_bytes: u32) -> Spec {
    Spec {
        tile_m: tile.0,
        tile_n: tile.1,
        tile_k: tile.2,
        stages,
        threads,
        smem_bytes,
        out_box_rows: tile.0,
        ..sm90_pingpong(name, 1, tile.1)
    }
}

/// The sm_90 cooperative configuration, launched in clusters of `cluster_m` CTAs along M.
const fn sm90_cooperative(name: &'static str, cluster_m: u32, w_box_rows: u32) -> Spec {
    use sys::*;
    Spec {
        name,
        family: Family::TmaWgmma,
        tile_m: GE_SM90_COOP_TILE_M,
        tile_n: GE_SM90_COOP_TILE_N,
        tile_k: GE_SM90_COOP_TILE_K,
        stages: GE_SM90_COOP_STAGES,
        threads: GE_SM90_COOP_THREADS,
        smem_bytes: GE_SM90_COOP_SMEM_BYTES,
        needs_vec4: true,
        rounding: Tf32Rounding::Truncate,
        cluster_m,
        w_box_rows,
        out_box_rows: GE_SM90_COOP_TILE_M / 2,
        tile_parts: 2,
    }
}

/// How many kernels the fatbin has: [`Kernel::ALL`]'s length.
pub const KERNEL_COUNT: usize = 14;

impl Kernel {
    /// Every kernel in the fatbin (dispatch has its own preference order, in `select()`).
    pub const ALL: [Kernel; KERNEL_COUNT] = [
        Kernel::Sm90Pingpong,
        Kernel::Sm90Pingpong64,
        Kernel::Sm90Pingpong64x64,
        Kernel::Sm90PingpongCluster2,
        Kernel::Sm90Cooperative,
        Kernel::Sm90CooperativeCluster2,
        Kernel::Sm80WideTrunc,
        Kernel::Sm80LargeTrunc,
        Kernel::Sm80Wide,
        Kernel::Sm80WideScalar,
        Kernel::Sm80Large,
        Kernel::Sm80Small,
        Kernel::Sm80LargeScalar,
        Kernel::Sm80SmallScalar,
    ];

    pub(crate) const fn spec(self) -> Spec {
        use sys::*;
        match self {
            Kernel::Sm80Large => sm80("ge_sm80_tf32_128x128x32_s3_vec4", GE_SM80_LARGE_TILE_M, GE_SM80_LARGE_TILE_N, GE_SM80_LARGE_TILE_K, GE_SM80_LARGE_STAGES, GE_SM80_LARGE_THREADS, true, Tf32Rounding::Nearest),
            Kernel::Sm80LargeTrunc => sm80("ge_sm80_tf32_128x128x32_s3_vec4_trunc", GE_SM80_LARGE_TILE_M, GE_SM80_LARGE_TILE_N, GE_SM80_LARGE_TILE_K, GE_SM80_LARGE_STAGES, GE_SM80_LARGE_THREADS, true, Tf32Rounding::Truncate),
            Kernel::Sm80LargeScalar => sm80("ge_sm80_tf32_128x128x32_s3_scalar", GE_SM80_LARGE_TILE_M, GE_SM80_LARGE_TILE_N, GE_SM80_LARGE_TILE_K, GE_SM80_LARGE_STAGES, GE_SM80_LARGE_THREADS, false, Tf32Rounding::Nearest),
            Kernel::Sm80Wide => sm80("ge_sm80_tf32_128x256x32_s3_vec4", GE_SM80_WIDE_TILE_M, GE_SM80_WIDE_TILE_N, GE_SM80_WIDE_TILE_K, GE_SM80_WIDE_STAGES, GE_SM80_WIDE_THREADS, true, Tf32Rounding::Nearest),
            Kernel::Sm80WideTrunc => sm80("ge_sm80_tf32_128x256x32_s3_vec4_trunc", GE_SM80_WIDE_TILE_M, GE_SM80_WIDE_TILE_N, GE_SM80_WIDE_TILE_K, GE_SM80_WIDE_STAGES, GE_SM80_WIDE_THREADS, true, Tf32Rounding::Truncate),
            Kernel::Sm80WideScalar => sm80("ge_sm80_tf32_128x256x32_s3_scalar", GE_SM80_WIDE_TILE_M, GE_SM80_WIDE_TILE_N, GE_SM80_WIDE_TILE_K, GE_SM80_WIDE_STAGES, GE_SM80_WIDE_THREADS, false, Tf32Rounding::Nearest),
            Kernel::Sm80Small => sm80("ge_sm80_tf32_64x64x32_s4_vec4", GE_SM80_SMALL_TILE_M, GE_SM80_SMALL_TILE_N, GE_SM80_SMALL_TILE_K, GE_SM80_SMALL_STAGES, GE_SM80_SMALL_THREADS, true, Tf32Rounding::Nearest),
            Kernel::Sm80SmallScalar => sm80("ge_sm80_tf32_64x64x32_s4_scalar", GE_SM80_SMALL_TILE_M, GE_SM80_SMALL_TILE_N, GE_SM80_SMALL_TILE_K, GE_SM80_SMALL_STAGES, GE_SM80_SMALL_THREADS, false, Tf32Rounding::Nearest),
            Kernel::Sm90Pingpong => sm90_pingpong("ge_sm90_tf32_128x128x32_s6_pingpong", 1, GE_SM90_PINGPONG_TILE_N),
            Kernel::Sm90Pingpong64 => sm90_pingpong_tile(
                "ge_sm90_tf32_64x128x32_s8_pingpong",
                (GE_SM90_PINGPONG64_TILE_M, GE_SM90_PINGPONG64_TILE_N, GE_SM90_PINGPONG64_TILE_K),
                GE_SM90_PINGPONG64_STAGES,
                GE_SM90_PINGPONG64_THREADS,
                GE_SM90_PINGPONG64_SMEM_BYTES,
            ),
            Kernel::Sm90Pingpong64x64 => sm90_pingpong_tile(
                "ge_sm90_tf32_64x64x32_s12_pingpong",
                (GE_SM90_PINGPONG64X64_TILE_M, GE_SM90_PINGPONG64X64_TILE_N, GE_SM90_PINGPONG64X64_TILE_K),
                GE_SM90_PINGPONG64X64_STAGES,
                GE_SM90_PINGPONG64X64_THREADS,
                GE_SM90_PINGPONG64X64_SMEM_BYTES,
            ),
            Kernel::Sm90PingpongCluster2 => sm90_pingpong(
                "ge_sm90_tf32_128x128x32_s6_pingpong_c2",
                GE_SM90_PINGPONG_CLUSTER_M,
                GE_SM90_PINGPONG_C2_W_BOX_ROWS,
            ),
            Kernel::Sm90Cooperative => sm90_cooperative("ge_sm90_tf32_128x256x32_s4_cooperative", 1, GE_SM90_COOP_TILE_N),
            Kernel::Sm90CooperativeCluster2 => sm90_cooperative(
                "ge_sm90_tf32_128x256x32_s4_cooperative_c2",
                GE_SM90_COOP_CLUSTER_M,
                GE_SM90_COOP_C2_W_BOX_ROWS,
            ),
        }
    }

    /// Position in [`Kernel::ALL`] (and in [`DeviceInfo::ctas_per_sm`]).
    pub const fn index(self) -> usize {
        let mut i = 0;
        while i < KERNEL_COUNT {
            if Kernel::ALL[i] as u8 == self as u8 {
                return i;
            }
            i += 1;
        }
        unreachable!()
    }

    /// The `extern "C"` symbol in the fatbin.
    pub const fn name(self) -> &'static str {
        self.spec().name
    }

    /// The family the kernel belongs to.
    pub const fn family(self) -> Family {
        self.spec().family
    }

    /// CTA (or, for ping-pong, consumer-warpgroup) tile: (M, N, K).
    pub const fn tile(self) -> (u32, u32, u32) {
        let s = self.spec();
        (s.tile_m, s.tile_n, s.tile_k)
    }

    /// What the kernel does to fp32 operands (operands repacked into a workspace are rounded to
    /// nearest before any kernel reads them: see [`crate::Plan::rounding`]).
    pub const fn rounding(self) -> Tf32Rounding {
        self.spec().rounding
    }

    /// CTAs per thread-block cluster along M: 1 for a plain launch, 2 for
    /// [`Kernel::Sm90PingpongCluster2`] (whose CTA pairs cover `2·TILE_M × TILE_N` together).
    pub const fn cluster_m(self) -> u32 {
        self.spec().cluster_m
    }

    /// Why this kernel cannot run on `device` at all, if it cannot.
    pub(crate) fn unsupported_on(self, device: &DeviceInfo) -> Option<&'static str> {
        if let Some(why) = self.unsupported_by_hardware(device) {
            return Some(why);
        }
        if self.spec().cluster_m > 1 && device.max_active_clusters == 0 {
            return Some(
                "no 2-CTA cluster of this kernel fits on the device (cuOccupancyMaxActiveClusters failed or returned 0)",
            );
        }
        None
    }

    /// The part of [`Kernel::unsupported_on`] known before the module is loaded.
    fn unsupported_by_hardware(self, device: &DeviceInfo) -> Option<&'static str> {
        let spec = self.spec();
        if spec.family == Family::TmaWgmma && !device.is_hopper() {
            return Some("the TMA + wgmma kernels are built for sm_90a and need an sm_90 device");
        }
        if spec.smem_bytes > device.max_smem_per_block {
            return Some("the device has too little shared memory per block for this tile");
        }
        None
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Grid for the row-wise memory-bound kernels (repack, elementwise epilogue): x covers one row's
/// `units` (16-byte groups) with 256-thread blocks, y keeps about 16 blocks per SM in flight.
pub(crate) fn rowwise_grid(rows: usize, units: usize, sm_count: u32) -> (u32, u32, u32) {
    let x = units.div_ceil(256).clamp(1, i32::MAX as usize);
    let y = (sm_count as usize * 16 / x).clamp(1, rows.clamp(1, 65_535));
    (x as u32, y as u32, 1)
}

/// The fatbin loaded into one context, with every kernel the device can run looked up and its
/// shared-memory limit raised once. `device.max_active_clusters` is filled here (it needs the
/// loaded cluster kernel); a cluster kernel for which it is 0 is left out.
pub(crate) struct LoadedKernels {
    pub ctx: Arc<CudaContext>,
    pub device: DeviceInfo,
    _module: Arc<CudaModule>,
    functions: HashMap<Kernel, CudaFunction>,
    pub elementwise: CudaFunction,
    pub repack: CudaFunction,
}

impl LoadedKernels {
    pub fn load(ctx: &Arc<CudaContext>, mut device: DeviceInfo) -> Result<Self> {
        let module = ctx.load_module(Ptx::from_binary(FATBIN.to_vec()))?;
        let mut functions = HashMap::new();
        device.max_active_clusters = 0;
        let mut first_cluster_kernel = true;
        for kernel in Kernel::ALL {
            if kernel.unsupported_by_hardware(&device).is_some() {
                continue;
            }
            let spec = kernel.spec();
            let function = module.load_function(spec.name)?;
            // Before the occupancy query: it counts with this much shared memory per CTA.
            function.set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, spec.smem_bytes as i32)?;
            if spec.cluster_m > 1 {
                // The cluster kernels share one block size, smem size and cluster shape (asserted
                // in csrc/sm90/entries.cuh), so one answer serves them all; each is asked, and
                // the smallest answer kept. A failed query leaves a kernel out (unsupported_on then
                // says why) rather than failing the load of every other kernel.
                let probe = LaunchConfig {
                    grid_dim: (spec.cluster_m * (device.sm_count / spec.cluster_m).max(1), 1, 1),
                    block_dim: (spec.threads, 1, 1),
                    shared_mem_bytes: spec.smem_bytes,
                };
                let clusters = launch::max_active_clusters(ctx, &function, probe, (spec.cluster_m, 1, 1)).unwrap_or(0);
                device.max_active_clusters =
                    if first_cluster_kernel { clusters } else { device.max_active_clusters.min(clusters) };
                first_cluster_kernel = false;
                if kernel.unsupported_on(&device).is_some() {
                    continue;
                }
            }
            // Waves of the mma.sync kernels (stream-K). A failed query leaves the default, 1.
            if let Ok(n) = function.occupancy_max_active_blocks_per_multiprocessor(spec.threads, spec.smem_bytes as usize, None) {
                device.ctas_per_sm[kernel.index()] = n.max(1);
            }
            functions.insert(kernel, function);
        }
        let elementwise = module.load_function("ge_elementwise_bias_scale_residual")?;
        let repack = module.load_function("ge_repack_tf32")?;
        Ok(Self { ctx: ctx.clone(), device, _module: module, functions, elementwise, repack })
    }

    pub fn function(&self, kernel: Kernel) -> Option<&CudaFunction> {
        self.functions.get(&kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_is_in_the_fatbin() {
        // Entry names are stored as plain strings in the fatbin's ELF symbol tables.
        let contains = |name: &str| FATBIN.windows(name.len()).any(|w| w == name.as_bytes());
        for kernel in Kernel::ALL {
            assert!(contains(kernel.name()), "{} missing from the fatbin", kernel.name());
        }
        assert!(contains("ge_elementwise_bias_scale_residual"));
        assert!(contains("ge_repack_tf32"));
    }

    #[test]
    fn fatbin_has_sass_for_sm80_and_sm90a() {
        // nvcc records each cubin's target as "sm_80" / "sm_90a" in its ELF header strings.
        let contains = |s: &str| FATBIN.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(FATBIN.len() > 1024, "empty fatbin: was the crate built with DOCS_RS set?");
        assert!(contains("sm_90a") || contains("sm_90"), "no sm_90a code in the fatbin");
    }

    #[test]
    fn rowwise_grids_cover_rows_and_columns() {
        assert_eq!(rowwise_grid(16384, 1025, 132), (5, 422, 1));
        assert_eq!(rowwise_grid(1, 1, 132), (1, 1, 1));
        assert_eq!(rowwise_grid(1_000_000, 1, 132), (1, 2112, 1));
        assert_eq!(rowwise_grid(3, 1 << 20, 132), (4096, 1, 1));
    }

    #[test]
    fn specs_match_the_header() {
        let s = Kernel::Sm80Large.spec();
        assert_eq!(s.smem_bytes, 3 * (128 + 128) * 32 * 4);
        assert_eq!(Kernel::Sm80Small.tile(), (64, 64, 32));
        assert_eq!(Kernel::Sm90Pingpong.family(), Family::TmaWgmma);
        for k in Kernel::ALL {
            assert!(k.spec().threads % 32 == 0 && k.spec().smem_bytes <= 227 * 1024, "{k}");
            // A W box is whole 8-row swizzle atoms, and the cluster's slices tile the W tile.
            let s = k.spec();
            assert!(s.cluster_m >= 1 && s.w_box_rows * s.cluster_m == s.tile_n && s.w_box_rows % 8 == 0, "{k}");
        }
        // The cluster variant is the ping-pong kernel with CTA pairs: same tile, block, smem.
        let (one, two) = (Kernel::Sm90Pingpong.spec(), Kernel::Sm90PingpongCluster2.spec());
        assert_eq!((one.cluster_m, two.cluster_m), (1, 2));
        assert_eq!((two.w_box_rows, two.tile_n), (64, 128));
        assert_eq!((one.tile_m, one.tile_n, one.tile_k, one.stages), (two.tile_m, two.tile_n, two.tile_k, two.stages));
        assert_eq!((one.threads, one.smem_bytes, one.family), (two.threads, two.smem_bytes, two.family));
        assert_eq!(Kernel::Sm90PingpongCluster2.cluster_m(), 2);
        // Every cluster kernel has the same block, smem and cluster shape: one occupancy answer.
        for k in Kernel::ALL.iter().filter(|k| k.cluster_m() > 1) {
            assert_eq!((k.spec().threads, k.spec().smem_bytes, k.cluster_m()), (two.threads, two.smem_bytes, 2), "{k}");
        }
        let coop2 = Kernel::Sm90CooperativeCluster2.spec();
        assert_eq!((coop2.tile_m, coop2.tile_n, coop2.w_box_rows, coop2.out_box_rows), (128, 256, 128, 64));
        // Cooperative: both consumers share a 128×256 tile, so each stores 64-row boxes and
        // publishes its own half of a stream-K partial.
        let coop = Kernel::Sm90Cooperative.spec();
        assert_eq!((coop.tile_m, coop.tile_n, coop.stages, coop.out_box_rows, coop.w_box_rows), (128, 256, 4, 64, 256));
        assert_eq!(one.out_box_rows, 128);
        // The 64-row ping-pong: the same kernel, block and shared memory with half-height tiles.
        for (k, tile_n, stages) in [(Kernel::Sm90Pingpong64, 128, 8), (Kernel::Sm90Pingpong64x64, 64, 12)] {
            let s = k.spec();
            assert_eq!((s.tile_m, s.tile_n, s.stages, s.out_box_rows, s.w_box_rows), (64, tile_n, stages, 64, tile_n), "{k}");
            assert_eq!((s.threads, s.smem_bytes, s.cluster_m, s.tile_parts), (one.threads, one.smem_bytes, 1, 1), "{k}");
        }
        for k in Kernel::ALL {
            let s = k.spec();
            assert_eq!(s.tile_parts, s.tile_m / s.out_box_rows, "{k}: one part per consumer sharing the tile");
        }
        // One store box per consumer fits its half of the epilogue buffers.
        for k in Kernel::ALL.iter().filter(|k| k.family() == Family::TmaWgmma) {
            let box_bytes = k.spec().out_box_rows * sys::GE_SM90_STORE_BOX_COLS * 4;
            assert!(box_bytes <= sys::GE_SM90_EPILOGUE_SMEM_BYTES / 2, "{k}");
        }
    }

    #[test]
    fn the_cluster_kernel_needs_room_for_a_cluster() {
        let h200 = DeviceInfo { compute_capability: (9, 0), sm_count: 132, max_smem_per_block: 232_448, max_active_clusters: 66, ctas_per_sm: [1; KERNEL_COUNT] };
        assert_eq!(Kernel::Sm90PingpongCluster2.unsupported_on(&h200), None);
        let no_room = DeviceInfo { max_active_clusters: 0, ..h200 };
        let why = Kernel::Sm90PingpongCluster2.unsupported_on(&no_room).expect("refused");
        assert!(why.contains("cluster"), "{why}");
        // The plain kernels do not care.
        assert_eq!(Kernel::Sm90Pingpong.unsupported_on(&no_room), None);
        let a100 = DeviceInfo { compute_capability: (8, 0), sm_count: 108, max_smem_per_block: 166_912, max_active_clusters: 0, ctas_per_sm: [1; KERNEL_COUNT] };
        assert!(Kernel::Sm90PingpongCluster2.unsupported_on(&a100).expect("refused").contains("sm_90"));
    }
}
