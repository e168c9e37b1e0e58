//! Property tests of the host-side planning: `dispatch::select` (kernel, grid, repacks, stream-K,
//! workspace layout) over random devices, policies, shapes, operand addresses and workspace
//! lengths, and `validate` over random extents up to `usize::MAX`. Pure functions: no GPU.

use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;

use super::dispatch::{select, Call, Dispatch, EpilogueKind, Policy};
use super::shape::{Shape, Strided};
use super::stream_k::{partial_tile_len, StreamK};
use super::test_devices::{self, A100, H200, RTX4090};
use super::validate::{validate_operands, validate_shapes, validate_weight, Extent, MAX_DIM, MAX_LD};
use super::weight::WeightForm;
use super::workspace::{repacked_ld, w_parts, Region};
use crate::device::DeviceInfo;
use crate::error::Error;
use crate::kernels::catalogue::{Family, KERNEL_COUNT};
use crate::kernels::loaded::{unsupported, Occupancy};
use crate::kernels::{Kernel, Precision};

const CASES: u32 = 2000;

fn config() -> ProptestConfig {
    ProptestConfig { cases: CASES, failure_persistence: None, ..ProptestConfig::default() }
}

/// A device and what loading the kernels found on it.
#[derive(Clone, Copy, Debug)]
struct Dev {
    info: DeviceInfo,
    occ: Occupancy,
}

fn device() -> impl Strategy<Value = Dev> {
    let fixed = |info: DeviceInfo| Dev { info, occ: test_devices::occupancy(&info) };
    prop_oneof![
        Just(fixed(H200)),
        Just(fixed(A100)),
        Just(fixed(RTX4090)),
        // H200 with any number of clusters (0: the cluster kernels cannot run) and any CTAs per SM.
        (0u32..=66, proptest::collection::vec(1u32..=4, KERNEL_COUNT)).prop_map(|(clusters, ctas)| {
            let mut occ = Occupancy { max_active_clusters: clusters, ..Occupancy::NONE };
            occ.ctas_per_sm.copy_from_slice(&ctas);
            Dev { info: H200, occ }
        }),
    ]
}

fn precision() -> impl Strategy<Value = Precision> {
    prop_oneof![Just(Precision::Tf32), Just(Precision::Tf32Truncated), Just(Precision::Tf32x3)]
}

/// A prepared weight's form: any, not only the one `prepare_weight` makes for the policy's
/// precision (dispatch must stay sound whatever it is given).
fn weight_form() -> impl Strategy<Value = WeightForm> {
    prop_oneof![Just(WeightForm::Raw), Just(WeightForm::Rounded), Just(WeightForm::Split)]
}

fn dispatch() -> impl Strategy<Value = Dispatch> {
    prop_oneof![
        1 => Just(Dispatch::Auto),
        1 => proptest::sample::select(Kernel::ALL.to_vec()).prop_map(Dispatch::Force),
    ]
}

/// M, N or K: mostly small, or a power of two (and its neighbours) up to 16384, now and then
/// anything up to MAX_DIM.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        5 => 0usize..=300,
        4 => (0u32..=14, -1isize..=1).prop_map(|(e, d)| ((1isize << e) + d).max(0) as usize),
        1 => 0usize..=MAX_DIM,
    ]
}

/// A 16-byte-aligned base, or one misaligned by 4, 8 or 12 bytes.
fn addr() -> impl Strategy<Value = u64> {
    (0u64..1 << 20, prop_oneof![3 => Just(0u64), 1 => Just(4u64), 1 => Just(8u64), 1 => Just(12u64)])
        .prop_map(|(line, off)| 0x7f00_0000_0000 + 16 * line + off)
}

/// How long the workspace is, given the length the plan with an unbounded one uses.
#[derive(Clone, Copy, Debug)]
enum Ws {
    Zero,
    Max,
    Any(usize),
    Below(usize),
    /// The length the unbounded plan uses, plus -1, 0 or +1.
    Needed(i8),
    /// A fraction (in 1/256ths) of what the unbounded plan uses.
    Part(u8),
}

