//! The kernels in the fatbin: one table row each, every number read from the header's constants
//! (through [`crate::sys`]). Pure facts — which device can run a kernel and which one a call gets
//! are decided elsewhere (`kernels::loaded`, `gemm::dispatch`).

use std::fmt;

use crate::sys::*;

/// The kernel families.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// `cp.async` multistage pipeline + `mma.sync.m16n8k8` TF32 (sm_80 and newer; any shape).
    /// `csrc/sm80/`.
    MmaSync,
    /// TMA loads + warp-specialised persistent `wgmma` TF32 (sm_90 only; operands with 16-byte
    /// rows). `csrc/sm90/`.
    TmaWgmma,
    /// Decoding-size X (M ≤ the tile's 8 or 16 rows): W streamed once through per-lane
    /// `cp.async` rings into `mma.sync.m16n8k8` (W as the A operand), K split over a
    /// thread-block cluster whose CTAs add their sums through distributed shared memory (sm_90
    /// only; operands with 16-byte rows). Memory-bound by design. `csrc/skinny/`.
    Skinny,
    /// Decoding-size X (M ≤ the tile's 1 or 4 rows) on the CUDA cores: W streamed once, 512
    /// contiguous bytes of a row per warp load, one fp32 FMA per product on operands converted
    /// as the precision asks; K over the CTA's warps, no split across CTAs (sm_80 and newer;
    /// operands with 16-byte rows). `csrc/gemv/`.
    Gemv,
}

/// What a call computes its products with (docs/EPILOGUE.md): how the fp32 operands become TF32
/// for the tensor cores, and how many TF32 products make one fp32 product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Precision {
    /// One TF32 product per multiply-add, operands rounded to nearest, as cuBLAS's TF32 GEMM
    /// does: a relative error of at most 2⁻¹¹ per operand, unbiased. The default. Ties (the 13
    /// dropped bits exactly half an ulp) go to even where the TMA rounds on load (sm_90,
    /// [`crate::Plan::round_on_load`], as cuBLAS's sm_90 kernels do), away from zero where the
    /// crate rounds itself (`cvt.rna.tf32.f32`: the mma.sync kernels, the repack, a
    /// [`crate::PreparedWeight`]); docs/EPILOGUE.md.
    Tf32,
    /// One TF32 product, the fp32 bits given to the tensor cores as they are: they ignore the low
    /// 13 mantissa bits (what CUTLASS's TF32 kernels on fp32 data do), up to 2⁻¹⁰ per operand,
    /// always toward zero, so products are biased toward zero. An explicit opt-in
    /// ([`crate::FusedGemm::with_precision`]) for kernels where rounding costs time.
    Tf32Truncated,
    /// Three TF32 products per multiply-add ("3xTF32"): each operand split into a rounded TF32
    /// part and a rounded TF32 remainder, `a = a_big + a_small`, and `a_small·b_big +
    /// a_big·b_small + a_big·b_big` accumulated in fp32 (`a_small·b_small` is below fp32's
    /// resolution). The error of an fp32 GEMM at about three times the TF32 time.
    Tf32x3,
}

/// How a kernel's CTA divides its work (the `csrc/` folder and template that implement it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Schedule {
    /// mma.sync: one CTA per output tile, a `cp.async` multistage pipeline (`csrc/sm80/`).
    Mma,
    /// wgmma, persistent: two consumer warpgroups on alternate tiles, each a whole tile.
    Pingpong,
    /// wgmma, persistent: both consumer warpgroups on every tile, half its rows each.
    Cooperative,
    /// mma.sync on 16 rows of W per CTA against all of X, K split over a cluster.
    Skinny,
    /// CUDA-core FMA on a few rows of W per CTA against all of X, K over the CTA's warps.
    Gemv,
}

/// How the operands travel from global to shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Access {
    /// 16-byte copies or TMA: needs K % 4 == 0, 16-byte-aligned `x` and `w`, and leading
    /// dimensions that are multiples of 4 (or the operands repacked into a workspace).
    AlignedRows,
    /// 4-byte copies: any shape and alignment.
    Scalar,
}

/// A kernel's launch contract (csrc/include/gemm_epilogue.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spec {
    /// The `extern "C"` symbol.
    pub name: &'static str,
    pub family: Family,
    pub schedule: Schedule,
    /// CTA tile (ping-pong: one consumer warpgroup's tile).
    pub tile_m: u32,
    pub tile_n: u32,
    pub tile_k: u32,
    pub stages: u32,
    pub threads: u32,
    /// Dynamic shared memory per CTA, bytes.
    pub smem_bytes: u32,
    pub access: Access,
    /// What the kernel does to fp32 operands.
    pub precision: Precision,
    /// CTAs per thread-block cluster, along M (1: a plain launch).
    pub cluster_m: u32,
}

impl Spec {
    /// Consumer warpgroups sharing one CTA tile, each with its own part of a stream-K partial
    /// and its own ready word: 2 for the cooperative schedule, else 1.
    pub const fn tile_parts(&self) -> u32 {
        match self.schedule {
            Schedule::Cooperative => 2,
            _ => 1,
        }
    }
    /// Rows of W per TMA box: each CTA of a cluster loads one slice of the W tile and multicasts
    /// it to all of them.
    pub const fn w_box_rows(&self) -> u32 {
        self.tile_n / self.cluster_m
    }
}

