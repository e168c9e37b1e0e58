// Repack of an operand whose rows are not 16-byte aligned into a dense, 16-byte-aligned copy,
// rounded to TF32 on the way (see GeRepackParams). Memory-bound: each element read once and
// written once; loads are 4-byte (the source has no better alignment), stores are 16-byte.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "../include/gemm_epilogue.h"

namespace ge::elementwise {

// Grid-stride over (row, group of 4 destination columns).
__device__ __forceinline__ void repack_tf32(const GeRepackParams &p, int64_t first, int64_t stride) {
    const int64_t quads_per_row = p.ld_dst / 4;
    const int64_t total = quads_per_row * p.rows;
    for (int64_t i = first; i < total; i += stride) {
        const int64_t row = i / quads_per_row;
        const int col = int(i % quads_per_row) * 4;
        const float *src = p.src + row * p.ld_src + col;
        float4 v;
        v.x = col + 0 < p.cols ? ptx::round_tf32(src[0]) : 0.0f;
        v.y = col + 1 < p.cols ? ptx::round_tf32(src[1]) : 0.0f;
        v.z = col + 2 < p.cols ? ptx::round_tf32(src[2]) : 0.0f;
        v.w = col + 3 < p.cols ? ptx::round_tf32(src[3]) : 0.0f;
        *reinterpret_cast<float4 *>(p.dst + row * p.ld_dst + col) = v;
    }
}

}  // namespace ge::elementwise

extern "C" __global__ void __launch_bounds__(256) ge_repack_tf32(const GeRepackParams p) {
    ge::elementwise::repack_tf32(p, int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                                 int64_t(gridDim.x) * blockDim.x);
}
