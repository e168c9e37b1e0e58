//! Which kernel a call runs: the policy ([`Dispatch`], the rounding asked for), the preference
//! table measured on the H200 (docs/TILING.md has the rules, docs/BENCHMARKS.md the numbers),
//! and the [`Plan`] that follows: grid, repacks, stream-K and the workspace layout.

use super::plan::Plan;
use super::shape::{Shape, Strided};
use super::validate::MAX_DIM;
use super::weight::WeightForm;
use super::workspace::{repack_len, WorkspaceLayout};
use super::{skinny, stream_k};
use crate::device::DeviceInfo;
use crate::error::{Error, Result};
use crate::kernels::catalogue::Family;
use crate::kernels::loaded::{unsupported, Occupancy};
use crate::kernels::{Kernel, Precision};

/// How [`crate::FusedGemm`] picks a kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dispatch {
    /// The fastest kernel that can run the call and gives the precision asked for or a more
    /// accurate one (a `Tf32Truncated` handle may get `Tf32`: [`crate::FusedGemm::with_precision`]);
    /// docs/TILING.md has the rules.
    #[default]
    Auto,
    /// Exactly this kernel; a call it cannot run fails with [`Error::KernelUnavailable`]. Its
    /// [`Plan::precision`] says how it rounded.
    Force(Kernel),
}

/// A validated call as dispatch sees it: its shape, where X and W are, the form of W's values
/// when it is a prepared weight (128-byte rows; `None`: the caller's W), the f32 length of
/// the workspace (0 without one), and whether its epilogue is the seed form's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Call {
    pub shape: Shape,
    pub x: Strided,
    pub w: Strided,
    pub w_prepared: Option<WeightForm>,
    pub workspace: usize,
    pub epilogue: EpilogueKind,
}

/// The store paths of the sm_90 kernels (docs/EPILOGUE.md, "The epilogue in the kernels"), as
/// far as dispatch cares: the rolled loop of the activations and the residual costs more than
/// the seed's unrolled register path, and only a ping-pong kernel hides that cost behind its
/// other consumer's mainloop (the cooperative kernels run their epilogues while the tensor
/// cores wait). Plain Linear and ReLU without a residual take the seed's unrolled store where
/// out has a tensor map, so they cost what the seed form costs on every kernel and are planned
/// as it is (docs/BENCHMARKS.md, "Epilogue forms", "On an H100"). The rolled forms take the
/// ping-pong, at short K the one without a cluster ([`Size::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EpilogueKind {
    /// The seed's unrolled store: `v·s + v` without a residual, or plain Linear or ReLU without
    /// one where out's rows take a tensor map.
    Unrolled,
    /// The rolled loop: any other activation, any residual, or plain Linear or ReLU storing
    /// from registers.
    Rolled,
}

/// Whether Auto may plan `s` differently for [`EpilogueKind::Rolled`] than for the seed form:
/// where the two get different sizes (the kernels follow from the size, the rounding and the
/// operands' alignment, which both share).
pub(crate) fn epilogue_may_change_plan(s: Shape, device: &DeviceInfo, occupancy: &Occupancy) -> bool {
    Size::of(s, EpilogueKind::Unrolled, device, occupancy) != Size::of(s, EpilogueKind::Rolled, device, occupancy)
}

impl EpilogueKind {
    /// The store path `epilogue` takes on the sm_90 kernels; `out_tma`: whether out's rows take
    /// a tensor map (`Strided::rows_aligned`, the rule of `Plan::for_out`).
    pub(crate) fn of<M>(epilogue: &crate::Epilogue<M>, out_tma: bool) -> EpilogueKind {
        use crate::Activation::{Identity, Relu, ScaleAdd};
        match (epilogue.activation, &epilogue.residual) {
            (ScaleAdd(_), None) => EpilogueKind::Unrolled,
            (Identity | Relu, None) if out_tma => EpilogueKind::Unrolled,
            _ => EpilogueKind::Rolled,
        }
    }
}

