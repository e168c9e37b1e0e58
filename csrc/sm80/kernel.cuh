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

// Mainloop, per k-tile kt (CUTLASS's multistage schedule, one barrier per k-tile):
//   k-step 0      issue the cp.async of k-tile kt + STAGES - 1 into the stage freed last k-tile
//   k-step s      load the fragments of k-step s + 1 while the mma of k-step s issue
//   k-step 3      wait for k-tile kt + 1 and barrier (it is then visible, and every warp is done
//                 reading k-tile kt - 1's stage), then load its k-step 0 fragments
// so the tensor cores have a k-step of mma queued while loads, waits and the barrier resolve.
template <class Cfg>
__device__ __forceinline__ void fused_gemm(const GeProblem &p, float *smem, int block, int tid) {
    using XLoader = SmemTileLoader<Cfg::kTileM, Cfg::kThreads, Cfg::kAccess>;
    using WLoader = SmemTileLoader<Cfg::kTileN, Cfg::kThreads, Cfg::kAccess>;
    using Mma = WarpMma<Cfg>;
    constexpr int kStages = Cfg::kStages;
    constexpr int kKSteps = Mma::kKSteps;

    int tile_m, tile_n;
    tile_coords<Cfg>(block, p.m, p.n, tile_m, tile_n);
    const int m0 = tile_m * Cfg::kTileM, n0 = tile_n * Cfg::kTileN;
    const int warp = tid / 32, lane = tid % 32;
    const int warp_m = warp / Cfg::kWarpsN, warp_n = warp % Cfg::kWarpsN;

    // Stage s: X tile (TILE_M, 32) at smem + s * kStageFloats, then the W tile (TILE_N, 32).
    auto load_stage = [&](int s, int k_tile) {
        float *x_tile = smem + s * Cfg::kStageFloats;
        const int k0 = k_tile * Cfg::kTileK;
        XLoader::load(x_tile, p.x, p.ldx, p.m, p.k, m0, k0, tid);
        WLoader::load(x_tile + Cfg::kTileM * Cfg::kTileK, p.w, p.ldw, p.n, p.k, n0, k0, tid);
    };
    const uint32_t smem_base = ptx::smem_addr(smem);
    auto stage_addr = [&](int s) { return smem_base + s * Cfg::kStageFloats * 4; };

    const int k_tiles = (p.k + Cfg::kTileK - 1) / Cfg::kTileK;  // k == 0: no iterations, v = bias

    // Prologue: fill kStages - 1 stages; one commit group per stage, empty past the last k-tile.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage(s, s);
        ptx::cp_async_commit();
    }

    Mma mma;
    mma.clear();
    const auto offsets = Mma::lane_offsets(warp_m, warp_n, lane);
    typename Mma::Frags frag[2];
    if (k_tiles > 0) {
        ptx::cp_async_wait<kStages - 2>();  // k-tile 0 landed (this thread's copies)...
        __syncthreads();                    // ...and everyone's
        Mma::load(frag[0], stage_addr(0), offsets, 0);
    }
    int read_stage = 0, write_stage = kStages - 1;
    for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
        for (int s = 0; s < kKSteps; ++s) {
            if (s == kKSteps - 1) {
                ptx::cp_async_wait<kStages - 2>();  // k-tile kt + 1 landed
                __syncthreads();
                read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
            }
            if (s < kKSteps - 1) {
                Mma::load(frag[(s + 1) & 1], stage_addr(read_stage), offsets, s + 1);
            } else if (kt + 1 < k_tiles) {
                Mma::load(frag[0], stage_addr(read_stage), offsets, 0);
            }
            if (s == 0) {
                const int next = kt + kStages - 1;
                if (next < k_tiles) load_stage(write_stage, next);
                ptx::cp_async_commit();
                write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
            }
            mma.mma(frag[s & 1]);
        }
    }
    ptx::cp_async_wait<0>();  // nothing may still target smem (the staged epilogue reuses it)

    if constexpr (Cfg::kStore == EpilogueStore::Staged)
        store_tile_staged<Cfg>(mma, Cfg::Epilogue::from(p), p, smem, m0, n0, warp_m, warp_n, lane, tid);
    else
        store_tile<Cfg>(mma, Cfg::Epilogue::from(p), p, m0, n0, warp_m, warp_n, lane);
}

}  // namespace ge::sm80
