// The mma.sync family's kernel entry points: one extern "C" symbol per configuration. Their
// names, tile shapes and launch contract are in include/gemm_epilogue.h (one GE_SM80_MMA_*
// prefix per tile shape) and in src/kernels/catalogue.rs; add a configuration in all three
// places (docs/TILING.md says how).
#pragma once

#include "../include/gemm_epilogue.h"
#include "config.cuh"
#include "kernel.cuh"

// NAME: the extern "C" symbol; P: its header prefix (P##_TILE_M ...); then the policies
// (OperandAccess::..., Precision::..., EpilogueStore::...). The header's THREADS and SMEM_BYTES
// are checked against the config they describe.
#define GE_SM80_ENTRY(NAME, P, ACCESS, PRECISION, STORE)                                                              \
    extern "C" __global__ void __launch_bounds__(P##_THREADS, 1) NAME(const GeProblem p, const GeStreamK stream_k) {  \
        using Config = ge::sm80::KernelConfig<P##_TILE_M, P##_TILE_N, P##_TILE_K, P##_WARP_M, P##_WARP_N, P##_STAGES, \
                                              ge::sm80::ACCESS, ge::PRECISION, ge::sm80::STORE>;                      \
        static_assert(Config::THREADS == P##_THREADS, #P "_THREADS disagrees with the kernel config");                \
        static_assert(Config::SMEM_BYTES == P##_SMEM_BYTES, #P "_SMEM_BYTES disagrees with the kernel config");       \
        extern __shared__ __align__(128) float ge_sm80_smem[];                                                        \
        ge::sm80::fused_gemm<Config>(p, stream_k, ge_sm80_smem, blockIdx.x, gridDim.x, threadIdx.x);                  \
    }

// clang-format off
GE_SM80_ENTRY(ge_sm80_mma_128x128x32_s3_vec4,       GE_SM80_MMA_128X128, OperandAccess::Vec4,   Precision::Tf32,  EpilogueStore::Registers)
GE_SM80_ENTRY(ge_sm80_mma_128x128x32_s3_vec4_trunc, GE_SM80_MMA_128X128, OperandAccess::Vec4,   Precision::Tf32Truncated, EpilogueStore::Registers)
GE_SM80_ENTRY(ge_sm80_mma_128x128x32_s3_scalar,     GE_SM80_MMA_128X128, OperandAccess::Scalar, Precision::Tf32,  EpilogueStore::Registers)
GE_SM80_ENTRY(ge_sm80_mma_128x256x32_s3_vec4,       GE_SM80_MMA_128X256, OperandAccess::Vec4,   Precision::Tf32,  EpilogueStore::Staged)
GE_SM80_ENTRY(ge_sm80_mma_128x256x32_s3_vec4_trunc, GE_SM80_MMA_128X256, OperandAccess::Vec4,   Precision::Tf32Truncated, EpilogueStore::Registers)
GE_SM80_ENTRY(ge_sm80_mma_128x256x32_s3_scalar,     GE_SM80_MMA_128X256, OperandAccess::Scalar, Precision::Tf32,  EpilogueStore::Registers)
GE_SM80_ENTRY(ge_sm80_mma_64x64x32_s4_vec4,         GE_SM80_MMA_64X64,   OperandAccess::Vec4,   Precision::Tf32,  EpilogueStore::Registers)
GE_SM80_ENTRY(ge_sm80_mma_64x64x32_s4_scalar,       GE_SM80_MMA_64X64,   OperandAccess::Scalar, Precision::Tf32,  EpilogueStore::Registers)
GE_SM80_ENTRY(ge_sm80_mma_64x64x32_s4_vec4_x3,      GE_SM80_MMA_64X64,   OperandAccess::Vec4,   Precision::Tf32x3, EpilogueStore::Registers)
GE_SM80_ENTRY(ge_sm80_mma_64x64x32_s4_scalar_x3,    GE_SM80_MMA_64X64,   OperandAccess::Scalar, Precision::Tf32x3, EpilogueStore::Registers)
// clang-format on

#undef GE_SM80_ENTRY
