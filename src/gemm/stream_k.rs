//! How many tiles are shared along K, and by how many CTAs (the kernels' side of the schedule is
//! `csrc/common/stream_k.cuh`). Decided per call from the shape, the kernel, what fits on the
//! device at once (a wave) and the room left in the workspace.

use super::shape::Shape;
use crate::device::DeviceInfo;
use crate::kernels::catalogue::Family;
use crate::kernels::loaded::Occupancy;
use crate::kernels::Kernel;

/// Least k-blocks per CTA for which splitting a tile along K is worth a partial-tile round trip.
const SPLIT_K_MIN_BLOCKS: u64 = 8;

/// TMA split-K of the other tiles (which Auto never splits: where it runs them, more than half a
/// wave of their tiles leaves no room for 2 parts, except `Tf32x3`'s 64×128 tile): a tile is cut into more than SPLIT_K_FEW_PARTS parts
/// only if each part keeps at least SPLIT_K_LONG_BLOCKS k-blocks. A finisher adds its parts − 1
/// partials after the others are done, so past a few parts each further one costs more than the
/// shorter mainloop saves (docs/BENCHMARKS.md, "Tuned constants").
const SPLIT_K_FEW_PARTS: u64 = 4;
const SPLIT_K_LONG_BLOCKS: u64 = 16;

/// TMA split-K of the 64×64 tiles, the only TMA tiles Auto splits (`Tf32` and `Tf32Truncated`
/// run the `SmemA` build, fed from shared memory as the TMA wrote it): the parts p minimise a
/// tile's time in units of one of its k-blocks, k_blocks / p + SPLIT_K_PART_COST · (p − 1) +
/// SPLIT_K_COST (p > 1): the mainloop shared out, a partial's round trip per part beyond the
/// first, and a fixed cost of splitting at all (the hand-off through the workspace, the
/// finisher waiting for its peers). The constants are fitted to a race of the `SmemA` build
/// over the count of parts (docs/BENCHMARKS.md, "Tuned constants"; the test below holds the model to it): its fast mainloop
/// makes the fixed cost weigh more, so it splits less than the other tiles' rule. Its `RmemA`
/// twin plans the same (the rounding tests compare the two bitwise, which needs one order of
/// partial sums).
const SPLIT_K_PART_COST: f64 = 3.8;
const SPLIT_K_COST: f64 = 18.0;

/// TMA split-K: no tile is split from SPLIT_K_MAX_TILES tiles on, unless K is long (more than
/// SPLIT_K_SHORT_BLOCKS k-blocks). 64 CTAs of one tile each already keep the H200's memory busy
/// (cuBLAS itself runs 64 CTAs at 16×4096×4096), so the second half of a wave that a 2-part
/// split adds brings partial round trips, not bandwidth; at long K the hand-off is small against
/// each half's mainloop (docs/BENCHMARKS.md, "Tuned constants").
const SPLIT_K_MAX_TILES: u64 = 64;
const SPLIT_K_SHORT_BLOCKS: u64 = 256;

/// Least full waves of tiles before the last, partial wave is worth sharing: with fewer, the
/// shared tail's hand-off costs more than the idle SMs it fills (docs/BENCHMARKS.md, "Tuned constants").
const STREAM_K_MIN_WAVES: u64 = 8;

/// The TMA kernels share a last wave only with tiles of at least STREAM_K_TAIL_MIN_BLOCKS
/// k-blocks, and only a last wave at most STREAM_K_TAIL_MAX_FILL full (as a fraction of a wave).
/// The hand-off (partials through L2, a finisher per tile) costs about the same at any K, so
/// short tiles leave it nothing to win back; a fuller last wave gains less than its idle SMs
/// suggest (likely the power cap: with fewer SMs busy a partial wave runs faster than a full
/// one) (docs/BENCHMARKS.md, "Tuned constants").
const STREAM_K_TAIL_MIN_BLOCKS: u64 = 48;
const STREAM_K_TAIL_MAX_FILL: (u64, u64) = (3, 5);

/// The stream-K part of a launch: `tiles` (cluster) tiles shared along K by `ctas` CTAs
/// (clusters for the cluster kernels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamK {
    pub ctas: u32,
    pub tiles: u32,
}