/// A mma.sync configuration: `[TILE_M, TILE_N, TILE_K, STAGES, THREADS, SMEM_BYTES]` of a
/// `GE_SM80_MMA_*` block of the header.
const fn mma(name: &'static str, c: [u32; 6], access: Access, precision: Precision) -> Spec {
    let [tile_m, tile_n, tile_k, stages, threads, smem_bytes] = c;
    Spec {
        name,
        family: Family::MmaSync,
        schedule: Schedule::Mma,
        tile_m,
        tile_n,
        tile_k,
        stages,
        threads,
        smem_bytes,
        access,
        precision,
        cluster_m: 1,
    }
}

/// A TMA + wgmma configuration: its schedule and the six numbers of a `GE_SM90_*` block.
struct Sm90Config {
    schedule: Schedule,
    numbers: [u32; 6],
}

/// A TMA + wgmma kernel of configuration `c`, launched in clusters of `cluster_m` CTAs.
/// `Tf32Truncated`: X and W fed to wgmma from shared memory as the TMA wrote them (the `SmemA`
/// builds); `Tf32`: X rounded in registers and fed from there, W read as it is, so it must
/// arrive rounded (the `RmemA` builds); `Tf32x3`: X split in registers, W read already split.
const fn wgmma(name: &'static str, c: Sm90Config, cluster_m: u32, precision: Precision) -> Spec {
    let [tile_m, tile_n, tile_k, stages, threads, smem_bytes] = c.numbers;
    Spec {
        name,
        family: Family::TmaWgmma,
        schedule: c.schedule,
        tile_m,
        tile_n,
        tile_k,
        stages,
        threads,
        smem_bytes,
        access: Access::AlignedRows,
        precision,
        cluster_m,
    }
}

/// A skinny configuration (the six numbers of a `GE_SKINNY_*` block), launched in clusters of as
/// many CTAs as the plan splits K into ([`crate::Plan::cluster`]).
const fn skinny(name: &'static str, c: [u32; 6], precision: Precision) -> Spec {
    let [tile_m, tile_n, tile_k, stages, threads, smem_bytes] = c;
    Spec {
        name,
        family: Family::Skinny,
        schedule: Schedule::Skinny,
        tile_m,
        tile_n,
        tile_k,
        stages,
        threads,
        smem_bytes,
        access: Access::AlignedRows,
        precision,
        cluster_m: 1,
    }
}

/// A GEMV configuration (a `GE_GEMV_*` block: `[TILE_M, TILE_N, TILE_K, UNROLL, THREADS]`), one
/// CTA per `tile_n` rows of W; `stages` holds the chunks of K in flight per lane, and the only
/// shared memory is the static reduction's.
const fn gemv(name: &'static str, c: [u32; 5], precision: Precision) -> Spec {
    let [tile_m, tile_n, tile_k, stages, threads] = c;
    Spec {
        name,
        family: Family::Gemv,
        schedule: Schedule::Gemv,
        tile_m,
        tile_n,
        tile_k,
        stages,
        threads,
        smem_bytes: 0,
        access: Access::AlignedRows,
        precision,
        cluster_m: 1,
    }
}

