// The extern "C" entry point of one TMA + wgmma configuration (GE_SM90_ENTRY, below); the lists
// of them are entries_pingpong.cuh and entries_cooperative.cuh. Their names, tiles and launch
// contract are in include/gemm_epilogue.h (one GE_SM90_* prefix per tile shape) and in
// src/kernels/catalogue.rs. Compiled for sm_80 and compute_80 too; there the bodies trap (the
// host never launches them below sm_90a). The cluster entries have no __cluster_dims__ (this
// file is compiled for sm_80 too): the host launches them with a cluster dimension attribute.
#pragma once

#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "warp_specialized.cuh"

#if GE_SM90_ENABLED
#define GE_SM90_BODY(CONFIG)                                  \
    extern __shared__ __align__(1024) uint8_t ge_sm90_smem[]; \
    ge::sm90::warp_specialized_gemm<CONFIG>(p, ge_sm90_smem, threadIdx.x, blockIdx.x, gridDim.x);
#else
#define GE_SM90_BODY(CONFIG) __trap();
#endif

// NAME: the extern "C" symbol; P: its header prefix (P##_TILE_M ...); SCHEDULE: Schedule::...;
// CLUSTER_M: CTAs per cluster along M; PRECISION: Precision::... (mainloop.cuh). The header's
// THREADS and SMEM_BYTES are checked against the config they describe, and every cluster entry's
// against the others': the host asks cuOccupancyMaxActiveClusters once for all of them.
#define GE_SM90_ENTRY(NAME, P, SCHEDULE, CLUSTER_M, PRECISION)                                                    \
    extern "C" __global__ void __launch_bounds__(P##_THREADS, 1) NAME(const __grid_constant__ GeSm90Params p) {   \
        using Config = ge::sm90::KernelConfig<P##_TILE_M, P##_TILE_N, P##_TILE_K, P##_STAGES, ge::sm90::SCHEDULE, \
                                              CLUSTER_M, ge::PRECISION>;                                          \
        static_assert(Config::THREADS == P##_THREADS, #P "_THREADS disagrees with the kernel config");            \
        static_assert(Config::SMEM_BYTES == P##_SMEM_BYTES, #P "_SMEM_BYTES disagrees with the kernel config");   \
        static_assert(CLUSTER_M == 1 || (P##_SMEM_BYTES == GE_SM90_PINGPONG_128X128_SMEM_BYTES &&                 \
                                         P##_THREADS == GE_SM90_PINGPONG_128X128_THREADS),                        \
                      #NAME ": every cluster kernel has one block size and smem (one occupancy answer)");         \
        GE_SM90_BODY(Config)                                                                                      \
    }
