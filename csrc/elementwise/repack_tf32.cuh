// Repack of an operand whose rows are not 16-byte aligned into a dense, 16-byte-aligned copy,
// rounded to TF32 on the way unless told not to (see GeRepackParams). Memory-bound: each element read once and
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
            const auto at = [&](int c) { return c < p.cols ? (p.round ? ptx::round_tf32(src[c]) : src[c]) : 0.0f; };
            const float4 v = make_float4(at(col), at(col + 1), at(col + 2), at(col + 3));
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
