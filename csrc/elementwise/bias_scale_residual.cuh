// The unfused baseline's second pass: after a GEMM wrote acc into `out`, apply the same epilogue
// functor in place. Memory-bound: one read and one write of out, 16 bytes a thread where rows
// allow it. Used by benches and tests to build "cuBLAS + elementwise"; not by the fused path.
#pragma once

#include <cstdint>

#include "../common/epilogue.cuh"
#include "../include/gemm_epilogue.h"

namespace ge::elementwise {

// Grid-stride over (row, group of 4 columns). `quads` = 16-byte-aligned rows of whole float4s.
__device__ __forceinline__ void bias_scale_residual(const GeElementwiseParams &p, int64_t first,
                                                    int64_t stride) {
    const epilogue::BiasScaleResidual epi{p.bias, p.scale};
    const bool quads = (p.ldo % 4 == 0) && (reinterpret_cast<uintptr_t>(p.out) % 16 == 0);
    const int64_t groups_per_row = (p.n + 3) / 4;
    const int64_t total = groups_per_row * p.m;
    for (int64_t i = first; i < total; i += stride) {
        const int64_t row = i / groups_per_row;
        const int col = int(i % groups_per_row) * 4;
        float *dst = p.out + row * p.ldo + col;
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

}  // namespace ge::elementwise

// Launch: block (256,1,1), any grid; a grid of a few waves (e.g. 4 x SMs) is enough.
extern "C" __global__ void __launch_bounds__(256) ge_elementwise_bias_scale_residual(
    const GeElementwiseParams p) {
    ge::elementwise::bias_scale_residual(p, int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                                         int64_t(gridDim.x) * blockDim.x);
}
