// extern "C" entry points of the skinny family, one per tile and precision. Names, tiles and
// launch contract: include/gemm_epilogue.h (GE_SKINNY_*) and src/kernels/catalogue.rs. Clusters
// and distributed shared memory make them sm_90-only; elsewhere the bodies trap (the host never
// launches them below sm_90). The cluster size is the launch's attribute, not __cluster_dims__:
// one entry serves every split of K.
#pragma once

#include "../include/gemm_epilogue.h"
#include "../sm90/ptx.cuh"
#include "config.cuh"
#include "kernel.cuh"

#if GE_SM90_ENABLED
#define GE_SKINNY_BODY(CONFIG)                                                                                 \
    __shared__ ge::skinny::ReduceSmem<CONFIG> reduce;                                                          \
    extern __shared__ __align__(128) uint8_t ge_skinny_stages[];                                               \
    ge::skinny::skinny_gemm<CONFIG>(p, reduce, ge_skinny_stages, blockIdx.x, ge::sm90::ptx::cluster_ctarank(), \
                                    ge::sm90::ptx::cluster_nctarank(), threadIdx.x);
#else
#define GE_SKINNY_BODY(CONFIG) __trap();
#endif

// NAME: the extern "C" symbol; P: its header prefix (P##_TILE_M ...); PRECISION: Precision::....
// The header's THREADS and SMEM_BYTES are checked against the config they describe.
#define GE_SKINNY_ENTRY(NAME, P, PRECISION)                                                                            \
    extern "C" __global__ void __launch_bounds__(P##_THREADS) NAME(const GeProblem p) {                                \
        using Config =                                                                                                 \
            ge::skinny::KernelConfig<P##_TILE_M, P##_TILE_N, P##_TILE_K, P##_THREADS / 32, P##_STAGES, ge::PRECISION>; \
        static_assert(Config::THREADS == P##_THREADS, #P "_THREADS disagrees with the kernel config");                 \
        static_assert(Config::SMEM_BYTES == P##_SMEM_BYTES, #P "_SMEM_BYTES disagrees with the kernel config");        \
        GE_SKINNY_BODY(Config)                                                                                         \
    }

// clang-format off
GE_SKINNY_ENTRY(ge_sm90_skinny_8x16x32_s4,        GE_SKINNY_8X16,  Precision::Tf32)
GE_SKINNY_ENTRY(ge_sm90_skinny_8x16x32_s4_trunc,  GE_SKINNY_8X16,  Precision::Tf32Truncated)
GE_SKINNY_ENTRY(ge_sm90_skinny_8x16x32_s4_x3,     GE_SKINNY_8X16,  Precision::Tf32x3)
GE_SKINNY_ENTRY(ge_sm90_skinny_16x16x32_s4,       GE_SKINNY_16X16, Precision::Tf32)
GE_SKINNY_ENTRY(ge_sm90_skinny_16x16x32_s4_trunc, GE_SKINNY_16X16, Precision::Tf32Truncated)
GE_SKINNY_ENTRY(ge_sm90_skinny_16x16x32_s4_x3,    GE_SKINNY_16X16, Precision::Tf32x3)
// clang-format on

#undef GE_SKINNY_ENTRY
#undef GE_SKINNY_BODY