/// The table: `Variant => spec;`, with the variant's doc comment. Generates [`Kernel`],
/// [`Kernel::ALL`], [`KERNEL_COUNT`] and `Kernel::spec`.
macro_rules! kernel_table {
    ($( $(#[$doc:meta])* $variant:ident => $spec:expr; )*) => {
        /// Every kernel in the fatbin. Pick one with [`crate::Dispatch::Force`], or let
        /// [`crate::Dispatch::Auto`] choose. Names say family, schedule, tile, the operand
        /// access and what sets the precision, as the `extern "C"` symbols do
        /// (`Sm90Pingpong64x128SmemA` is `ge_sm90_pingpong_64x128x32_s8_smem_a`). The sm_90
        /// builds of [`Precision::Tf32`] come in pairs that differ in where wgmma's A operand (X)
        /// comes from: `SmemA` feeds both operands from shared memory as the TMA wrote them
        /// (truncated or rounded on load, as the tensor maps say: [`Kernel::can_round_on_load`]),
        /// `RmemA` rounds X in registers ([`Kernel::needs_rounded_w`]). Elsewhere `Trunc` names
        /// the build that passes fp32 bits to the tensor cores, and `Tf32x3` the three-product
        /// builds.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Kernel {
            $( $(#[$doc])* $variant, )*
        }

        /// How many kernels the fatbin holds.
        pub(crate) const KERNEL_COUNT: usize = [$(stringify!($variant)),*].len();

        impl Kernel {
            /// Every kernel, in table order.
            pub const ALL: [Kernel; KERNEL_COUNT] = [$(Kernel::$variant),*];

            pub(crate) const fn spec(self) -> Spec {
                // The rows name precisions and accesses unqualified.
                use Access::*;
                use Precision::*;
                match self {
                    $( Kernel::$variant => $spec, )*
                }
            }
        }
    };
}

// Each header block's numbers, in the order the constructors above take them.
const SM80_MMA_128X128: [u32; 6] = [
    GE_SM80_MMA_128X128_TILE_M,
    GE_SM80_MMA_128X128_TILE_N,
    GE_SM80_MMA_128X128_TILE_K,
    GE_SM80_MMA_128X128_STAGES,
    GE_SM80_MMA_128X128_THREADS,
    GE_SM80_MMA_128X128_SMEM_BYTES,
];
const SM80_MMA_128X256: [u32; 6] = [
    GE_SM80_MMA_128X256_TILE_M,
    GE_SM80_MMA_128X256_TILE_N,
    GE_SM80_MMA_128X256_TILE_K,
    GE_SM80_MMA_128X256_STAGES,
    GE_SM80_MMA_128X256_THREADS,
    GE_SM80_MMA_128X256_SMEM_BYTES,
];
const SM80_MMA_64X64: [u32; 6] = [
    GE_SM80_MMA_64X64_TILE_M,
    GE_SM80_MMA_64X64_TILE_N,
    GE_SM80_MMA_64X64_TILE_K,
    GE_SM80_MMA_64X64_STAGES,
    GE_SM80_MMA_64X64_THREADS,
    GE_SM80_MMA_64X64_SMEM_BYTES,
];
const SM90_PINGPONG_128X128: Sm90Config = Sm90Config {
    schedule: Schedule::Pingpong,
    numbers: [
        GE_SM90_PINGPONG_128X128_TILE_M,
        GE_SM90_PINGPONG_128X128_TILE_N,
        GE_SM90_PINGPONG_128X128_TILE_K,
        GE_SM90_PINGPONG_128X128_STAGES,
        GE_SM90_PINGPONG_128X128_THREADS,
        GE_SM90_PINGPONG_128X128_SMEM_BYTES,
    ],
};
const SM90_PINGPONG_64X128: Sm90Config = Sm90Config {
    schedule: Schedule::Pingpong,
    numbers: [
        GE_SM90_PINGPONG_64X128_TILE_M,
        GE_SM90_PINGPONG_64X128_TILE_N,
        GE_SM90_PINGPONG_64X128_TILE_K,
        GE_SM90_PINGPONG_64X128_STAGES,
        GE_SM90_PINGPONG_64X128_THREADS,
        GE_SM90_PINGPONG_64X128_SMEM_BYTES,
    ],
};
const SM90_PINGPONG_64X64: Sm90Config = Sm90Config {
    schedule: Schedule::Pingpong,
    numbers: [
        GE_SM90_PINGPONG_64X64_TILE_M,
        GE_SM90_PINGPONG_64X64_TILE_N,
        GE_SM90_PINGPONG_64X64_TILE_K,
        GE_SM90_PINGPONG_64X64_STAGES,
        GE_SM90_PINGPONG_64X64_THREADS,
        GE_SM90_PINGPONG_64X64_SMEM_BYTES,
    ],
};
const SM90_COOPERATIVE_128X256: Sm90Config = Sm90Config {
    schedule: Schedule::Cooperative,
    numbers: [
        GE_SM90_COOPERATIVE_128X256_TILE_M,
        GE_SM90_COOPERATIVE_128X256_TILE_N,
        GE_SM90_COOPERATIVE_128X256_TILE_K,
        GE_SM90_COOPERATIVE_128X256_STAGES,
        GE_SM90_COOPERATIVE_128X256_THREADS,
        GE_SM90_COOPERATIVE_128X256_SMEM_BYTES,
    ],
};
const SM90_COOPERATIVE_128X128_X3: Sm90Config = Sm90Config {
    schedule: Schedule::Cooperative,
    numbers: [
        GE_SM90_COOPERATIVE_128X128_X3_TILE_M,
        GE_SM90_COOPERATIVE_128X128_X3_TILE_N,
        GE_SM90_COOPERATIVE_128X128_X3_TILE_K,
        GE_SM90_COOPERATIVE_128X128_X3_STAGES,
        GE_SM90_COOPERATIVE_128X128_X3_THREADS,
        GE_SM90_COOPERATIVE_128X128_X3_SMEM_BYTES,
    ],
};
const SM90_PINGPONG_64X128_X3: Sm90Config = Sm90Config {
    schedule: Schedule::Pingpong,
    numbers: [
        GE_SM90_PINGPONG_64X128_X3_TILE_M,
        GE_SM90_PINGPONG_64X128_X3_TILE_N,
        GE_SM90_PINGPONG_64X128_X3_TILE_K,
        GE_SM90_PINGPONG_64X128_X3_STAGES,
        GE_SM90_PINGPONG_64X128_X3_THREADS,
        GE_SM90_PINGPONG_64X128_X3_SMEM_BYTES,
    ],
};
const SKINNY_8X16: [u32; 6] = [
    GE_SKINNY_8X16_TILE_M,
    GE_SKINNY_8X16_TILE_N,
    GE_SKINNY_8X16_TILE_K,
    GE_SKINNY_8X16_STAGES,
    GE_SKINNY_8X16_THREADS,
    GE_SKINNY_8X16_SMEM_BYTES,
];
const SKINNY_16X16: [u32; 6] = [
    GE_SKINNY_16X16_TILE_M,
    GE_SKINNY_16X16_TILE_N,
    GE_SKINNY_16X16_TILE_K,
    GE_SKINNY_16X16_STAGES,
    GE_SKINNY_16X16_THREADS,
    GE_SKINNY_16X16_SMEM_BYTES,
];
const GEMV_1X2: [u32; 5] =
    [GE_GEMV_1X2_TILE_M, GE_GEMV_1X2_TILE_N, GE_GEMV_1X2_TILE_K, GE_GEMV_1X2_UNROLL, GE_GEMV_1X2_THREADS];
const GEMV_1X4: [u32; 5] =
    [GE_GEMV_1X4_TILE_M, GE_GEMV_1X4_TILE_N, GE_GEMV_1X4_TILE_K, GE_GEMV_1X4_UNROLL, GE_GEMV_1X4_THREADS];
const GEMV_4X4: [u32; 5] =
    [GE_GEMV_4X4_TILE_M, GE_GEMV_4X4_TILE_N, GE_GEMV_4X4_TILE_K, GE_GEMV_4X4_UNROLL, GE_GEMV_4X4_THREADS];
/// CTAs per cluster of the `Cluster2` kernels.
const CLUSTER_M: u32 = GE_SM90_CLUSTER_M;

kernel_table! {
    /// mma.sync, 128×128×32 CTA tile, 4 warps, 3 stages, 16-byte loads; rounds to nearest.
    Sm80Mma128x128Vec4 =>
        mma("ge_sm80_mma_128x128x32_s3_vec4", SM80_MMA_128X128, AlignedRows, Tf32);
    /// [`Kernel::Sm80Mma128x128Vec4`] passing fp32 bits to the tensor cores ([`Precision::Tf32Truncated`]).
    Sm80Mma128x128Vec4Trunc =>
        mma("ge_sm80_mma_128x128x32_s3_vec4_trunc", SM80_MMA_128X128, AlignedRows, Tf32Truncated);
    /// [`Kernel::Sm80Mma128x128Vec4`] with 4-byte loads: any shape and alignment.
    Sm80Mma128x128Scalar =>
        mma("ge_sm80_mma_128x128x32_s3_scalar", SM80_MMA_128X128, Scalar, Tf32);
    /// mma.sync, 128×256×32 CTA tile, 8 warps, 3 stages (144 KiB: sm_80 and sm_90), 16-byte
    /// loads, the epilogue staged through shared memory; rounds to nearest.
    Sm80Mma128x256Vec4 =>
        mma("ge_sm80_mma_128x256x32_s3_vec4", SM80_MMA_128X256, AlignedRows, Tf32);
    /// [`Kernel::Sm80Mma128x256Vec4`] passing fp32 bits to the tensor cores ([`Precision::Tf32Truncated`]).
    Sm80Mma128x256Vec4Trunc =>
        mma("ge_sm80_mma_128x256x32_s3_vec4_trunc", SM80_MMA_128X256, AlignedRows, Tf32Truncated);
    /// [`Kernel::Sm80Mma128x256Vec4`] with 4-byte loads: any shape and alignment.
    Sm80Mma128x256Scalar =>
        mma("ge_sm80_mma_128x256x32_s3_scalar", SM80_MMA_128X256, Scalar, Tf32);
    /// mma.sync, 64×64×32 CTA tile, 4 warps, 4 stages, 16-byte loads: small problems.
    Sm80Mma64x64Vec4 =>
        mma("ge_sm80_mma_64x64x32_s4_vec4", SM80_MMA_64X64, AlignedRows, Tf32);
    /// [`Kernel::Sm80Mma64x64Vec4`] with 4-byte loads: small problems of any shape.
    Sm80Mma64x64Scalar =>
        mma("ge_sm80_mma_64x64x32_s4_scalar", SM80_MMA_64X64, Scalar, Tf32);
    /// [`Kernel::Sm80Mma64x64Vec4`] in [`Precision::Tf32x3`]: both operands split into big and
    /// small TF32 parts in registers, three `mma.sync` per product. Any W (it splits W itself).
    Sm80Mma64x64Vec4Tf32x3 =>
        mma("ge_sm80_mma_64x64x32_s4_vec4_x3", SM80_MMA_64X64, AlignedRows, Tf32x3);
    /// [`Kernel::Sm80Mma64x64Vec4Tf32x3`] with 4-byte loads: any shape and alignment.
    Sm80Mma64x64ScalarTf32x3 =>
        mma("ge_sm80_mma_64x64x32_s4_scalar_x3", SM80_MMA_64X64, Scalar, Tf32x3);
    /// TMA + wgmma ping-pong, 128×128×32 tile per consumer warpgroup, 6 stages, persistent
    /// (sm_90); X rounded to nearest in registers and fed to wgmma from there, W read rounded
    /// ([`Kernel::needs_rounded_w`]). Only [`crate::Dispatch::Force`] selects the `RmemA` builds:
    /// their rounding stalls their own wgmma issue, and Auto gets the same rounding from the
    /// TMA with the `SmemA` builds.
    Sm90Pingpong128x128RmemA =>
        wgmma("ge_sm90_pingpong_128x128x32_s6_rmem_a", SM90_PINGPONG_128X128, 1, Tf32);
    /// [`Kernel::Sm90Pingpong128x128RmemA`] feeding X and W to wgmma from shared memory as the
    /// TMA wrote them: truncated through fp32 tensor maps ([`Precision::Tf32Truncated`]), rounded
    /// on load through TF32 maps ([`Kernel::can_round_on_load`]). Auto's TMA kernel between one
    /// wave of [`Kernel::Sm90Pingpong64x128SmemA`]'s tiles and 3 waves of
    /// [`Kernel::Sm90Cooperative128x256Cluster2SmemA`]'s cluster tiles.
    Sm90Pingpong128x128SmemA =>
        wgmma("ge_sm90_pingpong_128x128x32_s6_smem_a", SM90_PINGPONG_128X128, 1, Tf32Truncated);
    /// The ping-pong kernel with 64×128×32 tiles and 8 stages (the same shared memory), X from
    /// registers: twice the tiles, so a small-M problem needs half as many split-K parts per tile.
    Sm90Pingpong64x128RmemA =>
        wgmma("ge_sm90_pingpong_64x128x32_s8_rmem_a", SM90_PINGPONG_64X128, 1, Tf32);
    /// [`Kernel::Sm90Pingpong64x128RmemA`] with X from shared memory: Auto's TMA kernel when its
    /// tiles fit in one wave and [`Kernel::Sm90Pingpong64x64SmemA`]'s do not, or where the
    /// 128×128 tiles' last wave is ragged.
    Sm90Pingpong64x128SmemA =>
        wgmma("ge_sm90_pingpong_64x128x32_s8_smem_a", SM90_PINGPONG_64X128, 1, Tf32Truncated);
    /// The ping-pong kernel with 64×64×32 tiles and 12 stages (the same shared memory), X from
    /// registers: cuBLAS's tile for M ≤ 128.
    Sm90Pingpong64x64RmemA =>
        wgmma("ge_sm90_pingpong_64x64x32_s12_rmem_a", SM90_PINGPONG_64X64, 1, Tf32);
    /// [`Kernel::Sm90Pingpong64x64RmemA`] with X from shared memory: Auto's TMA kernel when its
    /// tiles fit in one wave.
    Sm90Pingpong64x64SmemA =>
        wgmma("ge_sm90_pingpong_64x64x32_s12_smem_a", SM90_PINGPONG_64X64, 1, Tf32Truncated);
    /// [`Kernel::Sm90Pingpong128x128RmemA`] with its CTAs paired into clusters of 2 along M: the
    /// two compute vertically adjacent tiles and each TMA-multicasts half of their shared W tile
    /// to both.
    Sm90Pingpong128x128Cluster2RmemA =>
        wgmma("ge_sm90_pingpong_128x128x32_s6_cluster2_rmem_a", SM90_PINGPONG_128X128, CLUSTER_M, Tf32);
    /// [`Kernel::Sm90Pingpong128x128Cluster2RmemA`] with X from shared memory: Auto's kernel
    /// from 3 waves of the cooperative 256×256 cluster tiles for the seed form where K is short
    /// or their last wave is ragged, and for every other form where K is long.
    Sm90Pingpong128x128Cluster2SmemA =>
        wgmma("ge_sm90_pingpong_128x128x32_s6_cluster2_smem_a", SM90_PINGPONG_128X128, CLUSTER_M, Tf32Truncated);
    /// TMA + wgmma cooperative, 128×256×32 tile shared by both consumer warpgroups (64 rows each,
    /// `m64n256k8`), 4 stages, persistent (sm_90), X from registers: fewer shared-memory and L2
    /// bytes per FLOP than the ping-pong, but no epilogue overlapped with the tensor cores.
    Sm90Cooperative128x256RmemA =>
        wgmma("ge_sm90_cooperative_128x256x32_s4_rmem_a", SM90_COOPERATIVE_128X256, 1, Tf32);
    /// [`Kernel::Sm90Cooperative128x256RmemA`] with X from shared memory. Only
    /// [`crate::Dispatch::Force`] selects it: Auto runs its cluster build.
    Sm90Cooperative128x256SmemA =>
        wgmma("ge_sm90_cooperative_128x256x32_s4_smem_a", SM90_COOPERATIVE_128X256, 1, Tf32Truncated);
    /// [`Kernel::Sm90Cooperative128x256RmemA`] in clusters of 2 along M, each CTA multicasting
    /// half of the shared 256-row W tile (cuBLAS's configuration for large TF32 GEMMs on sm_90).
    Sm90Cooperative128x256Cluster2RmemA =>
        wgmma("ge_sm90_cooperative_128x256x32_s4_cluster2_rmem_a", SM90_COOPERATIVE_128X256, CLUSTER_M, Tf32);
    /// [`Kernel::Sm90Cooperative128x256Cluster2RmemA`] with X from shared memory: Auto's kernel
    /// from 3 waves of its 256×256 cluster tiles (the reference shape's).
    Sm90Cooperative128x256Cluster2SmemA =>
        wgmma("ge_sm90_cooperative_128x256x32_s4_cluster2_smem_a", SM90_COOPERATIVE_128X256, CLUSTER_M, Tf32Truncated);
    /// TMA + wgmma cooperative in [`Precision::Tf32x3`], 128×128×32 tiles (64 rows per consumer
    /// warpgroup), 4 stages (each holds X and W's two parts): X split into big and small TF32
    /// parts in registers, three wgmmas per k-step, each k-block's sum added into the
    /// accumulator on the CUDA cores; W read already split ([`Kernel::needs_split_w`]). Auto's
    /// Tf32x3 kernel on sm_90 beyond one wave of [`Kernel::Sm90Pingpong64x128Tf32x3`]'s tiles.
    Sm90Cooperative128x128Tf32x3 =>
        wgmma("ge_sm90_cooperative_128x128x32_s4_x3", SM90_COOPERATIVE_128X128_X3, 1, Tf32x3);
    /// [`Kernel::Sm90Cooperative128x128Tf32x3`] in clusters of 2 along M, each CTA multicasting half
    /// of both W tiles.
    Sm90Cooperative128x128Cluster2Tf32x3 =>
        wgmma("ge_sm90_cooperative_128x128x32_s4_cluster2_x3", SM90_COOPERATIVE_128X128_X3, CLUSTER_M, Tf32x3);
    /// The ping-pong kernel of [`Precision::Tf32x3`], 64×128×32 tiles (each consumer a whole
    /// tile), 4 stages: small M.
    Sm90Pingpong64x128Tf32x3 =>
        wgmma("ge_sm90_pingpong_64x128x32_s4_x3", SM90_PINGPONG_64X128_X3, 1, Tf32x3);
    /// Skinny, X rows 0..8 against 16 rows of W per CTA, 8 warps each with a 4-step ring of
    /// 32-wide k-steps (sm_90, M ≤ 8): operands rounded to nearest in registers. Auto's kernel
    /// for M ≤ 8 while W is at most 3·2²² elements (docs/TILING.md, "Skinny").
    Sm90Skinny8x16 =>
        skinny("ge_sm90_skinny_8x16x32_s4", SKINNY_8X16, Tf32);
    /// [`Kernel::Sm90Skinny8x16`] passing fp32 bits to the tensor cores ([`Precision::Tf32Truncated`]).
    Sm90Skinny8x16Trunc =>
        skinny("ge_sm90_skinny_8x16x32_s4_trunc", SKINNY_8X16, Tf32Truncated);
    /// [`Kernel::Sm90Skinny8x16`] in [`Precision::Tf32x3`]: both operands split in registers,
    /// three `mma.sync` per product; a raw or rounded W (not a split prepared weight).
    Sm90Skinny8x16Tf32x3 =>
        skinny("ge_sm90_skinny_8x16x32_s4_x3", SKINNY_8X16, Tf32x3);
    /// Skinny, X rows 0..16, 4 warps (sm_90, M ≤ 16): Auto's kernel for 8 < M ≤ 16 while W is
    /// at most 2²² elements.
    Sm90Skinny16x16 =>
        skinny("ge_sm90_skinny_16x16x32_s4", SKINNY_16X16, Tf32);
    /// [`Kernel::Sm90Skinny16x16`] passing fp32 bits to the tensor cores ([`Precision::Tf32Truncated`]).
    Sm90Skinny16x16Trunc =>
        skinny("ge_sm90_skinny_16x16x32_s4_trunc", SKINNY_16X16, Tf32Truncated);
    /// [`Kernel::Sm90Skinny16x16`] in [`Precision::Tf32x3`].
    Sm90Skinny16x16Tf32x3 =>
        skinny("ge_sm90_skinny_16x16x32_s4_x3", SKINNY_16X16, Tf32x3);
    /// GEMV on the CUDA cores, X row 0 against 2 rows of W per CTA, 8 warps with 2 chunks of
    /// 128 k in flight per lane (M = 1): operands rounded to nearest in registers, then multiplied
    /// exactly in fp32. Auto's kernel on sm_90 for M = 1 with K of at least its 2048-wide tile,
    /// W below 2²² or from 2²⁴ elements (docs/TILING.md, "GEMV").
    Sm80Gemv1x2 =>
        gemv("ge_sm80_gemv_1x2x2048_s2", GEMV_1X2, Tf32);
    /// [`Kernel::Sm80Gemv1x2`] on operands truncated to TF32 ([`Precision::Tf32Truncated`]).
    Sm80Gemv1x2Trunc =>
        gemv("ge_sm80_gemv_1x2x2048_s2_trunc", GEMV_1X2, Tf32Truncated);
    /// [`Kernel::Sm80Gemv1x2`] in [`Precision::Tf32x3`]: the fp32 operands multiplied as they are
    /// (the fp32 product 3xTF32 emulates); a raw or rounded W (not a split prepared weight).
    Sm80Gemv1x2Tf32x3 =>
        gemv("ge_sm80_gemv_1x2x2048_s2_x3", GEMV_1X2, Tf32x3);
    /// GEMV, X row 0 against 4 rows of W per CTA, 4 warps with one chunk in flight per lane
    /// (M = 1): Auto's kernel on sm_90 for M = 1 with K shorter than [`Kernel::Sm80Gemv1x2`]'s
    /// tile, under the same limits of W.
    Sm80Gemv1x4 =>
        gemv("ge_sm80_gemv_1x4x512_s1", GEMV_1X4, Tf32);
    /// [`Kernel::Sm80Gemv1x4`] on operands truncated to TF32 ([`Precision::Tf32Truncated`]).
    Sm80Gemv1x4Trunc =>
        gemv("ge_sm80_gemv_1x4x512_s1_trunc", GEMV_1X4, Tf32Truncated);
    /// [`Kernel::Sm80Gemv1x4`] in [`Precision::Tf32x3`] (fp32 products).
    Sm80Gemv1x4Tf32x3 =>
        gemv("ge_sm80_gemv_1x4x512_s1_x3", GEMV_1X4, Tf32x3);
    /// GEMV, X rows 0..4 against 4 rows of W per CTA, 8 warps with one chunk in flight per lane
    /// (M ≤ 4): Auto's kernel on sm_90 for 2 ≤ M ≤ 4 from K = 1024, under the same limits of W.
    Sm80Gemv4x4 =>
        gemv("ge_sm80_gemv_4x4x1024_s1", GEMV_4X4, Tf32);
    /// [`Kernel::Sm80Gemv4x4`] on operands truncated to TF32 ([`Precision::Tf32Truncated`]).
    Sm80Gemv4x4Trunc =>
        gemv("ge_sm80_gemv_4x4x1024_s1_trunc", GEMV_4X4, Tf32Truncated);
    /// [`Kernel::Sm80Gemv4x4`] in [`Precision::Tf32x3`] (fp32 products).
    Sm80Gemv4x4Tf32x3 =>
        gemv("ge_sm80_gemv_4x4x1024_s1_x3", GEMV_4X4, Tf32x3);
}

impl Kernel {
    /// Position in [`Kernel::ALL`].
    pub(crate) const fn index(self) -> usize {
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

    /// CTA (for ping-pong: consumer-warpgroup) tile, (M, N, K).
    pub const fn tile(self) -> (u32, u32, u32) {
        let s = self.spec();
        (s.tile_m, s.tile_n, s.tile_k)
    }

    /// Pipeline depth: K slices in flight (shared-memory stages; for a [`Family::Gemv`] kernel,
    /// the chunks of K each lane has in flight in registers).
    pub const fn stages(self) -> u32 {
        self.spec().stages
    }

    /// Threads per CTA.
    pub const fn threads(self) -> u32 {
        self.spec().threads
    }

    /// Dynamic shared memory per CTA, bytes.
    pub const fn smem_bytes(self) -> u32 {
        self.spec().smem_bytes
    }

    /// What the kernel does to fp32 operands (operands repacked into a workspace are rounded to
    /// nearest before any kernel reads them: see [`crate::Plan::precision`]).
    pub const fn precision(self) -> Precision {
        self.spec().precision
    }

    /// CTAs per thread-block cluster along M: 1 for a plain launch, 2 for the `Cluster2` kernels
    /// (whose CTA pairs cover `2·TILE_M × TILE_N` together).
    pub const fn cluster_m(self) -> u32 {
        self.spec().cluster_m
    }

    /// Whether the kernel rounds X itself but reads W as it is given (the sm_90 kernels of
    /// [`Precision::Tf32`]: wgmma takes only X from registers). A call runs such a kernel
    /// only with W already rounded: a prepared weight, or W repacked into the workspace.
    pub const fn needs_rounded_w(self) -> bool {
        let s = self.spec();
        matches!((s.family, s.precision), (Family::TmaWgmma, Precision::Tf32))
    }

    /// Whether the kernel feeds both operands to the tensor cores from shared memory as the TMA
    /// left them (the sm_90 kernels of [`Precision::Tf32Truncated`]), so that the tensor map's
    /// element type decides their rounding: with fp32 maps the tensor cores truncate the fp32
    /// bits; with TF32 maps the TMA rounds each element to TF32, to nearest with ties to even,
    /// as it loads it — what cuBLAS's sm_90 TF32 kernels do (docs/EPILOGUE.md). Such a kernel gives
    /// [`Precision::Tf32`] at no cost: a handle asking for at least `Tf32` launches it with TF32
    /// maps ([`crate::Plan::round_on_load`]).
    pub const fn can_round_on_load(self) -> bool {
        let s = self.spec();
        matches!((s.family, s.precision), (Family::TmaWgmma, Precision::Tf32Truncated))
    }

    /// Whether the kernel reads W already split into 3xTF32's big and small parts (the sm_90
    /// kernels of [`Precision::Tf32x3`]: wgmma splits only X, which it takes from registers). A
    /// call runs such a kernel only with W split before: a prepared weight, or W split into the
    /// workspace.
    pub const fn needs_split_w(self) -> bool {
        let s = self.spec();
        matches!((s.family, s.precision), (Family::TmaWgmma, Precision::Tf32x3))
    }

    /// The most rows of X (M) a call of this kernel may have: the tile's rows for a
    /// [`Family::Skinny`] or [`Family::Gemv`] kernel, which holds all of X in one tile; `None`
    /// (any M) for the others.
    pub const fn max_m(self) -> Option<u32> {
        let s = self.spec();
        match s.family {
            Family::Skinny | Family::Gemv => Some(s.tile_m),
            _ => None,
        }
    }

    /// Whether the kernel reads operand rows 16 bytes at a time (or through TMA): it then needs
    /// K % 4 == 0, 16-byte-aligned `x` and `w` and leading dimensions that are multiples of 4,
    /// or a workspace to repack the operands into.
    pub const fn needs_aligned_rows(self) -> bool {
        matches!(self.spec().access, Access::AlignedRows)
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The symbol every row names, rebuilt from its facts: family, schedule, tile, stages,
    /// access, precision and cluster in one vocabulary.
    fn expected_name(k: Kernel) -> String {
        let s = k.spec();
        let schedule = match s.schedule {
            Schedule::Mma => "mma",
            Schedule::Pingpong => "pingpong",
            Schedule::Cooperative => "cooperative",
            Schedule::Skinny => "skinny",
            Schedule::Gemv => "gemv",
        };
        let arch = match s.family {
            Family::MmaSync | Family::Gemv => "sm80",
            Family::TmaWgmma | Family::Skinny => "sm90",
        };
        let mut name = format!("ge_{arch}_{schedule}_{}x{}x{}_s{}", s.tile_m, s.tile_n, s.tile_k, s.stages);
        if s.family == Family::MmaSync {
            name += if s.access == Access::AlignedRows { "_vec4" } else { "_scalar" };
        }
        if s.cluster_m > 1 {
            name += &format!("_cluster{}", s.cluster_m);
        }
        match (s.family, s.precision) {
            (Family::TmaWgmma, Precision::Tf32Truncated) => name += "_smem_a",
            (Family::TmaWgmma, Precision::Tf32) => name += "_rmem_a",
            (_, Precision::Tf32Truncated) => name += "_trunc",
            (_, Precision::Tf32x3) => name += "_x3",
            (_, Precision::Tf32) => {}
        }
        name
    }

    #[test]
    fn names_encode_the_configuration() {
        for k in Kernel::ALL {
            assert_eq!(k.name(), expected_name(k), "{k:?}");
            // The public accessors and Display say what the row says.
            assert_eq!((k.stages(), k.to_string()), (k.spec().stages, k.name().to_string()), "{k:?}");
            // The Rust variant says the same: family, schedule and tile.
            let (m, n, _) = k.tile();
            let variant = format!("{k:?}");
            assert!(variant.contains(&format!("{m}x{n}")), "{variant}");
            assert_eq!(variant.contains("Cluster2"), k.cluster_m() == 2, "{variant}");
            let tma = k.family() == Family::TmaWgmma;
            assert_eq!(variant.ends_with("Trunc"), !tma && k.precision() == Precision::Tf32Truncated, "{variant}");
            assert_eq!(variant.ends_with("SmemA"), k.can_round_on_load(), "{variant}");
            assert_eq!(variant.ends_with("RmemA"), k.needs_rounded_w(), "{variant}");
            assert_eq!(variant.ends_with("Tf32x3"), k.precision() == Precision::Tf32x3, "{variant}");
        }
        let mut names: Vec<_> = Kernel::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KERNEL_COUNT, "two rows name the same symbol");
    }

    #[test]
    fn index_is_the_table_position() {
        for (i, k) in Kernel::ALL.into_iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }

    #[test]
    fn specs_are_consistent() {
        for k in Kernel::ALL {
            let s = k.spec();
            assert!(s.threads % 32 == 0 && s.smem_bytes <= 227 * 1024, "{k}");
            // A W box is whole 8-row swizzle atoms, and the cluster's slices tile the W tile.
            if s.family != Family::Gemv {
                assert!(s.w_box_rows() * s.cluster_m == s.tile_n && s.w_box_rows() % 8 == 0, "{k}");
            }
            let consumer_rows = s.tile_m / s.tile_parts(); // of the tile, per consumer warpgroup
            assert_eq!(consumer_rows * s.tile_parts(), s.tile_m, "{k}: one part per consumer sharing the tile");
            match s.family {
                Family::MmaSync => assert_eq!(s.smem_bytes, s.stages * (s.tile_m + s.tile_n) * s.tile_k * 4, "{k}"),
                Family::TmaWgmma => {
                    // Stages, the epilogue's boxes, the barriers and the alignment slack.
                    let stages = s.stages * (s.tile_m + s.tile_n) * s.tile_k * 4;
                    assert!(s.smem_bytes >= stages + GE_SM90_EPILOGUE_SMEM_BYTES, "{k}");
                    // Each of a consumer's 4 warps stores boxes of its 16 rows of every 64-row
                    // wgmma atom; two boxes per warp fill the consumer's half of the buffers
                    // (one store reads a box while the warp writes the other).
                    assert!(consumer_rows % 64 == 0, "{k}");
                    const {
                        assert!(
                            GE_SM90_STORE_BOX_ROWS == 16
                                && 4 * 2 * GE_SM90_STORE_BOX_ROWS * GE_SM90_STORE_BOX_COLS * 4
                                    == GE_SM90_EPILOGUE_SMEM_BYTES / 2
                        )
                    };
                    assert!(s.access == Access::AlignedRows, "{k}");
                    // One 128-byte swizzle row of fp32 along K per stage (the operand tiles'
                    // SW128 layout).
                    assert_eq!(s.tile_k, 32, "{k}");
                }
                Family::Skinny => {
                    // Each lane's ring: per step, 16-byte slots for two W rows and one X row per
                    // 8 rows of the tile, per 16 k; whole n8 fragments of X, one m16 of W.
                    assert_eq!(s.smem_bytes, s.stages * s.threads * (s.tile_k / 16) * (2 + s.tile_m / 8) * 16, "{k}");
                    assert!(s.tile_m % 8 == 0 && s.tile_n == 16 && s.access == Access::AlignedRows, "{k}");
                    assert_eq!(k.max_m(), Some(s.tile_m), "{k}");
                }
                Family::Gemv => {
                    // Each warp loads 128 k per chunk (32 lanes × 4), `stages` chunks per trip.
                    assert_eq!(s.tile_k, 128 * (s.threads / 32) * s.stages, "{k}");
                    assert!(s.smem_bytes == 0 && s.access == Access::AlignedRows && s.cluster_m == 1, "{k}");
                    // One thread per output element in the CTA's reduction.
                    assert!(s.tile_m * s.tile_n <= s.threads, "{k}");
                    assert_eq!(k.max_m(), Some(s.tile_m), "{k}");
                }
            }
        }
        // Every cluster kernel has the same block, smem and cluster shape: load() asks the
        // occupancy of one and it serves all.
        let clustered: Vec<Spec> = Kernel::ALL.iter().map(|k| k.spec()).filter(|s| s.cluster_m > 1).collect();
        assert!(clustered.len() >= 2);
        for s in &clustered {
            assert_eq!(
                (s.threads, s.smem_bytes, s.cluster_m),
                (clustered[0].threads, clustered[0].smem_bytes, 2),
                "{}",
                s.name
            );
        }
        assert_eq!(Kernel::Sm90Cooperative128x256Cluster2SmemA.spec().w_box_rows(), 128);
        assert_eq!(Kernel::Sm90Cooperative128x256SmemA.spec().tile_parts(), 2);
        assert_eq!(Kernel::Sm80Mma64x64Vec4.tile(), (64, 64, 32));
        assert_eq!(Kernel::Sm90Skinny8x16.tile(), (8, 16, 32));
        assert_eq!(Kernel::Sm80Mma64x64Vec4.max_m(), None);
    }
}
