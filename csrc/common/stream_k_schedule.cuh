// Stream-K schedule (CUTLASS's "data-parallel + stream-K"), shared by both kernel families: which
// k-blocks of which tiles a CTA computes, and in what order. The partial-tile hand-off between
// the CTAs that share a tile is in stream_k.cuh.
//
// The host marks the last `sk_tiles` tiles of the schedule as stream-K tiles: their
// sk_tiles * K_TILES k-blocks ("units") are cut into G contiguous, equal ranges, one per
// stream-K CTA. A range covers the end of one tile, maybe whole tiles, and the start of another;
// a CTA works through them backwards (StreamKSchedule::item). Per tile:
//   - the CTA whose range holds the tile's last k-block is its finisher: it waits until every
//     other CTA that worked on the tile has published its partial accumulator, adds them in
//     CTA order (deterministic), applies the epilogue and stores;
//   - every other contributing CTA publishes its partial tile to `partials[cta]` and counts
//     itself in on `flags[tile]`. Only a range's last piece can be such a partial, so one slot
//     per CTA suffices.
// Finishers only wait for CTAs with a lower index, whose partials never wait: no deadlock, as
// long as every CTA it waits for has started: both families number their CTAs (sm90: clusters)
// by a ticket taken when they start (GeStreamK in the header), and CTA c takes tiles c, c + G,
// ... before its range.
//
// The host uses it two ways (src/gemm/stream_k.rs, plan()):
//   - split-K: with fewer tiles than resident CTAs (small M or N), every tile is a stream-K tile
//     and more CTAs than tiles share them, so that the SMs a wave of whole tiles would leave
//     idle work on K. The sm90 kernels cut every tile into the same number of parts, only with
//     at most half a wave of tiles, and fewer than 64 of them unless K is long (so few tiles
//     finish far sooner split along K than whole, while 64 whole tiles already stream at the
//     memory's pace: docs/BENCHMARKS.md); the mma.sync kernels spread the tiles over a wave of
//     CTAs;
//   - a shared tail: with at least 8 full waves, the tiles of the partial last wave (plus one
//     full wave when it is under a quarter full), so that no SM idles through the last wave.
//     With fewer full waves the hand-off costs more than the tail it fills, so the host leaves
//     such problems alone (docs/BENCHMARKS.md).
#pragma once

#include <cstdint>

namespace ge {

// One piece of work of a CTA: k-blocks [kb_begin, kb_end) of tile `tile`.
struct WorkItem {
    int tile;
    int kb_begin;
    int kb_end;
    uint64_t iteration;     // ring iteration of its first k-block (k-blocks of the CTA's earlier items)
    int sk_tile;            // index among the stream-K tiles, -1 for a data-parallel tile
    bool finisher;          // holds the tile's last k-block: reduces, applies the epilogue, stores
    int first_contributor;  // finisher of a stream-K tile: CTAs [first_contributor, cta) published partials
};

struct StreamKSchedule {
    int tiles, k_tiles, grid, cta;
    int dp_tiles;    // tiles [0, dp_tiles) are data-parallel: CTA c takes c, c + G, ...
    int dp_items;    // how many of them this CTA takes
    int64_t units;   // sk_tiles * k_tiles
    int64_t u0, u1;  // this CTA's stream-K units

    __device__ __forceinline__ StreamKSchedule(int tiles_, int k_tiles_, int grid_, int cta_, int sk_tiles)
        : tiles(tiles_), k_tiles(k_tiles_), grid(grid_), cta(cta_), dp_tiles(tiles_ - sk_tiles) {
        dp_items = cta < dp_tiles ? (dp_tiles - cta + grid - 1) / grid : 0;
        units = static_cast<int64_t>(sk_tiles) * k_tiles;
        u0 = range_start(cta);
        u1 = range_start(cta + 1);
    }

    __device__ __forceinline__ int64_t range_start(int c) const { return units * c / grid; }

    // The CTA whose range holds unit u.
    __device__ __forceinline__ int owner(int64_t u) const { return static_cast<int>(((u + 1) * grid - 1) / units); }

    __device__ __forceinline__ int items() const {
        const int pieces = u1 > u0 ? static_cast<int>((u1 - 1) / k_tiles - u0 / k_tiles + 1) : 0;
        return dp_items + pieces;
    }

    // Item j of this CTA. The stream-K pieces come last and in reverse: first the range's last
    // piece (the start of a tile a later CTA finishes), so this CTA publishes its partial before it
    // ever waits; last the piece that finishes a tile earlier CTAs started, whose partials were
    // then published long ago. In forward order a finisher would wait for a partial its
    // predecessor computes at the end of its range, and with ranges longer than a tile those
    // waits chain from CTA to CTA, serialising the stream-K CTAs.
    __device__ __forceinline__ WorkItem item(int j) const {
#if GE_MUTATION == 1
        // Mutation 1 (tests only, tools/mutation_run.sh): CTA 0's last item skips its last k-block.
        // Producer and consumer read the same item, and no later item's ring position depends
        // on it, so the kernel runs to completion with one k-block of one tile missing.
        WorkItem w = item_exact(j);
        if (cta == 0 && j == items() - 1 && w.kb_end - w.kb_begin > 1) w.kb_end -= 1;
        return w;
    }
    __device__ __forceinline__ WorkItem item_exact(int j) const {
#endif
        if (j < dp_items) return {cta + j * grid, 0, k_tiles, static_cast<uint64_t>(j) * k_tiles, -1, true, cta};
        const int t = static_cast<int>((u1 - 1) / k_tiles) - (j - dp_items);  // stream-K tile
        const int64_t first = static_cast<int64_t>(t) * k_tiles, last = first + k_tiles;
        const int64_t begin = u0 > first ? u0 : first, end = u1 < last ? u1 : last;
        // Ring position: after the data-parallel tiles and the pieces of later tiles, [end, u1).
        const uint64_t iteration = static_cast<uint64_t>(dp_items) * k_tiles + static_cast<uint64_t>(u1 - end);
        return {dp_tiles + t, static_cast<int>(begin - first), static_cast<int>(end - first), iteration, t, end == last,
                owner(first)};
    }

    // Whether CTA c has any stream-K units (so published a partial of every tile it touched).
    __device__ __forceinline__ bool has_range(int c) const { return range_start(c + 1) > range_start(c); }
};

}  // namespace ge