/// What the caller asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    pub dispatch: Dispatch,
    pub precision: Precision,
}

/// The rounding a new [`crate::FusedGemm`] gives, on every device: to nearest, as cuBLAS's TF32
/// GEMM (and PyTorch with TF32 on) does. Truncation is an explicit opt-in.
pub(crate) fn default_precision(_device: &DeviceInfo) -> Precision {
    Precision::Tf32
}

/// Least waves of [`Kernel::Sm90Cooperative128x256Cluster2SmemA`]'s 256×256 cluster tiles for which
/// Auto prefers it to the ping-pong: it moves the fewest bytes per FLOP and so holds the highest
/// clock under the power cap, but with one or two waves its larger tile quantizes worse
/// (docs/BENCHMARKS.md, "Tuned constants").
const LARGE_WAVES: u64 = 3;

/// Most K for which the 128×128 ping-pong cluster kernel runs where the cooperative cluster
/// kernel's waves would allow it: with few k-blocks a tile, the ping-pong's overlap of one
/// consumer's epilogue with the other's mainloop is worth more than the cooperative tile's
/// bytes per FLOP (docs/BENCHMARKS.md, "Tuned constants").
const LARGE_SHORT_K: usize = 1024;

/// Below this many multiply-adds, repacking (two extra launches) costs more than it saves
/// (docs/BENCHMARKS.md, "Tuned constants").
const REPACK_MIN_MACS: u64 = 1 << 27;

/// How large a problem is, for the preference table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Size {
    /// At least [`LARGE_WAVES`] waves of the cooperative cluster kernel's cluster tiles.
    Large,
    /// As many, but K at most [`LARGE_SHORT_K`], or a last wave that the ping-pong cluster
    /// kernel's half-size cluster tiles fill better (see [`ragged`]), or an epilogue other than
    /// the seed's store ([`EpilogueKind::Rolled`]: the ping-pong hides its cost, the cooperative
    /// does not).
    LargePingpong,
    /// At least one wave of 128×128 tiles; also a large problem with K at most
    /// [`LARGE_SHORT_K`] and a rolled epilogue (see [`Size::of`]).
    Medium,
    /// As many, but a last wave that 64×128 tiles fill better (see [`ragged`]), where stream-K
    /// would not share the 64×128 tiles' own last wave (fewer than 8 waves of them, short
    /// tiles, or a last wave over 3/5 full: `stream_k::shares_last_wave`).
    Medium64x128,
    /// Fewer 128×128 tiles than SMs, but more than one wave of 64×128 tiles.
    Small,
    /// One wave of 64×128 tiles, but more than one of 64×64.
    Small64x128,
    /// One wave of 64×64 tiles.
    Small64x64,
}

impl Size {
    fn of(s: Shape, epilogue: EpilogueKind, device: &DeviceInfo, occupancy: &Occupancy) -> Size {
        let sms = device.sm_count as u64;
        let one_wave_of = |k: Kernel| s.tiles(k) <= sms;
        let clusters = occupancy.max_active_clusters as u64;
        let cooperative = Kernel::Sm90Cooperative128x256Cluster2SmemA;
        if clusters > 0 && s.cluster_tiles(cooperative) >= LARGE_WAVES * clusters {
            if epilogue == EpilogueKind::Rolled && s.k <= LARGE_SHORT_K {
                // The 128×128 ping-pong without a cluster: at short K a rolled form's epilogue
                // outlasts the other consumer's mainloop, and there the cluster twin (whose two
                // CTAs share each stage's loads, so the later one holds up both) ran every rolled
                // form slower, at long K faster (docs/BENCHMARKS.md, "Epilogue forms").
                Size::Medium
            } else if epilogue == EpilogueKind::Rolled
                || s.k <= LARGE_SHORT_K
                || ragged(
                    s,
                    cooperative,
                    Kernel::Sm90Pingpong128x128Cluster2SmemA,
                    clusters,
                    PINGPONG_CLUSTER_HALF_COST,
                )
            {
                Size::LargePingpong
            } else {
                Size::Large
            }
        } else if s.tiles(Kernel::Sm80Mma128x128Vec4) >= sms {
            // Only while the 64×128 tiles' own last wave is not shared: with a shared tail the
            // 64×128 ping-pong lost to the 128×128 one, for a reason not yet understood
            // (docs/BENCHMARKS.md, "Still open").
            let half = Kernel::Sm90Pingpong64x128SmemA;
            if !stream_k::shares_last_wave(half.family(), s.tiles(half), sms, s.k_blocks(half))
                && ragged(s, Kernel::Sm90Pingpong128x128SmemA, half, sms, PINGPONG_64X128_HALF_COST)
            {
                Size::Medium64x128
            } else {
                Size::Medium
            }
        } else if one_wave_of(Kernel::Sm90Pingpong64x64SmemA) {
            Size::Small64x64
        } else if one_wave_of(Kernel::Sm90Pingpong64x128SmemA) {
            Size::Small64x128
        } else {
            Size::Small
        }
    }
}

