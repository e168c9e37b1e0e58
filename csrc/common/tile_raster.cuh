// Grouped raster: the order in which a launch walks its output tiles, shared by both families.
// Linear tile ids run through groups of GROUP_M tile rows, column by column inside a group, so
// the CTAs in flight at once (one wave, or the persistent CTAs' current tiles) share a few W
// panels and the group's GROUP_M X panels, and read them from L2 rather than DRAM.
#pragma once

namespace ge {

template <int TILE_M, int TILE_N, int GROUP_M>
struct GroupedRaster {
    static_assert(GROUP_M >= 1, "GROUP_M: tile rows per raster group");

    int tiles_m;
    int tiles_n;
    int num_tiles;

    __device__ __forceinline__ GroupedRaster(int m, int n)
        : tiles_m((m + TILE_M - 1) / TILE_M), tiles_n((n + TILE_N - 1) / TILE_N), num_tiles(tiles_m * tiles_n) {}

    struct Tile {
        int m0;  // first output row of the tile
        int n0;  // first output column of the tile
    };

    // Linear tile id -> tile; the last group has fewer tile rows when tiles_m % GROUP_M != 0.
    __device__ __forceinline__ Tile tile(int id) const {
#if GE_MUTATION == 3
        // Mutation 3 (tests only, tools/mutation_run.sh): tile 1 is mapped onto tile 0, so tile 0
        // is computed and stored twice (the same values) and tile 1 is never stored.
        if (id == 1) id = 0;
#endif
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

}  // namespace ge
