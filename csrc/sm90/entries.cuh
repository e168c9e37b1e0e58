// extern "C" entry points of the sm_90a family. Compiled into the same fatbin as sm_80 and
// compute_80; there the bodies trap (the host never launches them below sm_90a).
#pragma once

#include "../include/gemm_epilogue.h"
#include "warp_specialized.cuh"

namespace ge::sm90 {

// 128x128x32 per consumer tile, STAGES-deep ring, 2 consumers + 1 producer warpgroup.
using Pingpong128x128x32 = KernelConfig<GE_SM90_PINGPONG_TILE_M, GE_SM90_PINGPONG_TILE_N, GE_SM90_PINGPONG_TILE_K,
                                        GE_SM90_PINGPONG_STAGES, Schedule::PingPong>;
static_assert(Pingpong128x128x32::THREADS == GE_SM90_PINGPONG_THREADS, "header THREADS out of date");
static_assert(Pingpong128x128x32::SMEM_BYTES == GE_SM90_PINGPONG_SMEM_BYTES, "header SMEM_BYTES out of date");

// 64x128x32 per consumer tile, 8 stages: small M (twice the tiles of the 128-row one).
using Pingpong64x128x32 = KernelConfig<GE_SM90_PINGPONG64_TILE_M, GE_SM90_PINGPONG64_TILE_N, GE_SM90_PINGPONG64_TILE_K,
                                       GE_SM90_PINGPONG64_STAGES, Schedule::PingPong>;
static_assert(Pingpong64x128x32::THREADS == GE_SM90_PINGPONG64_THREADS, "header THREADS out of date");
static_assert(Pingpong64x128x32::SMEM_BYTES == GE_SM90_PINGPONG64_SMEM_BYTES, "header SMEM_BYTES out of date");

// 64x64x32 per consumer tile, 12 stages: M <= 128 (cuBLAS's tile there).
using Pingpong64x64x32 = KernelConfig<GE_SM90_PINGPONG64X64_TILE_M, GE_SM90_PINGPONG64X64_TILE_N,
                                      GE_SM90_PINGPONG64X64_TILE_K, GE_SM90_PINGPONG64X64_STAGES, Schedule::PingPong>;
static_assert(Pingpong64x64x32::THREADS == GE_SM90_PINGPONG64X64_THREADS, "header THREADS out of date");
static_assert(Pingpong64x64x32::SMEM_BYTES == GE_SM90_PINGPONG64X64_SMEM_BYTES, "header SMEM_BYTES out of date");

// The same tile, CTAs paired along M into clusters of 2 that share (multicast) the W tile.
using Pingpong128x128x32C2 = KernelConfig<GE_SM90_PINGPONG_TILE_M, GE_SM90_PINGPONG_TILE_N, GE_SM90_PINGPONG_TILE_K,
                                          GE_SM90_PINGPONG_STAGES, Schedule::PingPong, GE_SM90_PINGPONG_CLUSTER_M>;
static_assert(Pingpong128x128x32C2::CLUSTER_M == GE_SM90_PINGPONG_CLUSTER_M, "header CLUSTER_M out of date");
static_assert(Pingpong128x128x32C2::B_SLICE_ROWS == GE_SM90_PINGPONG_C2_W_BOX_ROWS, "header C2_W_BOX_ROWS out of date");
static_assert(Pingpong128x128x32C2::THREADS == GE_SM90_PINGPONG_THREADS, "header THREADS out of date");
static_assert(Pingpong128x128x32C2::SMEM_BYTES == GE_SM90_PINGPONG_SMEM_BYTES, "header SMEM_BYTES out of date");

// 128x256x32 tiles shared by both consumers (64 rows each), 4 stages.
using Cooperative128x256x32 = KernelConfig<GE_SM90_COOP_TILE_M, GE_SM90_COOP_TILE_N, GE_SM90_COOP_TILE_K,
                                           GE_SM90_COOP_STAGES, Schedule::Cooperative>;
static_assert(Cooperative128x256x32::THREADS == GE_SM90_COOP_THREADS, "header THREADS out of date");
static_assert(Cooperative128x256x32::SMEM_BYTES == GE_SM90_COOP_SMEM_BYTES, "header SMEM_BYTES out of date");

// The same tile, CTAs paired along M into clusters of 2 that share (multicast) the 256-row W tile.
using Cooperative128x256x32C2 = KernelConfig<GE_SM90_COOP_TILE_M, GE_SM90_COOP_TILE_N, GE_SM90_COOP_TILE_K,
                                             GE_SM90_COOP_STAGES, Schedule::Cooperative, GE_SM90_COOP_CLUSTER_M>;
static_assert(Cooperative128x256x32C2::B_SLICE_ROWS == GE_SM90_COOP_C2_W_BOX_ROWS, "header C2_W_BOX_ROWS out of date");
static_assert(Cooperative128x256x32C2::SMEM_BYTES == GE_SM90_PINGPONG_SMEM_BYTES, "cluster kernels share one occupancy answer");
static_assert(Cooperative128x256x32C2::THREADS == GE_SM90_PINGPONG_THREADS, "cluster kernels share one occupancy answer");

}  // namespace ge::sm90