/// A half tile's time relative to half a big tile's, at the same K: the 256×128 ping-pong
/// cluster tile against the 256×256 cooperative one, and the 64×128 ping-pong tile against the
/// 128×128 one. As fractions (numerator, denominator).
const PINGPONG_CLUSTER_HALF_COST: (u64, u64) = (1, 1);
const PINGPONG_64X128_HALF_COST: (u64, u64) = (8, 7);

/// Whether the (cluster) tiles of kernel `big` on `s`, each twice the area of one of kernel
/// `half`'s that cover the same output, take longer in waves of `wave` than the half tiles, each
/// of which costs `cost` of half a big one: the big tiles' last wave is ragged where the half
/// tiles' is not (4096×768 takes 2 waves of 128×128 tiles on 132 SMs, 192 tiles, but 3 half
/// waves' worth of 64×128 ones, 384 tiles). Not when stream-K shares the big tiles' last wave
/// (`stream_k::shares_last_wave`), which evens it out. The costs are measured: the ping-pong
/// cluster tile costs about what half a cooperative one does, and a tie goes to the cooperative
/// tile; the 64×128 tile costs a little more than half a 128×128 one (docs/BENCHMARKS.md,
/// "Tuned constants").
fn ragged(s: Shape, big: Kernel, half: Kernel, wave: u64, cost: (u64, u64)) -> bool {
    let (big_tiles, half_tiles) = (s.cluster_tiles(big), s.cluster_tiles(half));
    !stream_k::shares_last_wave(big.family(), big_tiles, wave, s.k_blocks(big))
        && 2 * big_tiles.div_ceil(wave) * cost.1 > half_tiles.div_ceil(wave) * cost.0
}