fn ws() -> impl Strategy<Value = Ws> {
    prop_oneof![
        1 => Just(Ws::Zero),
        1 => Just(Ws::Max),
        1 => any::<usize>().prop_map(Ws::Any),
        1 => (0usize..1 << 28).prop_map(Ws::Below),
        3 => (-1i8..=1).prop_map(Ws::Needed),
        1 => any::<u8>().prop_map(Ws::Part),
    ]
}

/// A random call: its device, policy and `Call` (its workspace length still to be resolved
/// from `ws`).
#[derive(Clone, Copy, Debug)]
struct Case {
    dev: Dev,
    policy: Policy,
    call: Call,
    ws: Ws,
}

/// M or N of a call `select` plans: non-empty (callers return before `select` when M or N is 0).
fn nonempty_dim() -> impl Strategy<Value = usize> {
    dim().prop_map(|v| v.max(1))
}

fn case() -> impl Strategy<Value = Case> {
    (
        device(),
        dispatch(),
        precision(),
        (nonempty_dim(), nonempty_dim(), dim()),
        (addr(), addr(), 0usize..=8, 0usize..=8),
        prop_oneof![Just(None), weight_form().prop_map(Some)],
        ws(),
        any::<bool>(),
    )
        .prop_map(|(dev, dispatch, precision, (m, n, k), (xa, wa, xpad, wpad), w_prepared, ws, tidy)| {
            // Half the calls have operands with 16-byte rows (K % 4 == 0, aligned bases, leading
            // dimensions multiples of 4), which random ones rarely all are.
            let (k, xa, wa, xpad, wpad) = if tidy {
                (k / 4 * 4, xa & !15, wa & !15, xpad / 4 * 4, wpad / 4 * 4)
            } else {
                (k, xa, wa, xpad, wpad)
            };
            let policy = Policy { dispatch, precision };
            let shape = Shape { m, n, k };
            // A prepared weight always has rows of whole 128-byte lines (prepare_weight).
            let w = if w_prepared.is_some() {
                Strided { addr: wa & !127, ld: repacked_ld(k) }
            } else {
                Strided { addr: wa, ld: k + wpad }
            };
            let x = Strided { addr: xa, ld: k + xpad };
            let call = Call { shape, x, w, w_prepared, workspace: usize::MAX, epilogue: EpilogueKind::Unrolled };
            Case { dev, policy, call, ws }
        })
}

/// The call with its workspace length: `Needed` and `Part` count from what the plan with an
/// unbounded workspace uses.
fn resolve(c: &Case) -> Call {
    let Case { dev, policy, call, ws } = *c;
    let needed =
        || select(&dev.info, &dev.occ, policy, Call { workspace: usize::MAX, ..call }).map_or(0, |p| p.workspace_len());
    let workspace = match ws {
        Ws::Zero => 0,
        Ws::Max => usize::MAX,
        Ws::Any(v) | Ws::Below(v) => v,
        Ws::Needed(d) => needed().saturating_add_signed(d as isize),
        Ws::Part(f) => (needed() as u128 * f as u128 / 256) as usize,
    };
    Call { workspace, ..call }
}