impl StreamK {
    /// f32 elements of workspace it takes ([`crate::sys::GeStreamK`]): one partial tile per
    /// stream-K CTA (cluster), then the 64-bit hand-off words.
    pub fn len(self, kernel: Kernel) -> usize {
        self.ctas as usize * partial_tile_len(kernel) + 2 * self.sync_words(kernel)
    }

    /// The u64 hand-off words: a ready word per (CTA or cluster, CTA of the cluster, consumer
    /// sharing the tile), then the ticket word. None needs a value at launch.
    pub fn sync_words(self, kernel: Kernel) -> usize {
        let spec = kernel.spec();
        self.ctas as usize * (spec.cluster_m * spec.tile_parts()) as usize + 1
    }
}

/// A fresh launch number for [`crate::sys::GeStreamK::launch`]: 1 ..= 2^40 − 1, never the same
/// twice in a process until 2^40 launches have passed. The words a finisher waits on (and the
/// ticket word) must hold this launch's number to count, so a workspace is never zeroed: what
/// earlier calls left there carries their numbers. The count starts at a random point, so a
/// workspace that held another process's words (or anything else) is as unlikely to match.
pub(crate) fn next_launch() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static START: OnceLock<u64> = OnceLock::new();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let start = *START.get_or_init(|| std::collections::hash_map::RandomState::new().build_hasher().finish());
    launch_number(start, COUNT.fetch_add(1, Ordering::Relaxed))
}

/// The `count`-th launch number after a random `start`: 1 ..= 2^40 − 1 (0 would match a
/// zeroed workspace, and a 41st bit would spill out of the ticket word), cycling through all
/// of them before any repeats.
fn launch_number(start: u64, count: u64) -> u64 {
    const NUMBERS: u64 = (1 << crate::sys::GE_STREAM_K_LAUNCH_BITS) - 1;
    (start.wrapping_add(count) % NUMBERS) + 1
}

/// f32 elements of one stream-K CTA's (cluster's) partial tile.
pub(crate) fn partial_tile_len(kernel: Kernel) -> usize {
    let (tm, tn, _) = kernel.tile();
    tm as usize * tn as usize * kernel.cluster_m() as usize
}

/// Whether `t` tiles of `k_blocks` k-blocks each, in waves of `wave`, of a kernel of `family`,
/// end in a partial wave that stream-K shares (given room in the workspace): at least
/// STREAM_K_MIN_WAVES full waves before it; for the TMA kernels, long enough tiles and a last
/// wave not too full (STREAM_K_TAIL_MIN_BLOCKS, STREAM_K_TAIL_MAX_FILL).
pub(crate) fn shares_last_wave(family: Family, t: u64, wave: u64, k_blocks: u64) -> bool {
    if wave == 0 || t % wave == 0 || t / wave < STREAM_K_MIN_WAVES {
        return false;
    }
    let (num, den) = STREAM_K_TAIL_MAX_FILL;
    family != Family::TmaWgmma || (k_blocks >= STREAM_K_TAIL_MIN_BLOCKS && den * (t % wave) <= num * wave)
}