/// Auto's kernels, fastest first: on sm_90 the TMA kernels (the cooperative cluster kernel on
/// large problems, or its ping-pong twin where K is short or the last wave ragged; the 128×128
/// ping-pong on medium ones, or the 64×128 one where the last wave is ragged; on small ones the
/// 64-row ping-pongs while their tiles fit in one wave), then mma.sync, 128×256 before 128×128 (which devices
/// without 144 KiB of shared memory per block fall through to). Each rounding has its own
/// builds; the first that can run the call runs. The scalar-load kernels (any shape) only round
/// to nearest: they are load-bound, so rounding costs them nothing.
fn preference(size: Size, aligned_rows: bool, precision: Precision) -> &'static [Kernel] {
    use Kernel::*;
    use Size::*;
    match (size, aligned_rows, precision) {
        (Large, true, Precision::Tf32Truncated) => &[
            Sm90Cooperative128x256Cluster2SmemA,
            Sm90Pingpong128x128SmemA,
            Sm80Mma128x256Vec4Trunc,
            Sm80Mma128x128Vec4Trunc,
            Sm80Mma64x64Vec4,
        ],
        (LargePingpong, true, Precision::Tf32Truncated) => &[
            Sm90Pingpong128x128Cluster2SmemA,
            Sm90Pingpong128x128SmemA,
            Sm80Mma128x256Vec4Trunc,
            Sm80Mma128x128Vec4Trunc,
            Sm80Mma64x64Vec4,
        ],
        (Medium, true, Precision::Tf32Truncated) => {
            &[Sm90Pingpong128x128SmemA, Sm80Mma128x256Vec4Trunc, Sm80Mma128x128Vec4Trunc, Sm80Mma64x64Vec4]
        }
        (Medium64x128, true, Precision::Tf32Truncated) => {
            &[Sm90Pingpong64x128SmemA, Sm80Mma128x256Vec4Trunc, Sm80Mma128x128Vec4Trunc, Sm80Mma64x64Vec4]
        }
        (Small64x64, true, Precision::Tf32Truncated) => &[Sm90Pingpong64x64SmemA, Sm80Mma64x64Vec4],
        (Small64x128, true, Precision::Tf32Truncated) => &[Sm90Pingpong64x128SmemA, Sm80Mma64x64Vec4],
        (Small, true, Precision::Tf32Truncated) => &[Sm90Pingpong128x128SmemA, Sm80Mma64x64Vec4],
        // Tf32x3: three times the tensor-core work per byte, so the 128×128 cooperative from one
        // wave of its tiles on, the 64×128 ping-pong below; the mma.sync kernels split both operands
        // themselves and take any W.
        (Large | LargePingpong | Medium | Medium64x128, true, Precision::Tf32x3) => {
            &[Sm90Cooperative128x128Tf32x3, Sm80Mma64x64Vec4Tf32x3, Sm80Mma64x64ScalarTf32x3]
        }
        (_, true, Precision::Tf32x3) => &[Sm90Pingpong64x128Tf32x3, Sm80Mma64x64Vec4Tf32x3, Sm80Mma64x64ScalarTf32x3],
        (_, false, Precision::Tf32x3) => &[Sm80Mma64x64ScalarTf32x3],
        // Tf32 on sm_90: the kernels that feed both operands from shared memory, launched with
        // TF32 tensor maps so that the TMA rounds them on load (Plan::round_on_load): the
        // truncating kernels' speed at cuBLAS's rounding, any W (no rounded copy needed). The
        // kernels that round X in registers (`RmemA`) stall their own wgmma issue, most on
        // medium problems (docs/notebook/BENCHMARKS-notebook.md, "3xTF32 (`Precision::Tf32x3`)
        // and the medium-size rounding kernel"), so they run only when forced. Off sm_90, mma.sync rounding in registers.
        (Large, true, _) => &[
            Sm90Cooperative128x256Cluster2SmemA,
            Sm90Pingpong128x128SmemA,
            Sm80Mma128x256Vec4,
            Sm80Mma128x128Vec4,
            Sm80Mma64x64Vec4,
        ],
        (LargePingpong, true, _) => &[
            Sm90Pingpong128x128Cluster2SmemA,
            Sm90Pingpong128x128SmemA,
            Sm80Mma128x256Vec4,
            Sm80Mma128x128Vec4,
            Sm80Mma64x64Vec4,
        ],
        (Medium, true, _) => &[Sm90Pingpong128x128SmemA, Sm80Mma128x256Vec4, Sm80Mma128x128Vec4, Sm80Mma64x64Vec4],
        (Medium64x128, true, _) => &[Sm90Pingpong64x128SmemA, Sm80Mma128x256Vec4, Sm80Mma128x128Vec4, Sm80Mma64x64Vec4],
        (Small64x64, true, _) => &[Sm90Pingpong64x64SmemA, Sm80Mma64x64Vec4],
        (Small64x128, true, _) => &[Sm90Pingpong64x128SmemA, Sm80Mma64x64Vec4],
        (Small, true, _) => &[Sm90Pingpong128x128SmemA, Sm80Mma64x64Vec4],
        (Large | LargePingpong | Medium | Medium64x128, false, _) => {
            &[Sm80Mma128x256Scalar, Sm80Mma128x128Scalar, Sm80Mma64x64Scalar]
        }
        (_, false, _) => &[Sm80Mma64x64Scalar],
    }
}

