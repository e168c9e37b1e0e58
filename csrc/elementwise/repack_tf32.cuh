// Repack of an operand whose rows are not 16-byte aligned into a dense, 16-byte-aligned copy,
// rounded to TF32 on the way (see GeRepackParams). Memory-bound: each element read once and
// written once; loads are 4-byte (the source has no better alignment), stores are 16-byte.
#pragma once

#include <cstdint>

#include "../common/ptx.cuh"
#include "../include/gemm_epilogue.h"

namespace ge::elementwise {

// Rows [row_first, rows) step row_step; quads (4 destination columns) [quad_first, ..) step
// quad_step. Two loops instead of one flat index: no 64-bit division per element.
__device__ __forceinline__ void repack_tf32(const GeRepackParams &p, int row_first, int row_step,
                                            int quad_first, int quad_step) {
    const int quads = int(p.ld_dst / 4);
    for (int row = row_first; row < p.rows; row += row_step) {
        const float *src = p.src + int64_t(row) * p.ld_src;
        float *dst = p.dst + int64_t(row) * p.ld_dst;
        for (int q = quad_first; q < quads; q += quad_step) {
            const int col = 4 * q;
            float4 v;
            v.x = col + 0 < p.cols ? ptx::round_tf32(src[col + 0]) : 0.0f;
            v.y = col + 1 < p.cols ? ptx::round_tf32(src[col + 1]) : 0.0f;
            v.z = col + 2 < p.cols ? ptx::round_tf32(src[col + 2]) : 0.0f;
            v.w = col + 3 < p.cols ? ptx::round_tf32(src[col + 3]) : 0.0f;
            *reinterpret_cast<float4 *>(dst + col) = v;
        }
    }
}

}  // namespace ge::elementwise

// Launch: block (256,1,1), grid (x, y) with x * 256 threads covering a row's quads and y rows
// in flight; any grid is correct.
extern "C" __global__ void __launch_bounds__(256) ge_repack_tf32(const GeRepackParams p) {
    ge::elementwise::repack_tf32(p, blockIdx.y, gridDim.y, blockIdx.x * blockDim.x + threadIdx.x,
                                 gridDim.x * blockDim.x);
}