/// Properties 1–4: select never panics, fails only with the two expected errors, and an Ok plan
/// is consistent with its layout, its kernel and the call.
fn check_plan(c: &Case) -> Result<(), TestCaseError> {
    let (dev, policy, call) = (c.dev, c.policy, resolve(c));
    let s = call.shape;
    let plan = match select(&dev.info, &dev.occ, policy, call) {
        Ok(plan) => plan,
        Err(Error::KernelUnavailable { kernel, .. }) => {
            if let Dispatch::Force(forced) = policy.dispatch {
                prop_assert_eq!(kernel, forced);
            }
            return Ok(());
        }
        Err(Error::DimensionTooLarge { .. }) => return Ok(()),
        Err(e) => return Err(TestCaseError::fail(format!("unexpected error {e:?}"))),
    };
    let k = plan.kernel;
    if let Dispatch::Force(forced) = policy.dispatch {
        prop_assert_eq!(k, forced);
    }

    // 2. The workspace: fits what was given, regions in order, disjoint, inside, of the right size.
    let l = plan.workspace;
    prop_assert!(plan.workspace_len() <= call.workspace, "{} > {}", plan.workspace_len(), call.workspace);
    prop_assert_eq!(l.len, plan.workspace_len());
    let mut end = 0usize;
    for r in [l.x, l.w, l.partials, l.sync].into_iter().flatten() {
        let Region { offset, len } = r;
        prop_assert!(offset >= end, "region {r:?} overlaps the one before (ends at {end})");
        end = offset.checked_add(len).ok_or_else(|| TestCaseError::fail("region end overflows"))?;
        prop_assert!(end <= l.len, "region {r:?} past the workspace ({})", l.len);
    }
    prop_assert_eq!(l.x.is_some(), plan.repack_x);
    prop_assert_eq!(l.w.is_some(), plan.repack_w);
    let ld = repacked_ld(s.k);
    if let Some(x) = l.x {
        prop_assert_eq!(Some(x.len), s.m.checked_mul(ld));
    }
    if let Some(w) = l.w {
        // Both parts for a kernel that reads W split.
        prop_assert_eq!(Some(w.len), s.n.checked_mul(ld).and_then(|l| l.checked_mul(w_parts(k))));
    }
    let sk = plan.stream_k_tiles > 0;
    prop_assert_eq!(sk, plan.stream_k_ctas > 0);
    prop_assert_eq!(sk, l.partials.is_some());
    prop_assert_eq!(sk, l.sync.is_some());
    if sk {
        let s_k = StreamK { ctas: plan.stream_k_ctas, tiles: plan.stream_k_tiles };
        prop_assert_eq!(l.partials.unwrap().len, plan.stream_k_ctas as usize * partial_tile_len(k));
        prop_assert_eq!(l.sync.unwrap().len, 2 * s_k.sync_words(k));
        prop_assert_eq!(l.sync.unwrap().offset % 2, 0, "u64 words 8-byte aligned");
        prop_assert!(s.k > 0);
        prop_assert!(plan.stream_k_ctas <= dev.occ.wave(&dev.info, k), "more stream-K CTAs than a wave");
        // TMA split-K (every tile shared): fewer than 64 tiles or more than 256 k-blocks, whole
        // parts of at least 8 k-blocks each, and more than 4 only at 16 or more each
        // (stream_k::plan).
        if k.family() == Family::TmaWgmma && plan.stream_k_tiles as u64 == s.cluster_tiles(k) {
            let (parts, k_blocks) = (plan.stream_k_ctas / plan.stream_k_tiles, s.k_blocks(k) as u32);
            prop_assert!(
                plan.stream_k_tiles < 64 || k_blocks > 256,
                "{} tiles of {} k-blocks split",
                plan.stream_k_tiles,
                k_blocks
            );
            prop_assert_eq!(plan.stream_k_ctas % plan.stream_k_tiles, 0, "whole parts");
            prop_assert!(parts >= 2 && parts * 8 <= k_blocks, "{} parts of {} k-blocks", parts, k_blocks);
            prop_assert!(parts <= 4 || parts * 16 <= k_blocks, "{} parts of {} k-blocks", parts, k_blocks);
        }
    }
    if call.workspace == 0 {
        prop_assert_eq!(plan.workspace_len(), 0);
    }

    // 2. The launch shape.
    prop_assert!(plan.grid > 0);
    prop_assert!(plan.grid <= i32::MAX as u32);
    // A skinny kernel's cluster is its split of K (gemm::skinny); every other kernel's, the table's.
    if k.family() == Family::Skinny {
        prop_assert!((1..=crate::sys::GE_SKINNY_MAX_SPLIT).contains(&plan.cluster));
        prop_assert!(s.m <= k.max_m().unwrap_or(0) as usize, "a skinny kernel on more rows of X than its tile");
    } else {
        prop_assert_eq!(plan.cluster, k.cluster_m());
    }
    if let Some(rows) = k.max_m() {
        prop_assert!(s.m <= rows as usize, "{:?} on more rows of X than its tile", k);
    }
    prop_assert_eq!(plan.grid % plan.cluster, 0);
    prop_assert_eq!(plan.block, k.threads());
    prop_assert_eq!(plan.smem_bytes, k.smem_bytes());
    prop_assert!(!plan.tma_store, "select leaves the store to for_out");
    match k.family() {
        // Persistent: at most a wave of CTAs (clusters).
        Family::TmaWgmma => prop_assert!(plan.grid / plan.cluster <= dev.occ.wave(&dev.info, k)),
        // One cluster per 16 rows of W, no stream-K.
        Family::Skinny => {
            prop_assert_eq!(plan.grid as u64, plan.cluster as u64 * (s.n as u64).div_ceil(16));
            prop_assert_eq!((plan.stream_k_tiles, plan.stream_k_ctas), (0, 0));
        }
        // One CTA per tile_n rows of W, each over all of K.
        Family::Gemv => {
            prop_assert_eq!(plan.grid as u64, (s.n as u64).div_ceil(k.spec().tile_n as u64));
            prop_assert_eq!((plan.stream_k_tiles, plan.stream_k_ctas), (0, 0));
        }
        // One CTA per whole tile, then the stream-K CTAs.
        Family::MmaSync => {
            prop_assert_eq!(plan.grid as u64, s.tiles(k) - plan.stream_k_tiles as u64 + plan.stream_k_ctas as u64)
        }
    }

    // 3. The kernel can run the call.
    prop_assert_eq!(unsupported(k, &dev.info, &dev.occ), None);
    let (x_ok, w_ok) = (call.x.rows_aligned(s.k), call.w.rows_aligned(s.k));
    if k.family() == Family::TmaWgmma {
        prop_assert!(s.k > 0, "TMA kernel with K = 0");
    }
    if k.needs_aligned_rows() {
        prop_assert!(x_ok || plan.repack_x, "unaligned X not repacked");
        // (TMA reads a prepared weight's rows as they are, whatever K.)
        let w_prepared_for_tma = call.w_prepared.is_some() && k.family() == Family::TmaWgmma;
        prop_assert!(w_ok || w_prepared_for_tma || plan.repack_w, "unaligned W not repacked");
    } else {
        prop_assert!(!plan.repack_x && !plan.repack_w, "a scalar-load kernel with a repack");
    }
    if k.needs_rounded_w() {
        prop_assert!(
            plan.repack_w || matches!(call.w_prepared, Some(WeightForm::Rounded | WeightForm::Split)),
            "W not rounded for a kernel that reads it rounded"
        );
    }
    if k.needs_split_w() {
        prop_assert!(
            plan.repack_w || call.w_prepared == Some(WeightForm::Split),
            "W not split for a kernel that reads it split"
        );
    }
    if plan.repack_x || plan.repack_w {
        prop_assert!(s.k > 0);
    }

    // 4. Auto gives the precision asked for when it is Tf32 or Tf32x3, given W as the caller has
    // it or as prepare_weight prepares it for that precision on this device.
    let consistent = match (policy.precision, call.w_prepared) {
        (_, None) => true,
        (Precision::Tf32, Some(f)) => f == WeightForm::Rounded,
        (Precision::Tf32x3, Some(f)) => f == if dev.info.is_hopper() { WeightForm::Split } else { WeightForm::Raw },
        (_, Some(f)) => f == WeightForm::Raw,
    };
    if policy.dispatch == Dispatch::Auto && policy.precision != Precision::Tf32Truncated && consistent {
        prop_assert_eq!(plan.precision, policy.precision);
    }
    // ... and a Tf32Truncated handle truncation, or rounding to nearest where it falls back:
    // never less accurate than asked (FusedGemm::with_precision).
    if policy.dispatch == Dispatch::Auto && policy.precision == Precision::Tf32Truncated {
        prop_assert!(
            matches!(plan.precision, Precision::Tf32Truncated | Precision::Tf32),
            "a truncating handle got {:?}",
            plan.precision
        );
    }

    // 5. The plan fits exactly in what it says it needs: same plan again.
    let again = select(&dev.info, &dev.occ, policy, Call { workspace: plan.workspace_len(), ..call });
    match again {
        Ok(again) => prop_assert_eq!(again, plan),
        Err(e) => return Err(TestCaseError::fail(format!("with workspace = {}: {e:?}", plan.workspace_len()))),
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn select_plans_are_consistent(c in case()) {
        check_plan(&c)?;
    }
}

/// A value for a dimension, leading dimension or length: small, around MAX_DIM / MAX_LD, or
/// anything up to usize::MAX.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        4 => 0usize..=64,
        1 => (MAX_DIM - 2)..=(MAX_DIM + 2),
        1 => (MAX_LD - 2)..=(MAX_LD + 2),
        1 => (usize::MAX - 2)..=usize::MAX,
        2 => any::<usize>(),
    ]
}