/// Most elements of W (N·K) for which Auto runs a skinny kernel, by the X rows it holds: up to
/// 3·2²² (48 MiB) for M ≤ 8 and 2²² for M ≤ 16. Beyond them the TMA kernels stream W faster:
/// the skinny kernels' gain is latency, on a W that stays in L2 (docs/BENCHMARKS.md, "Tuned constants").
const SKINNY_MAX_W: [(usize, u64); 2] = [(8, 3 << 22), (16, 1 << 22)];

/// [`SKINNY_MAX_W`]'s M ≤ 8 limit for `Tf32x3`, whose TMA alternative (the 64×128 kernel, three
/// wgmmas per k-step) was not raced against the skinny build on W past 2²²: the limit it was
/// chosen with (docs/BENCHMARKS.md, "Tuned constants").
const SKINNY_MAX_W_TF32X3_ROWS8: u64 = 1 << 24;

/// Auto's skinny kernel for a call, tried before [`preference`]'s (sm_90, M ≤ 16, a W small
/// enough: [`SKINNY_MAX_W`]); empty when none applies. Each precision has its build.
fn skinny_preference(s: Shape, device: &DeviceInfo, precision: Precision) -> &'static [Kernel] {
    use Kernel::*;
    let w = (s.n as u64).saturating_mul(s.k as u64);
    let max_w = |rows: usize, limit: u64| {
        if rows == 8 && precision == Precision::Tf32x3 {
            SKINNY_MAX_W_TF32X3_ROWS8
        } else {
            limit
        }
    };
    let Some(&(rows, _)) = SKINNY_MAX_W.iter().find(|&&(rows, limit)| s.m <= rows && w <= max_w(rows, limit)) else {
        return &[];
    };
    if !device.is_hopper() {
        return &[];
    }
    match (rows, precision) {
        (8, Precision::Tf32Truncated) => &[Sm90Skinny8x16Trunc],
        (8, Precision::Tf32x3) => &[Sm90Skinny8x16Tf32x3],
        (8, _) => &[Sm90Skinny8x16],
        (_, Precision::Tf32Truncated) => &[Sm90Skinny16x16Trunc],
        (_, Precision::Tf32x3) => &[Sm90Skinny16x16Tf32x3],
        (_, _) => &[Sm90Skinny16x16],
    }
}

/// Most rows of X for which Auto runs a GEMV kernel on sm_90: the CUDA cores' FMAs (M per W
/// element) keep up with DRAM while M is this small (docs/BENCHMARKS.md, "Tuned constants").
const GEMV_MAX_M: usize = 4;

/// The elements of W (N·K) between which Auto leaves the GEMV kernels out: from 2²⁴ (64 MiB,
/// more than the H200's 50 MiB of L2) W streams from DRAM on every call, and the GEMV's
/// 512-byte warp loads read it fastest; below 2²² the call is latency-bound and the GEMV's short
/// CTAs finish first. In between, with W resident in L2 across calls, the GEMV lost most of the
/// raced points to the skinny or TMA kernels, so the kernels that ran there before keep it
/// (docs/BENCHMARKS.md, "Tuned constants").
const GEMV_L2_RESIDENT_W: (u64, u64) = (1 << 22, 1 << 24);

