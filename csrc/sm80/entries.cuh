// The mma.sync family's kernel entry points: one extern "C" symbol per configuration.
// Their names, tile shapes and launch contract are listed in include/gemm_epilogue.h and in
// src/kernels.rs; add a configuration in all three places (docs/TILING.md says how).
#pragma once

#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "kernel.cuh"

namespace ge::sm80 {

//                        TILE_M                  TILE_N                  TILE_K
using Large = Config<GE_SM80_LARGE_TILE_M, GE_SM80_LARGE_TILE_N, GE_SM80_LARGE_TILE_K,
                     /*WarpM*/ 64, /*WarpN*/ 64, GE_SM80_LARGE_STAGES, OperandAccess::Vec4>;
using LargeScalar = Config<GE_SM80_LARGE_TILE_M, GE_SM80_LARGE_TILE_N, GE_SM80_LARGE_TILE_K,
                           /*WarpM*/ 64, /*WarpN*/ 64, GE_SM80_LARGE_STAGES, OperandAccess::Scalar>;
using Wide = Config<GE_SM80_WIDE_TILE_M, GE_SM80_WIDE_TILE_N, GE_SM80_WIDE_TILE_K,
                    /*WarpM*/ 64, /*WarpN*/ 64, GE_SM80_WIDE_STAGES, OperandAccess::Vec4, Rounding::Nearest,
                    EpilogueStore::Staged>;
using WideScalar = Config<GE_SM80_WIDE_TILE_M, GE_SM80_WIDE_TILE_N, GE_SM80_WIDE_TILE_K,
                          /*WarpM*/ 64, /*WarpN*/ 64, GE_SM80_WIDE_STAGES, OperandAccess::Scalar>;
using WideTrunc = Config<GE_SM80_WIDE_TILE_M, GE_SM80_WIDE_TILE_N, GE_SM80_WIDE_TILE_K,
                         /*WarpM*/ 64, /*WarpN*/ 64, GE_SM80_WIDE_STAGES, OperandAccess::Vec4, Rounding::Truncate>;
using LargeTrunc = Config<GE_SM80_LARGE_TILE_M, GE_SM80_LARGE_TILE_N, GE_SM80_LARGE_TILE_K,
                          /*WarpM*/ 64, /*WarpN*/ 64, GE_SM80_LARGE_STAGES, OperandAccess::Vec4, Rounding::Truncate>;
using Small = Config<GE_SM80_SMALL_TILE_M, GE_SM80_SMALL_TILE_N, GE_SM80_SMALL_TILE_K,
                     /*WarpM*/ 32, /*WarpN*/ 32, GE_SM80_SMALL_STAGES, OperandAccess::Vec4>;
using SmallScalar = Config<GE_SM80_SMALL_TILE_M, GE_SM80_SMALL_TILE_N, GE_SM80_SMALL_TILE_K,
                           /*WarpM*/ 32, /*WarpN*/ 32, GE_SM80_SMALL_STAGES, OperandAccess::Scalar>;

static_assert(Large::kThreads == GE_SM80_LARGE_THREADS, "header and config disagree");
static_assert(Wide::kThreads == GE_SM80_WIDE_THREADS, "header and config disagree");
static_assert(Small::kThreads == GE_SM80_SMALL_THREADS, "header and config disagree");

}  // namespace ge::sm80

#define GE_SM80_ENTRY(NAME, CFG)                                                              \
    extern "C" __global__ void __launch_bounds__(CFG::kThreads, 1)                            \
        NAME(const GeProblem p, const GeStreamK stream_k) {                                   \
        extern __shared__ __align__(128) float ge_sm80_smem[];                                \
        ge::sm80::fused_gemm<CFG>(p, stream_k, ge_sm80_smem, blockIdx.x, gridDim.x, threadIdx.x); \
    }

GE_SM80_ENTRY(ge_sm80_tf32_128x128x32_s3_vec4, ge::sm80::Large)
GE_SM80_ENTRY(ge_sm80_tf32_128x128x32_s3_scalar, ge::sm80::LargeScalar)
GE_SM80_ENTRY(ge_sm80_tf32_128x256x32_s3_vec4, ge::sm80::Wide)
GE_SM80_ENTRY(ge_sm80_tf32_128x256x32_s3_scalar, ge::sm80::WideScalar)
GE_SM80_ENTRY(ge_sm80_tf32_128x128x32_s3_vec4_trunc, ge::sm80::LargeTrunc)
GE_SM80_ENTRY(ge_sm80_tf32_128x256x32_s3_vec4_trunc, ge::sm80::WideTrunc)
GE_SM80_ENTRY(ge_sm80_tf32_64x64x32_s4_vec4, ge::sm80::Small)
GE_SM80_ENTRY(ge_sm80_tf32_64x64x32_s4_scalar, ge::sm80::SmallScalar)

#undef GE_SM80_ENTRY
