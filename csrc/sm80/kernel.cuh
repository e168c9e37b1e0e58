// CTA-scope body of the mma.sync kernel: raster -> multistage cp.async mainloop -> fused epilogue.
#pragma once

#include "../common/epilogue.cuh"
#include "../common/ptx.cuh"
#include "config.cuh"
#include "epilogue_store.cuh"
#include "smem_tile.cuh"
#include "warp_mma.cuh"

namespace ge::sm80 {

// Grouped raster: consecutive CTAs cover kRasterGroupM tile-rows x all tile-columns, column by
// column, so the W tiles they share are read from L2 rather than DRAM.
template <class Cfg>
__device__ __forceinline__ void tile_coords(int block, int m, int n, int &tile_m, int &tile_n) {
    const int tiles_m = (m + Cfg::kTileM - 1) / Cfg::kTileM;
    const int tiles_n = (n + Cfg::kTileN - 1) / Cfg::kTileN;
    const int per_group = Cfg::kRasterGroupM * tiles_n;
    const int first_m = (block / per_group) * Cfg::kRasterGroupM;
    const int group_m = min(tiles_m - first_m, Cfg::kRasterGroupM);
    const int in_group = block % per_group;
    tile_m = first_m + in_group % group_m;
    tile_n = in_group / group_m;
}

template <class Cfg>
__device__ __forceinline__ void fused_gemm(const GeProblem &p, float *smem, int block, int tid) {
    using XLoader = SmemTileLoader<Cfg::kTileM, Cfg::kThreads, Cfg::kAccess, TileOrder::RowPairsInterleaved>;
    using WLoader = SmemTileLoader<Cfg::kTileN, Cfg::kThreads, Cfg::kAccess, TileOrder::KMajor>;
    constexpr int kStages = Cfg::kStages;

    int tile_m, tile_n;
    tile_coords<Cfg>(block, p.m, p.n, tile_m, tile_n);
    const int m0 = tile_m * Cfg::kTileM, n0 = tile_n * Cfg::kTileN;
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;

    // Stage s: x_tile(s) = smem + s * kStageFloats, (TILE_M, 32); w_tile(s) follows, (TILE_N, 32).
    auto x_tile = [&](int s) { return smem + s * Cfg::kStageFloats; };
    auto w_tile = [&](int s) { return smem + s * Cfg::kStageFloats + Cfg::kTileM * Cfg::kTileK; };
    auto load_stage = [&](int s, int k_tile) {
        const int k0 = k_tile * Cfg::kTileK;
        XLoader::load(x_tile(s), p.x, p.ldx, p.m, p.k, m0, k0, tid);
        WLoader::load(w_tile(s), p.w, p.ldw, p.n, p.k, n0, k0, tid);
    };

    const int k_tiles = (p.k + Cfg::kTileK - 1) / Cfg::kTileK;  // k == 0: no iterations, v = bias

    // Prologue: fill kStages - 1 stages; one commit group per stage, empty past the last k-tile.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        ptx::cp_async_commit();
    }

    WarpMma<Cfg> mma;
    mma.clear();
    const auto lane_offsets = WarpMma<Cfg>::lane_offsets(warp_m, warp_n, lane);
    for (int kt = 0; kt < k_tiles; ++kt) {
        ptx::cp_async_wait<kStages - 2>();  // this thread's copies of k-tile kt have landed:
        XLoader::finish(x_tile(kt % kStages), tid);  // round (and arrange) them in place, once,
        WLoader::finish(w_tile(kt % kStages), tid);
        __syncthreads();                    // then publish the stage; stage kt-1 is free again
        const int next = kt + kStages - 1;
        if (next < k_tiles) load_stage(next % kStages, next);
        ptx::cp_async_commit();
        mma.step(x_tile(kt % kStages), lane_offsets);
    }
    ptx::cp_async_wait<0>();  // nothing may still target smem when the CTA exits

    store_tile<Cfg>(mma, Cfg::Epilogue::from(p), p, m0, n0, warp_m, warp_n, lane);
}

}  // namespace ge::sm80