/// Auto's GEMV kernel for a call, tried before [`skinny_preference`]'s (sm_90, M ≤
/// [`GEMV_MAX_M`], W outside [`GEMV_L2_RESIDENT_W`]); empty when none applies. M = 1 takes the
/// 1-row builds: 2 rows of W and 8 warps per CTA once K fills their 2048-wide tile, else 4 rows
/// and 4 warps (a short K leaves most of the wide tile's lanes idle). 2 ≤ M ≤ 4 takes the 4-row
/// build once K fills its 1024-wide tile; with a shorter K the skinny kernel was faster. Each
/// precision has its build.
fn gemv_preference(s: Shape, device: &DeviceInfo, precision: Precision) -> &'static [Kernel] {
    use Kernel::*;
    let w = (s.n as u64).saturating_mul(s.k as u64);
    let (low, high) = GEMV_L2_RESIDENT_W;
    let l2_resident = w >= low && w < high;
    if !device.is_hopper()
        || s.m > GEMV_MAX_M
        || l2_resident
        || (s.m > 1 && s.k < crate::sys::GE_GEMV_4X4_TILE_K as usize)
    {
        return &[];
    }
    let long_k = s.k >= crate::sys::GE_GEMV_1X2_TILE_K as usize;
    match (s.m, long_k, precision) {
        (1, true, Precision::Tf32Truncated) => &[Sm80Gemv1x2Trunc],
        (1, true, Precision::Tf32x3) => &[Sm80Gemv1x2Tf32x3],
        (1, true, _) => &[Sm80Gemv1x2],
        (1, false, Precision::Tf32Truncated) => &[Sm80Gemv1x4Trunc],
        (1, false, Precision::Tf32x3) => &[Sm80Gemv1x4Tf32x3],
        (1, false, _) => &[Sm80Gemv1x4],
        (_, _, Precision::Tf32Truncated) => &[Sm80Gemv4x4Trunc],
        (_, _, Precision::Tf32x3) => &[Sm80Gemv4x4Tf32x3],
        (_, _, _) => &[Sm80Gemv4x4],
    }
}

