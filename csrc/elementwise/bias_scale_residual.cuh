// The unfused baseline's second pass: after a GEMM wrote acc into `out`, apply the same epilogue
// functor in place. Memory-bound: one read and one write of out, 16 bytes a thread where rows
// allow it. Used by benches and tests to build "cuBLAS + elementwise"; not by the fused path.
#pragma once

#include <cstdint>

#include "../common/epilogue.cuh"
#include "../include/gemm_epilogue.h"

namespace ge::elementwise {

// Rows [row_first, m) step row_step; groups of 4 columns [group_first, ..) step group_step.
// Two loops instead of one flat index: no 64-bit division per element.
__device__ __forceinline__ void bias_scale_residual(const GeElementwiseParams &p, int row_first, int row_step,
                                                    int group_first, int group_step) {
    const epilogue::BiasScaleResidual epi{p.bias, p.scale};
    // Whole float4s when every row starts 16-byte aligned.
    const bool quads = (p.ldo % 4 == 0) && (reinterpret_cast<uintptr_t>(p.out) % 16 == 0);
    const int groups = (p.n + 3) / 4;
    for (int row = row_first; row < p.m; row += row_step) {
        float *out_row = p.out + int64_t(row) * p.ldo;
        for (int g = group_first; g < groups; g += group_step) {
            const int col = 4 * g;
            float *dst = out_row + col;
            if (quads && col + 4 <= p.n) {
                float4 v = *reinterpret_cast<float4 *>(dst);
                v.x = epi(v.x, epi.bias_at(col));
                v.y = epi(v.y, epi.bias_at(col + 1));
                v.z = epi(v.z, epi.bias_at(col + 2));
                v.w = epi(v.w, epi.bias_at(col + 3));
                *reinterpret_cast<float4 *>(dst) = v;
            } else {
                for (int c = col; c < min(col + 4, p.n); ++c) dst[c - col] = epi(dst[c - col], epi.bias_at(c));
            }
        }
    }
}

}  // namespace ge::elementwise

// Launch: block (256,1,1), grid (x, y) with x * 256 threads covering a row's column groups and
// y rows in flight; any grid is correct.
extern "C" __global__ void __launch_bounds__(256) ge_elementwise_bias_scale_residual(const GeElementwiseParams p) {
    ge::elementwise::bias_scale_residual(p, blockIdx.y, gridDim.y, blockIdx.x * blockDim.x + threadIdx.x,
                                         gridDim.x * blockDim.x);
}