/// Stream-K for `kernel` on `s`, when `room` f32 elements of workspace hold it; else None.
/// - Fewer tiles than a wave: split-K, every tile shared along K (at least SPLIT_K_MIN_BLOCKS
///   k-blocks per CTA). TMA kernels cut every tile into the same whole number of parts (64×64
///   tiles as their time model says, the others into more than SPLIT_K_FEW_PARTS only with
///   SPLIT_K_LONG_BLOCKS k-blocks each), none from
///   SPLIT_K_MAX_TILES tiles on unless K is long, and none with more than half a wave of them
///   (spreading more tiles over a wave, or cutting them unevenly, measured slower:
///   docs/BENCHMARKS.md, "Tuned constants"); mma.sync kernels spread the tiles over a wave of CTAs.
/// - At least STREAM_K_MIN_WAVES full waves and a partial last one (for the TMA kernels, of
///   long enough tiles and not too full: [`shares_last_wave`]): the tiles of the last wave
///   (plus one full wave when it is less than a quarter full) are shared along K by a wave of
///   CTAs, so that the last wave does not keep a few SMs busy while the rest idle.
pub(crate) fn plan(
    device: &DeviceInfo,
    occupancy: &Occupancy,
    kernel: Kernel,
    s: Shape,
    room: usize,
) -> Option<StreamK> {
    let spec = kernel.spec();
    // A skinny kernel splits K inside its clusters, with no workspace (gemm::skinny); a GEMV
    // CTA covers all of K.
    if s.k == 0 || matches!(spec.family, Family::Skinny | Family::Gemv) {
        return None;
    }
    let wave = occupancy.wave(device, kernel) as u64;
    if wave == 0 {
        return None;
    }
    let t = s.cluster_tiles(kernel);
    if t == 0 {
        return None;
    }
    // Tickets count the launch's CTAs in GE_STREAM_K_TICKET_BITS bits (the mma.sync grid is
    // every tile not shared plus the wave that shares the rest).
    if t + wave >= 1 << crate::sys::GE_STREAM_K_TICKET_BITS {
        return None;
    }
    let k_blocks = s.k_blocks(kernel);
    let (ctas, tiles) = if t < wave && spec.family == Family::TmaWgmma {
        // Whole splits: no CTA straddles two tiles, and each finisher adds splits - 1 partials.
        let most = (wave / t).min(k_blocks / SPLIT_K_MIN_BLOCKS);
        let splits = if t >= SPLIT_K_MAX_TILES && k_blocks <= SPLIT_K_SHORT_BLOCKS {
            1
        } else if (spec.tile_m, spec.tile_n) == (64, 64) {
            tile_64x64_parts(k_blocks, most)
        } else {
            most.min(SPLIT_K_FEW_PARTS.max(k_blocks / SPLIT_K_LONG_BLOCKS))
        };
        if splits < 2 {
            return None;
        }
        (t * splits, t)
    } else if t < wave {
        let ctas = (t * k_blocks / SPLIT_K_MIN_BLOCKS).min(wave);
        if ctas <= t {
            return None;
        }
        (ctas, t)
    } else if shares_last_wave(spec.family, t, wave, k_blocks) {
        // A last wave at least a quarter full is shared as it is (each CTA a quarter tile or
        // more); a thinner one together with the wave before it, or a tile would be cut into
        // dozens of slivers with as many partials to add.
        let tail = t % wave;
        (wave, if 4 * tail >= wave { tail } else { tail + wave })
    } else {
        return None;
    };
    let sk = StreamK { ctas: ctas as u32, tiles: tiles as u32 };
    (room >= sk.len(kernel)).then_some(sk)
}