/// Chooses the kernel for a validated, non-empty call and plans its launch. With
/// [`Dispatch::Auto`], the first kernel of [`preference`] that can run it (each list gives
/// `policy.precision`, or for `Tf32Truncated` falls back to rounding kernels); a forced kernel runs as it is, except that a kernel that can round on
/// load ([`Kernel::can_round_on_load`]) does so under a handle asking for at least `Tf32`.
pub(crate) fn select(device: &DeviceInfo, occupancy: &Occupancy, policy: Policy, c: Call) -> Result<Plan> {
    let s = c.shape;
    let (x_ok, w_ok) = (c.x.rows_aligned(s.k), c.w.rows_aligned(s.k));
    // What a kernel would take from the workspace: unaligned operands repacked, and W repacked
    // (rounded, or split) for a kernel that reads W rounded (split) when it is not a weight
    // prepared so. A split weight's big parts are W rounded.
    let w_form = c.w_prepared.unwrap_or(WeightForm::Raw);
    let repacks = |kernel: Kernel| -> (bool, bool) {
        let aligned = kernel.needs_aligned_rows();
        // A prepared weight's rows are whole 128-byte lines, zero past K: what TMA reads, whatever K.
        let w_ok = w_ok || (c.w_prepared.is_some() && kernel.family() == Family::TmaWgmma);
        let w_ready = if kernel.needs_split_w() {
            w_form == WeightForm::Split
        } else {
            !kernel.needs_rounded_w() || w_form != WeightForm::Raw
        };
        (aligned && !x_ok, (aligned && !w_ok) || !w_ready)
    };
    let fits = |kernel: Kernel| {
        let (x, w) = repacks(kernel);
        !(x || w) || (s.k > 0 && repack_len(s, x, w, kernel) <= c.workspace)
    };
    let refusal = |kernel: Kernel| -> Option<&'static str> {
        if let Some(why) = unsupported(kernel, device, occupancy) {
            return Some(why);
        }
        if kernel.precision() == Precision::Tf32x3 && !kernel.needs_split_w() && w_form == WeightForm::Split && s.k > 0
        {
            return Some("this kernel splits a raw W itself and cannot read a split prepared weight (only the sm_90 Tf32x3 kernels can: they need X with 16-byte rows, or a workspace to repack X into)");
        }
        if let Some(rows) = kernel.max_m() {
            if s.m > rows as usize {
                return Some(match (kernel.family(), rows) {
                    (Family::Gemv, 1) => "this GEMV kernel holds all of X in one tile: M must be 1",
                    (Family::Gemv, 4) => "this GEMV kernel holds all of X in one tile: M must be at most 4",
                    (Family::Skinny, 8) => "this skinny kernel holds all of X in one tile: M must be at most 8",
                    (Family::Skinny, 16) => "this skinny kernel holds all of X in one tile: M must be at most 16",
                    _ => "this kernel holds all of X in one tile: M must be at most its tile's rows (Kernel::max_m)",
                });
            }
        }
        match kernel.family() {
            Family::TmaWgmma if s.k == 0 => Some("TMA needs K > 0"),
            Family::TmaWgmma if !fits(kernel) && (!x_ok || !w_ok) => Some("TMA needs K % 4 == 0, 16-byte-aligned x and w, and leading dimensions that are multiples of 4 (or a workspace to repack them)"),
            Family::TmaWgmma if !fits(kernel) && kernel.needs_split_w() => Some("this kernel reads W split into 3xTF32's two parts: pass a weight prepared by a Tf32x3 handle (FusedGemm::prepare_weight) or a workspace to split W into"),
            Family::TmaWgmma if !fits(kernel) => Some("this kernel reads W rounded to TF32: pass a prepared weight (FusedGemm::prepare_weight) or a workspace to round W into"),
            Family::MmaSync | Family::Skinny | Family::Gemv if !fits(kernel) => Some("16-byte loads need K % 4 == 0, 16-byte-aligned x and w, and leading dimensions that are multiples of 4 (or a workspace to repack them)"),
            _ => None,
        }
    };
    let kernel = match policy.dispatch {
        Dispatch::Force(kernel) => match refusal(kernel) {
            Some(reason) => return Err(Error::KernelUnavailable { kernel, reason }),
            None => kernel,
        },
        Dispatch::Auto => {
            // Repacking (two extra launches) does not pay on tiny problems: there, operands that
            // need it go to the scalar-load kernels.
            // A split prepared weight is read by the TMA kernels alone, whatever the size.
            let worth_repacking = s.macs() >= REPACK_MIN_MACS || w_form == WeightForm::Split;
            // On sm_90 the aligned lists start with TMA kernels, which read a prepared W as it is.
            let w_ok = w_ok || (c.w_prepared.is_some() && device.is_hopper());
            let aligned = (x_ok && w_ok) || (s.k > 0 && worth_repacking && fits_any_repack(s, x_ok, w_ok, c.workspace));
            let preferred = preference(Size::of(s, c.epilogue, device, occupancy), aligned, policy.precision);
            let cheap = |kernel: Kernel| {
                let (x, w) = repacks(kernel);
                !(x || w) || worth_repacking
            };
            // A GEMV or skinny kernel only on operands it reads as they are: a repack would move
            // all of W once more, which is all the kernel's time.
            let decoding = gemv_preference(s, device, policy.precision).iter().chain(skinny_preference(
                s,
                device,
                policy.precision,
            ));
            let decoding = decoding.filter(|&&k| repacks(k) == (false, false));
            *decoding.chain(preferred).find(|k| refusal(**k).is_none() && cheap(**k)).ok_or_else(|| {
                Error::KernelUnavailable {
                    kernel: preferred[0],
                    reason: refusal(preferred[0]).unwrap_or("no kernel fits this device"),
                }
            })?
        }
    };
    let spec = kernel.spec();
    let (repack_x, repack_w) = repacks(kernel);
    // Whatever X and W are (raw, repacked, prepared rounded or split), rounded once more by the
    // TMA they are TF32 rounded to nearest: rounding is idempotent, and a split W's big parts
    // (all such a kernel reads of it) are W rounded.
    let round_on_load = kernel.can_round_on_load() && policy.precision != Precision::Tf32Truncated;
    let sk = stream_k::plan(
        device,
        occupancy,
        kernel,
        s,
        c.workspace.saturating_sub(repack_len(s, repack_x, repack_w, kernel)),
    );
    // A skinny kernel's clusters split K; every other kernel's cluster is its table's.
    let cluster = match spec.family {
        Family::Skinny => skinny::split(device, kernel, s),
        _ => spec.cluster_m,
    };
    let grid = match (spec.family, sk) {
        // One cluster per 16 rows of W.
        (Family::Skinny, _) => cluster as u64 * (s.n as u64).div_ceil(spec.tile_n as u64),
        // One CTA per `tile_n` rows of W, each over all of K.
        (Family::Gemv, _) => (s.n as u64).div_ceil(spec.tile_n as u64),
        (Family::TmaWgmma, Some(sk)) => spec.cluster_m as u64 * sk.ctas as u64,
        // One CTA per whole tile, then the stream-K CTAs.
        (Family::MmaSync, Some(sk)) => s.tiles(kernel) - sk.tiles as u64 + sk.ctas as u64,
        (Family::MmaSync, None) => s.tiles(kernel),
        // Persistent: one CTA (cluster) per (cluster) tile, at most a wave of them.
        (Family::TmaWgmma, None) => {
            spec.cluster_m as u64 * s.cluster_tiles(kernel).min(occupancy.wave(device, kernel) as u64)
        }
    };
    if grid > i32::MAX as u64 {
        return Err(Error::DimensionTooLarge {
            what: "output tiles (M/TILE_M · N/TILE_N)",
            value: grid as usize,
            max: MAX_DIM,
        });
    }
    Ok(Plan {
        kernel,
        grid: grid as u32,
        cluster,
        block: spec.threads,
        smem_bytes: spec.smem_bytes,
        repack_x,
        repack_w,
        precision: if round_on_load {
            Precision::Tf32
        } else {
            plan_precision(kernel, repack_x, repack_w, w_form, s.k)
        },
        round_on_load,
        stream_k_tiles: sk.map_or(0, |sk| sk.tiles),
        stream_k_ctas: sk.map_or(0, |sk| sk.ctas),
        tma_store: false,
        workspace: WorkspaceLayout::new(s, repack_x, repack_w, kernel, sk),
    })
}

