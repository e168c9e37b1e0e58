// extern "C" entry points of the GEMV family, one per tile and precision. Names, tiles and
// launch contract: include/gemm_epilogue.h (GE_GEMV_*) and src/kernels/catalogue.rs. Plain
// CUDA: the same body for sm_80 and sm_90.
#pragma once

#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "kernel.cuh"

// NAME: the extern "C" symbol; P: its header prefix (P##_TILE_M ...); PRECISION: Precision::....
// The header's TILE_K is checked against the config it describes.
#define GE_GEMV_ENTRY(NAME, P, PRECISION)                                                                           \
    extern "C" __global__ void __launch_bounds__(P##_THREADS) NAME(const GeProblem p) {                             \
        using Config = ge::gemv::KernelConfig<P##_TILE_M, P##_TILE_N, P##_THREADS / 32, P##_UNROLL, ge::PRECISION>; \
        static_assert(Config::TILE_K == P##_TILE_K, #P "_TILE_K disagrees with the kernel config");                 \
        __shared__ ge::gemv::ReduceSmem<Config> reduce;                                                             \
        ge::gemv::gemv<Config>(p, reduce, blockIdx.x, threadIdx.x);                                                 \
    }

// clang-format off
GE_GEMV_ENTRY(ge_sm80_gemv_1x2x2048_s2,       GE_GEMV_1X2, Precision::Tf32)
GE_GEMV_ENTRY(ge_sm80_gemv_1x2x2048_s2_trunc, GE_GEMV_1X2, Precision::Tf32Truncated)
GE_GEMV_ENTRY(ge_sm80_gemv_1x2x2048_s2_x3,    GE_GEMV_1X2, Precision::Tf32x3)
GE_GEMV_ENTRY(ge_sm80_gemv_1x4x512_s1,        GE_GEMV_1X4, Precision::Tf32)
GE_GEMV_ENTRY(ge_sm80_gemv_1x4x512_s1_trunc,  GE_GEMV_1X4, Precision::Tf32Truncated)
GE_GEMV_ENTRY(ge_sm80_gemv_1x4x512_s1_x3,     GE_GEMV_1X4, Precision::Tf32x3)
GE_GEMV_ENTRY(ge_sm80_gemv_4x4x1024_s1,       GE_GEMV_4X4, Precision::Tf32)
GE_GEMV_ENTRY(ge_sm80_gemv_4x4x1024_s1_trunc, GE_GEMV_4X4, Precision::Tf32Truncated)
GE_GEMV_ENTRY(ge_sm80_gemv_4x4x1024_s1_x3,    GE_GEMV_4X4, Precision::Tf32x3)
// clang-format on

#undef GE_GEMV_ENTRY