/// The parts (1 ..= max(most, 1)) that a 64×64 tile of `k_blocks` is cut into: the fewest of
/// those with the least modelled time (SPLIT_K_PART_COST, SPLIT_K_COST).
fn tile_64x64_parts(k_blocks: u64, most: u64) -> u64 {
    let time = |p: u64| {
        let split = if p > 1 { SPLIT_K_PART_COST * (p - 1) as f64 + SPLIT_K_COST } else { 0.0 };
        k_blocks as f64 / p as f64 + split
    };
    (1..=most.max(1)).fold(1, |best, p| if time(p) < time(best) { p } else { best })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::test_devices::{occupancy, A100, H200};

    /// The shared-tail rule as `FusedGemm::workspace_len`'s docs and docs/TILING.md state it
    /// ("at least 8 full waves …, tiles of at least 48 k-blocks (K ≥ 1536) and a last wave at
    /// most 3/5 full"): a change of the constants must change those words.
    #[test]
    fn the_documented_shared_tail_rule_is_the_constants() {
        assert_eq!((STREAM_K_MIN_WAVES, STREAM_K_TAIL_MIN_BLOCKS, STREAM_K_TAIL_MAX_FILL), (8, 48, (3, 5)));
        assert_eq!(STREAM_K_TAIL_MIN_BLOCKS * crate::sys::GE_SM90_PINGPONG_128X128_TILE_K as u64, 1536);
        let docs = concat!(include_str!("mod.rs"), include_str!("../../docs/TILING.md"));
        for words in ["at least 8 full waves", "at least 48 k-blocks (K ≥ 1536)", "most 3/5 full"] {
            assert!(docs.contains(words) || docs.replace('\n', " ").contains(words), "{words}");
        }
    }

    fn shape(m: usize, n: usize, k: usize) -> Shape {
        Shape { m, n, k }
    }

    #[test]
    fn split_k_cuts_tma_tiles_into_whole_parts() {
        let (d, o) = (H200, occupancy(&H200));
        let pp = Kernel::Sm90Pingpong128x128SmemA;
        // M = 1: 32 tiles of 128×128, 4 CTAs each, at least 8 k-blocks per CTA.
        assert_eq!(plan(&d, &o, pp, shape(1, 4096, 4096), usize::MAX), Some(StreamK { ctas: 128, tiles: 32 }));
        // 15 tiles × 16 k-blocks: 2 parts each.
        assert_eq!(plan(&d, &o, pp, shape(300, 520, 512), usize::MAX), Some(StreamK { ctas: 30, tiles: 15 }));
        // Few tiles of 128×128, moderate K: parts of at least 16 k-blocks once there are more
        // than 4 (6 tiles × 96 k-blocks: 6 parts, not the 12 that 8 k-blocks a part would allow).
        assert_eq!(plan(&d, &o, pp, shape(128, 768, 3072), usize::MAX), Some(StreamK { ctas: 36, tiles: 6 }));
        // 64×64 tiles, either build (twins plan alike), by the time model: 12 tiles × 96
        // k-blocks in 5 parts; 16 × 64 in 4; 16 × 32 unsplit; 12 × 256 in 8, not the 11 a wave
        // would allow.
        for p64 in [Kernel::Sm90Pingpong64x64SmemA, Kernel::Sm90Pingpong64x64RmemA] {
            assert_eq!(plan(&d, &o, p64, shape(64, 768, 3072), usize::MAX), Some(StreamK { ctas: 60, tiles: 12 }));
            assert_eq!(plan(&d, &o, p64, shape(64, 1024, 2048), usize::MAX), Some(StreamK { ctas: 64, tiles: 16 }));
            assert_eq!(plan(&d, &o, p64, shape(64, 1024, 1024), usize::MAX), None);
            assert_eq!(plan(&d, &o, p64, shape(64, 768, 8192), usize::MAX), Some(StreamK { ctas: 96, tiles: 12 }));
        }
        let p64 = Kernel::Sm90Pingpong64x64SmemA;
        // Too little K to split: 15 tiles × 2 k-blocks.
        assert_eq!(plan(&d, &o, pp, shape(300, 520, 64), usize::MAX), None);
        // More than half a wave of tiles: no split.
        assert_eq!(plan(&d, &o, pp, shape(512, 4096, 4096), usize::MAX), None);
        // 64 tiles or more: no split, though half a wave would allow 2 parts (16×4096×4096 in
        // 64×64 tiles, up to 256 k-blocks); 63 tiles still split in 2, and so does a longer K.
        assert_eq!(plan(&d, &o, p64, shape(16, 4096, 4096), usize::MAX), None);
        assert_eq!(plan(&d, &o, p64, shape(16, 4096, 8192), usize::MAX), None);
        assert_eq!(plan(&d, &o, p64, shape(256, 1024, 1024), usize::MAX), None);
        assert_eq!(plan(&d, &o, p64, shape(16, 4032, 4096), usize::MAX), Some(StreamK { ctas: 126, tiles: 63 }));
        assert_eq!(plan(&d, &o, p64, shape(16, 4096, 8193), usize::MAX), Some(StreamK { ctas: 128, tiles: 64 }));
        assert_eq!(plan(&d, &o, p64, shape(1, 4096, 11008), usize::MAX), Some(StreamK { ctas: 128, tiles: 64 }));
        // So many tiles that tickets would not fit their 24 bits: none (2^28 tiles of 64×64,
        // a partial last wave after far more than 8 full ones).
        let big = shape(1 << 20, 1 << 20, 64);
        assert_eq!(plan(&d, &o, Kernel::Sm90Pingpong64x64SmemA, big, usize::MAX), None);
        assert_eq!(plan(&d, &o, Kernel::Sm80Mma64x64Vec4, big, usize::MAX), None);
        // Without room for every partial tile: none.
        let sk = StreamK { ctas: 128, tiles: 32 };
        assert_eq!(sk.len(pp), 128 * 128 * 128 + 2 * (128 + 1));
        assert_eq!(plan(&d, &o, pp, shape(1, 4096, 4096), sk.len(pp) - 1), None);
    }

    #[test]
    fn the_64x64_time_model_picks_what_the_race_measured_fastest() {
        // (k-blocks, most parts allowed (wave / tiles, k-blocks / 8), fastest measured, the
        // model's pick): docs/BENCHMARKS.md, "Split-K of the 64×64 tiles, again". Where the two
        // differ, the pick measured within 3 % of the fastest.
        for (k_blocks, most, fastest, pick) in [
            (24, 2, 1, 1),   // 64×3072×768 and 32×3072×768: 48 tiles
            (32, 4, 1, 1),   // 64×1024×1024 (16 tiles), 128×1024×1024 (32), 128×768×1024 (24)
            (48, 6, 4, 4),   // 64×1024×1536
            (64, 8, 4, 4),   // 64×1024×2048
            (64, 4, 4, 4),   // 128×1024×2048 (32 tiles: 3 parts within 0.1 %)
            (96, 11, 5, 5),  // 64×768×3072
            (96, 8, 5, 5),   // 32×1024×3072 (16 tiles; raced again with 3, 4 and 5 parts: 5 fastest)
            (128, 16, 7, 6), // 64×512×4096 (8 tiles; 6 parts 1.03× the fastest)
            (128, 11, 5, 6), // 64×768×4096 (12 tiles; 6 parts 1.01× the fastest)
        ] {
            assert_eq!(
                tile_64x64_parts(k_blocks, most),
                pick,
                "{k_blocks} k-blocks, at most {most} parts (fastest measured: {fastest})"
            );
        }
        // The model's own boundary, between the raced 32 k-blocks (unsplit) and 48 (4 parts):
        // 38 k-blocks stay whole, 40 go in 3 (13.3 + 3.8 · 2 + 18 = 38.9 < 40).
        assert_eq!(tile_64x64_parts(38, 8), 1);
        assert_eq!(tile_64x64_parts(40, 8), 3);
        // Never more than allowed, and at least one part.
        assert_eq!(tile_64x64_parts(1000, 3), 3);
        assert_eq!(tile_64x64_parts(1000, 0), 1);
        assert_eq!(tile_64x64_parts(0, 8), 1);
    }

    #[test]
    fn launch_numbers_are_distinct_and_fit_their_bits() {
        let numbers: Vec<u64> = (0..1000).map(|_| next_launch()).collect();
        let mut sorted = numbers.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), numbers.len(), "a launch number repeated");
        assert!(numbers.iter().all(|&l| (1..1 << crate::sys::GE_STREAM_K_LAUNCH_BITS).contains(&l)), "{numbers:?}");
        // Tagged into the ticket word, a launch number leaves the ticket bits to the count.
        assert_eq!(crate::sys::GE_STREAM_K_LAUNCH_BITS + crate::sys::GE_STREAM_K_TICKET_BITS, 64);
    }

    #[test]
    fn launch_numbers_cycle_through_1_to_2_pow_40_minus_1_from_any_start() {
        let last = (1u64 << crate::sys::GE_STREAM_K_LAUNCH_BITS) - 1;
        // The ends of the range, and the wrap back to 1 (never 0, never 2^40).
        assert_eq!(launch_number(0, 0), 1);
        assert_eq!(launch_number(last - 1, 0), last);
        assert_eq!(launch_number(last - 1, 1), 1);
        assert_eq!(launch_number(last, 0), 1);
        // A start near 2^64 wraps around u64 without leaving the range.
        for (start, count) in [(u64::MAX, 0), (u64::MAX, 1), (u64::MAX - 3, 7), (u64::MAX / 2, u64::MAX / 2)] {
            assert!((1..=last).contains(&launch_number(start, count)), "{start} + {count}");
        }
        // Consecutive counts give consecutive numbers (mod the range): none repeats before 2^40 − 1 launches.
        let start = 0x1234_5678_9abc_def0;
        let first = launch_number(start, 0);
        for count in [1u64, 2, 1000, last - 1] {
            assert_eq!(launch_number(start, count), (first - 1 + count) % last + 1, "{count}");
        }
        assert_eq!(launch_number(start, last), first, "the cycle is 2^40 − 1 long");
    }

    #[test]
    fn no_wave_shares_nothing() {
        for family in [Family::MmaSync, Family::TmaWgmma] {
            // A wave of 0 (no CTA of the kernel fits) shares nothing and divides nothing.
            assert!(!shares_last_wave(family, 1000, 0, 128));
            assert!(!shares_last_wave(family, 0, 0, 128));
            // 8 full waves and one tile: shared; 7 and a tile, or 8 exactly: not.
            assert!(shares_last_wave(family, 8 * 132 + 1, 132, 128));
            assert!(!shares_last_wave(family, 7 * 132 + 1, 132, 128));
            assert!(!shares_last_wave(family, 8 * 132, 132, 128));
        }
    }

    #[test]
    fn tma_kernels_share_only_the_tails_of_long_tiles_and_not_too_full_waves() {
        let tma = Family::TmaWgmma;
        // 48 k-blocks (K = 1536) or more: shared; 47 (K = 1504) or fewer: not. The mma.sync
        // kernels keep sharing short tiles.
        assert!(shares_last_wave(tma, 8 * 66 + 33, 66, 48));
        assert!(!shares_last_wave(tma, 8 * 66 + 33, 66, 47));
        assert!(!shares_last_wave(tma, 8 * 66 + 33, 66, 24));
        assert!(shares_last_wave(Family::MmaSync, 8 * 66 + 33, 66, 2));
        // A last wave 3/5 full or less: shared; fuller: not (the mma.sync kernels: shared).
        assert!(shares_last_wave(tma, 8 * 5 + 3, 5, 128));
        assert!(!shares_last_wave(tma, 8 * 5 + 4, 5, 128));
        assert!(shares_last_wave(Family::MmaSync, 8 * 5 + 4, 5, 128));
        assert!(shares_last_wave(tma, 8 * 66 + 1, 66, 128), "a thin tail");
    }

    #[test]
    fn tickets_bound_the_tiles_that_stream_k_takes() {
        // The ticket word counts tiles plus a wave of CTAs in 24 bits: a shape just inside that
        // is planned, one tile more is not. 64×64 tiles of mma.sync in one column of tiles.
        let (d, o) = (H200, occupancy(&H200));
        let k = Kernel::Sm80Mma64x64Vec4;
        let wave = o.wave(&d, k) as u64;
        let limit = 1u64 << crate::sys::GE_STREAM_K_TICKET_BITS;
        let tiles = limit - wave - 1;
        assert!(tiles % wave != 0, "the test needs a partial last wave");
        let at = |t: u64| shape(64 * t as usize, 64, 64);
        assert!(plan(&d, &o, k, at(tiles), usize::MAX).is_some());
        assert_eq!(plan(&d, &o, k, at(tiles + 1), usize::MAX), None);
    }

    #[test]
    fn mma_sync_split_k_gives_each_cta_at_least_8_k_blocks() {
        // 8 tiles of 64×64 on the A100 (a wave of 216 CTAs): K = 2048 is 64 k-blocks, so
        // 8 · 64 / 8 = 64 CTAs, not a wave; K = 512, 16 CTAs; K = 256 gives 8 CTAs, no more
        // than the tiles: none.
        let (d, o) = (A100, occupancy(&A100));
        let k = Kernel::Sm80Mma64x64Vec4;
        assert_eq!(plan(&d, &o, k, shape(128, 256, 2048), usize::MAX), Some(StreamK { ctas: 64, tiles: 8 }));
        assert_eq!(plan(&d, &o, k, shape(128, 256, 512), usize::MAX), Some(StreamK { ctas: 16, tiles: 8 }));
        assert_eq!(plan(&d, &o, k, shape(128, 256, 256), usize::MAX), None);
    }

    #[test]
    fn a_partial_last_wave_is_shared_after_eight_full_ones() {
        let (d, o) = (H200, occupancy(&H200));
        let pp = Kernel::Sm90Pingpong128x128SmemA;
        // 4096 tiles: 31 waves of 132 and 4 tiles, under a quarter wave: shared with the wave before.
        assert_eq!(plan(&d, &o, pp, shape(16384, 4096, 4096), usize::MAX), Some(StreamK { ctas: 132, tiles: 136 }));
        // 2048 tiles: 15 waves and 68 tiles: those 68 alone.
        assert_eq!(plan(&d, &o, pp, shape(8192, 4096, 4096), usize::MAX).map(|s| s.tiles), Some(68));
        // 7 waves (4096³), or whole waves only: none.
        assert_eq!(plan(&d, &o, pp, shape(4096, 4096, 4096), usize::MAX), None);
        assert_eq!(plan(&d, &o, pp, shape(132 * 128, 8 * 128, 64), usize::MAX), None);
        // The ping-pong cluster kernel on 8192×3072: 768 cluster tiles = 11 waves of 66 and 42
        // (64 % full): not shared at any K. On 16384×3072: 23 waves and 18 (27 % full): shared
        // from K = 1536 (48 k-blocks) on, not at K = 768 or 1504.
        let ppc = Kernel::Sm90Pingpong128x128Cluster2SmemA;
        for k in [768, 4096] {
            assert_eq!(plan(&d, &o, ppc, shape(8192, 3072, k), usize::MAX), None, "K = {k}");
        }
        assert_eq!(plan(&d, &o, ppc, shape(16384, 3072, 768), usize::MAX), None);
        assert_eq!(plan(&d, &o, ppc, shape(16384, 3072, 1504), usize::MAX), None);
        assert_eq!(plan(&d, &o, ppc, shape(16384, 3072, 1536), usize::MAX), Some(StreamK { ctas: 66, tiles: 18 }));
    }

    #[test]
    fn cluster_and_cooperative_kernels_count_clusters_and_parts() {
        let (d, o) = (H200, occupancy(&H200));
        let reference = shape(16384, 4096, 4096);
        // Cooperative 128×256: 2048 tiles = 15 waves and 68; two ready words per CTA (one per consumer).
        let k = Kernel::Sm90Cooperative128x256SmemA;
        let sk = plan(&d, &o, k, reference, usize::MAX).unwrap();
        assert_eq!((sk, sk.len(k)), (StreamK { ctas: 132, tiles: 68 }, 132 * 128 * 256 + 2 * (132 * 2 + 1)));
        // In 2-CTA clusters: 1024 cluster tiles = 15 waves of 66 clusters and 34; a slot of two
        // 128×256 tiles per cluster, a ready word per (cluster, CTA, consumer).
        let k = Kernel::Sm90Cooperative128x256Cluster2SmemA;
        let sk = plan(&d, &o, k, reference, usize::MAX).unwrap();
        assert_eq!((sk, sk.len(k)), (StreamK { ctas: 66, tiles: 34 }, 66 * 2 * 128 * 256 + 2 * (66 * 2 * 2 + 1)));
        // Ping-pong clusters: 2048 cluster tiles = 31 waves of 66 and 2: shared with the wave before.
        let k = Kernel::Sm90Pingpong128x128Cluster2SmemA;
        let sk = plan(&d, &o, k, reference, usize::MAX).unwrap();
        assert_eq!((sk, sk.len(k)), (StreamK { ctas: 66, tiles: 68 }, 66 * 2 * 128 * 128 + 2 * (66 * 2 + 1)));
        // Split-K in clusters: M = 1 has 16 cluster tiles of 256×256, each shared by 4 clusters.
        let k = Kernel::Sm90Cooperative128x256Cluster2SmemA;
        assert_eq!(plan(&d, &o, k, shape(1, 4096, 4096), usize::MAX), Some(StreamK { ctas: 64, tiles: 16 }));
        // No cluster fits: no wave, no stream-K.
        let none = Occupancy { max_active_clusters: 0, ..o };
        assert_eq!(plan(&d, &none, k, reference, usize::MAX), None);
    }

    #[test]
    fn mma_sync_kernels_count_resident_ctas() {
        let s = shape(16384, 4096, 4096);
        let (d, o) = (H200, occupancy(&H200));
        // 2048 tiles of 128×256, one CTA per SM: 15 waves and 68 tiles.
        let k = Kernel::Sm80Mma128x256Vec4Trunc;
        let sk = plan(&d, &o, k, s, usize::MAX).unwrap();
        assert_eq!((sk, sk.len(k)), (StreamK { ctas: 132, tiles: 68 }, 132 * 128 * 256 + 2 * (132 + 1)));
        // 4096 tiles of 128×128, two CTAs per SM: waves of 264, 15 of them and 136 tiles.
        assert_eq!(
            plan(&d, &o, Kernel::Sm80Mma128x128Vec4Trunc, s, usize::MAX),
            Some(StreamK { ctas: 264, tiles: 136 })
        );
        // Split-K on the A100: 128 tiles of 64×64, 128 k-blocks, two CTAs per SM: 216 CTAs.
        let (d, o) = (A100, occupancy(&A100));
        assert_eq!(
            plan(&d, &o, Kernel::Sm80Mma64x64Vec4, shape(128, 4096, 4096), usize::MAX),
            Some(StreamK { ctas: 216, tiles: 128 })
        );
        // K = 0: nothing to share.
        assert_eq!(plan(&d, &o, Kernel::Sm80Mma64x64Vec4, shape(128, 4096, 0), usize::MAX), None);
    }
}
