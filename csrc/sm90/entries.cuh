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

}  // namespace ge::sm90

// Grid: min(num_tiles, num_SMs) persistent CTAs; block GE_SM90_PINGPONG_THREADS; dynamic smem
// GE_SM90_PINGPONG_SMEM_BYTES; no cluster. Tensor maps per GeSm90Params (128B swizzle).
extern "C" __global__ void __launch_bounds__(GE_SM90_PINGPONG_THREADS, 1)
    ge_sm90_tf32_128x128x32_s6_pingpong(const __grid_constant__ GeSm90Params p) {
#if GE_SM90_ENABLED
    extern __shared__ __align__(1024) uint8_t ge_sm90_smem[];
    ge::sm90::warp_specialized_gemm<ge::sm90::Pingpong128x128x32>(p, ge_sm90_smem, threadIdx.x, blockIdx.x, gridDim.x);
#else
    __trap();
#endif
}