// One persistent entry per configuration: parameters in GeSm90Params (tensor maps with 128B
// swizzle), dynamic smem CFG::SMEM_BYTES, block CFG::THREADS, 1-D grid (see the header).
#define GE_SM90_ENTRY(NAME, CFG)                                                                   \
    extern "C" __global__ void __launch_bounds__(CFG::THREADS, 1) NAME(const __grid_constant__ GeSm90Params p) { \
        GE_SM90_BODY(CFG)                                                                          \
    }
#if GE_SM90_ENABLED
#define GE_SM90_BODY(CFG)                                                                          \
    extern __shared__ __align__(1024) uint8_t ge_sm90_smem[];                                      \
    ge::sm90::warp_specialized_gemm<CFG>(p, ge_sm90_smem, threadIdx.x, blockIdx.x, gridDim.x);
#else
#define GE_SM90_BODY(CFG) __trap();
#endif

// Grid: min(num_tiles, num_SMs) CTAs; no cluster.
GE_SM90_ENTRY(ge_sm90_tf32_128x128x32_s6_pingpong, ge::sm90::Pingpong128x128x32)

// Grid: min(num_tiles, num_SMs) CTAs of its 64x128 tiles; no cluster; out map box {STORE_BOX_COLS, 64}.
GE_SM90_ENTRY(ge_sm90_tf32_64x128x32_s8_pingpong, ge::sm90::Pingpong64x128x32)

// Grid: min(num_tiles, num_SMs) CTAs of its 64x64 tiles; no cluster; out map box {STORE_BOX_COLS, 64}.
GE_SM90_ENTRY(ge_sm90_tf32_64x64x32_s12_pingpong, ge::sm90::Pingpong64x64x32)

// Launched with cuLaunchKernelEx and CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = (2, 1, 1) (no
// __cluster_dims__ here: this file is compiled for sm_80 too). Grid: 2 * min(cluster_tiles,
// max active clusters) persistent CTAs; W map box {TILE_K, TILE_N / 2}.
GE_SM90_ENTRY(ge_sm90_tf32_128x128x32_s6_pingpong_c2, ge::sm90::Pingpong128x128x32C2)

// Grid: min(num_tiles, num_SMs) CTAs; no cluster; out map box {STORE_BOX_COLS, TILE_M / 2}.
GE_SM90_ENTRY(ge_sm90_tf32_128x256x32_s4_cooperative, ge::sm90::Cooperative128x256x32)

// Launched like ..._pingpong_c2 (cluster (2, 1, 1), 2 * min(cluster_tiles, max active clusters)
// CTAs); W map box {TILE_K, TILE_N / 2}, out map box {STORE_BOX_COLS, TILE_M / 2}.
GE_SM90_ENTRY(ge_sm90_tf32_128x256x32_s4_cooperative_c2, ge::sm90::Cooperative128x256x32C2)