/// Whether the workspace holds the repack of whichever operands have unaligned rows (as one
/// matrix each: a kernel that reads W split needs twice W's, which `fits` checks per kernel).
fn fits_any_repack(s: Shape, x_ok: bool, w_ok: bool, workspace: usize) -> bool {
    let ld = super::workspace::repacked_ld(s.k);
    (!x_ok as usize) * s.m * ld + (!w_ok as usize) * s.n * ld <= workspace
}

/// What the tensor cores multiplied: the weaker of what X and W each went through. X: split by
/// the Tf32x3 kernels (repacked as it is for them), rounded by the Tf32 ones, else truncated
/// unless a repack rounded it. W: a rounded W (or a split W's big parts, which is what every
/// kernel but those that read W split reads of it) cannot be more than rounded; a raw W is
/// split by the Tf32x3 kernels (or by their repack), rounded by the Tf32 kernels or a repack,
/// else truncated.
/// With K = 0 no product is computed and a split weight's parts are never read.
fn plan_precision(kernel: Kernel, repack_x: bool, repack_w: bool, w_form: WeightForm, depth: usize) -> Precision {
    use Precision::{Tf32, Tf32Truncated, Tf32x3};
    let k = kernel.precision();
    let x = match k {
        Tf32x3 | Tf32 => k,
        _ if repack_x => Tf32,
        _ => Tf32Truncated,
    };
    let w = match (k, repack_w, w_form) {
        (Tf32x3, false, WeightForm::Split) if kernel.needs_split_w() || depth == 0 => Tf32x3,
        (_, _, WeightForm::Rounded | WeightForm::Split) => Tf32,
        (Tf32x3, _, WeightForm::Raw) => Tf32x3,
        (Tf32, _, WeightForm::Raw) | (_, true, WeightForm::Raw) => Tf32,
        (_, false, WeightForm::Raw) => Tf32Truncated,
    };
    let rank = |p: Precision| match p {
        Tf32Truncated => 0,
        Tf32 => 1,
        _ => 2,
    };
    if rank(x) <= rank(w) {
        x
    } else {
        w
    }
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
