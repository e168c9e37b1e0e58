// Epilogue functors: what happens to one accumulator between the mainloop and the store.
// Thread-scope and stateless apart from their parameters; every kernel family calls the same
// functor, so the math (and its rounding) lives here once. See docs/EPILOGUE.md.
#pragma once

#include "../include/gemm_epilogue.h"

namespace ge::epilogue {

// out = (v * scale) + v,  v = acc + bias[col]   (bias absent: v = acc)
//
// Rounding is exactly PyTorch's `y = linear(x); y * s + y.clone()`: v is rounded to fp32 once,
// t = v*s is rounded, then t + v is rounded. __fmul_rn/__fadd_rn are never contracted into an
// FMA by nvcc (unlike `v * s + v`, which -fmad=true would fuse into one rounding).
struct BiasScaleResidual {
    const float *bias;  // n values or nullptr
    float scale;

    __host__ __device__ static BiasScaleResidual from(const GeProblem &p) { return {p.bias, p.scale}; }

    __device__ __forceinline__ bool has_bias() const { return bias != nullptr; }

    // Bias for one in-bounds output column (0 when absent); load once per column a thread owns.
    __device__ __forceinline__ float bias_at(int col) const { return bias ? __ldg(bias + col) : 0.0f; }

    __device__ __forceinline__ float operator()(float acc, float bias_value) const {
        const float v = has_bias() ? __fadd_rn(acc, bias_value) : acc;
        const float t = __fmul_rn(v, scale);
        return __fadd_rn(t, v);
    }
};

}  // namespace ge::epilogue