/// An operand `rows × cols`: ld a little more than cols or anything; len about what it needs
/// (wrapping products included) or anything.
fn extent(rows: usize, cols: usize) -> impl Strategy<Value = Extent> {
    (
        prop_oneof![3 => (0usize..=8).prop_map(move |p| cols.wrapping_add(p)), 1 => size()],
        prop_oneof![3 => -2isize..=2, 1 => Just(isize::MIN)],
        size(),
    )
        .prop_map(move |(ld, d, any_len)| {
            let needed = rows.wrapping_sub(1).wrapping_mul(ld).wrapping_add(cols);
            let len = if d == isize::MIN { any_len } else { needed.wrapping_add_signed(d) };
            Extent { rows, cols, ld, len }
        })
}

/// x (M×K), w (N×K), bias, out (M×N), now and then with one dimension off.
fn operands() -> impl Strategy<Value = (Extent, Extent, Option<usize>, Extent)> {
    (size(), size(), size(), 0usize..=8, size()).prop_flat_map(|(m, n, k, off, other)| {
        let bias = prop_oneof![Just(None), Just(Some(n)), Just(Some(other))];
        let bad = if off == 1 { other } else { k };
        (extent(m, k), extent(n, bad), bias, extent(m, n))
    })
}

/// Whether `e` is inside its buffer and within the limits, by checked arithmetic.
fn fits(e: Extent) -> Result<(), TestCaseError> {
    prop_assert!(e.ld >= e.cols, "{e:?}: ld < cols");
    prop_assert!(e.ld <= MAX_LD, "{e:?}: ld > MAX_LD");
    if e.rows > 0 && e.cols > 0 {
        let last = (e.rows - 1).checked_mul(e.ld).and_then(|v| v.checked_add(e.cols - 1));
        prop_assert!(matches!(last, Some(i) if i < e.len), "{e:?}: last element {last:?} not below len");
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    // 6. Validation never panics; what it accepts fits every buffer and limit.
    #[test]
    fn validation_accepts_only_what_fits((x, w, bias, out) in operands()) {
        if let Ok(s) = validate_shapes(x, w, bias, out) {
            prop_assert_eq!((s.m, s.n, s.k), (x.rows, w.rows, x.cols));
            prop_assert_eq!(w.cols, s.k);
            prop_assert_eq!((out.rows, out.cols), (s.m, s.n));
            prop_assert!(bias.is_none_or(|b| b == s.n));
            prop_assert!(s.m <= MAX_DIM && s.n <= MAX_DIM && s.k <= MAX_DIM);
            for e in [x, w, out] {
                fits(e)?;
            }
        }
        if let Ok(s) = validate_operands(x, w) {
            prop_assert_eq!((s.m, s.n, s.k), (x.rows, w.rows, x.cols));
            prop_assert!(s.m <= MAX_DIM && s.n <= MAX_DIM && s.k <= MAX_DIM && w.cols == s.k);
            fits(x)?;
            fits(w)?;
        }
        if let Ok(s) = validate_weight(w) {
            prop_assert_eq!((s.n, s.k), (w.rows, w.cols));
            prop_assert!(s.n <= MAX_DIM && s.k <= MAX_DIM);
            fits(w)?;
        }
    }
}
