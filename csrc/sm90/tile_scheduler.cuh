// Persistent tile scheduler: CTA b walks tiles b, b + G, b + 2G, ... (G = gridDim.x) of a
// grouped raster, so that the ~132 tiles in flight at once share few X and W panels in L2.
#pragma once

#include <cstdint>

namespace ge::sm90 {

template <int TILE_M, int TILE_N, int GROUP_M>
struct GroupedTileScheduler {
    static_assert(GROUP_M >= 1, "GROUP_M: number of M tiles per raster group");

    int tiles_m;
    int tiles_n;
    int num_tiles;

    __device__ __forceinline__ GroupedTileScheduler(int m, int n)
        : tiles_m((m + TILE_M - 1) / TILE_M), tiles_n((n + TILE_N - 1) / TILE_N), num_tiles(tiles_m * tiles_n) {}

    struct Tile {
        int m0;  // first output row of the tile
        int n0;  // first output column of the tile
    };

    // Linear tile id -> tile. Groups of GROUP_M tile rows are walked column by column, so
    // consecutive ids reuse the same W panel (N) and the group's GROUP_M X panels (M).
    __device__ __forceinline__ Tile tile(int id) const {
        const int tiles_per_group = GROUP_M * tiles_n;
        const int group = id / tiles_per_group;
        const int first_m = group * GROUP_M;
        const int group_m = min(tiles_m - first_m, GROUP_M);
        const int in_group = id - group * tiles_per_group;
        const int tm = first_m + in_group % group_m;
        const int tn = in_group / group_m;
        return {tm * TILE_M, tn * TILE_N};
    }
};

}  // namespace ge::sm90
