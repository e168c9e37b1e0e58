// Bias preload of the sm_90a epilogue: a tile's bias is read from global memory when its
// mainloop starts and kept in registers, spread over the lanes of every consumer warp.
#pragma once

namespace ge::sm90 {

// The bias of one tile's TILE_N columns, held by every warp of a consumer: lane l holds column
// 32r + l of the tile in v[r] (0 past n or without bias). load() runs when the tile's mainloop
// starts, so the global loads' latency hides behind it; the epilogue then reads each fragment
// column 8i + 2q + j from lane 8(i % 4) + 2q + j, register i / 4, with a warp shuffle. Loading
// it in the epilogue instead would put one global round trip per store box on the critical path,
// exposed in the cooperative kernel, whose consumers both run their epilogue while the tensor
// cores wait.
template <int TILE_N>
struct WarpTileBias {
    static_assert(TILE_N % 32 == 0, "whole warps of columns");
    static constexpr int REGS = TILE_N / 32;
    float v[REGS];

    template <class Epilogue>
    __device__ __forceinline__ void load(const Epilogue &epi, int n0, int n, int lane) {
#pragma unroll
        for (int r = 0; r < REGS; ++r) {
            const int col = n0 + 32 * r + lane;
            v[r] = col < n ? epi.bias_at(col) : 0.0f;
        }
    }

    // Bias of tile columns 8i + 2 quad and 8i + 2 quad + 1. I is a compile-time fragment group;
    // every lane of the warp must call it (full-warp shuffles).
    template <int I>
    __device__ __forceinline__ float2 pair(int quad) const {
        const int lane = 8 * (I % 4) + 2 * quad;
        return make_float2(__shfl_sync(0xffffffffu, v[I / 4], lane), __shfl_sync(0xffffffffu, v[I / 4], lane + 1));
    }
};

}  // namespace ge::sm90
