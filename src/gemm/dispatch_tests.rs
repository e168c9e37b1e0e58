//! Unit tests of `select`: every rule of the preference table, grids, repacks, stream-K.

use super::*;
use crate::gemm::test_devices;

/// A device and what loading the kernels found on it.
#[derive(Clone, Copy)]
struct Dev {
    info: DeviceInfo,
    occ: Occupancy,
}

fn devices() -> (Dev, Dev, Dev) {
    let d = |info: DeviceInfo| Dev { info, occ: test_devices::occupancy(&info) };
    (d(test_devices::H200), d(test_devices::A100), d(test_devices::RTX4090))
}

fn no_clusters() -> Dev {
    let (h200, _, _) = devices();
    Dev { occ: Occupancy { max_active_clusters: 0, ..h200.occ }, ..h200 }
}

fn shape(m: usize, n: usize, k: usize) -> Shape {
    Shape { m, n, k }
}

fn st(addr: u64, ld: usize) -> Strided {
    Strided { addr, ld }
}

const ALIGNED: u64 = 0x7f00_0000_0000;

/// `select` with an explicit rounding; x and w as (address, ld).
fn select_kernel(
    d: &Dev,
    dispatch: Dispatch,
    precision: Precision,
    s: Shape,
    x: (u64, usize),
    w: (u64, usize),
    workspace: usize,
) -> Result<Plan> {
    let call = Call {
        shape: s,
        x: st(x.0, x.1),
        w: st(w.0, w.1),
        w_prepared: None,
        workspace,
        epilogue: EpilogueKind::Unrolled,
    };
    super::select(&d.info, &d.occ, Policy { dispatch, precision }, call)
}

/// `select` with the rounding of each device's fastest kernels before the sm_90 rounding kernels
/// existed: truncation on sm_90, round to nearest elsewhere. The rules of the truncating sm_90
/// kernels are pinned with it; the rounding ones have tests of their own below.
fn select(d: &Dev, dispatch: Dispatch, s: Shape, x: (u64, usize), w: (u64, usize), workspace: usize) -> Result<Plan> {
    let precision = if d.info.is_hopper() { Precision::Tf32Truncated } else { Precision::Tf32 };
    select_kernel(d, dispatch, precision, s, x, w, workspace)
}

/// `select` of a prepared (rounded, 128-byte-aligned) W.
fn select_prepared(
    d: &Dev,
    dispatch: Dispatch,
    precision: Precision,
    s: Shape,
    x: (u64, usize),
    workspace: usize,
) -> Result<Plan> {
    // The form prepare_weight makes for this precision (the tests' devices that run these are sm_90).
    let form = match precision {
        Precision::Tf32 => WeightForm::Rounded,
        Precision::Tf32x3 if d.info.is_hopper() => WeightForm::Split,
        _ => WeightForm::Raw,
    };
    let call = Call {
        shape: s,
        x: st(x.0, x.1),
        w: st(ALIGNED, s.k.next_multiple_of(32)),
        w_prepared: Some(form),
        workspace,
        epilogue: EpilogueKind::Unrolled,
    };
    super::select(&d.info, &d.occ, Policy { dispatch, precision }, call)
}

#[allow(non_snake_case)]
fn H200() -> Dev {
    devices().0
}
#[allow(non_snake_case)]
fn A100() -> Dev {
    devices().1
}
#[allow(non_snake_case)]
fn RTX4090() -> Dev {
    devices().2
}

#[test]
fn auto_prefers_wgmma_on_hopper_and_mma_sync_elsewhere() {
    let s = shape(16384, 4096, 4096);
    let p = select(&H200(), Dispatch::Auto, s, (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
    assert_eq!(p.kernel, Kernel::Sm90Cooperative128x256Cluster2SmemA);
    assert_eq!(p.grid, 132, "persistent: one CTA per SM (66 clusters of 2)");
    let p = select(&A100(), Dispatch::Auto, s, (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
    assert_eq!((p.kernel, p.grid), (Kernel::Sm80Mma128x256Vec4, 128 * 16));
    let p = select(&RTX4090(), Dispatch::Auto, s, (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
    assert_eq!(p.kernel, Kernel::Sm80Mma128x128Vec4, "144 KiB does not fit sm_89's 99 KiB; 96 KiB does");
}

/// Auto's plan for `s` with aligned operands, no workspace and an epilogue of `kind`.
fn auto_with(d: &Dev, precision: Precision, s: Shape, kind: EpilogueKind) -> Plan {
    let call =
        Call { shape: s, x: st(ALIGNED, s.k), w: st(ALIGNED, s.k), w_prepared: None, workspace: 0, epilogue: kind };
    super::select(&d.info, &d.occ, Policy { dispatch: Dispatch::Auto, precision }, call).unwrap()
}

/// Every epilogue form that takes the rolled loop (which only a ping-pong kernel overlaps with a
/// mainloop) takes, on a large problem, the ping-pong cluster twin of the cooperative cluster
/// kernel, and at K ≤ 1024 the ping-pong without a cluster, on both roundings; the other sizes
/// are ping-pongs already, and the A100's mma.sync kernels have one store path for both.
#[test]
fn rolled_epilogues_take_the_ping_pong_on_large_problems() {
    let other = |d: &Dev, precision: Precision, s: Shape| auto_with(d, precision, s, EpilogueKind::Rolled);
    for precision in [Precision::Tf32, Precision::Tf32Truncated] {
        for s in [shape(16384, 4096, 4096), shape(8192, 11008, 4096)] {
            let seed = select_kernel(&H200(), Dispatch::Auto, precision, s, (ALIGNED, s.k), (ALIGNED, s.k), 0).unwrap();
            assert_eq!(seed.kernel, Kernel::Sm90Cooperative128x256Cluster2SmemA, "{s:?} {precision:?}");
            assert_eq!(other(&H200(), precision, s).kernel, Kernel::Sm90Pingpong128x128Cluster2SmemA, "{s:?}");
        }
        // At short K the ping-pong without a cluster, where the seed form gets the cluster twin.
        for s in [shape(8192, 3072, 768), shape(16384, 4096, 1024)] {
            let seed = select_kernel(&H200(), Dispatch::Auto, precision, s, (ALIGNED, s.k), (ALIGNED, s.k), 0).unwrap();
            assert_eq!(seed.kernel, Kernel::Sm90Pingpong128x128Cluster2SmemA, "{s:?} {precision:?}");
            assert_eq!(other(&H200(), precision, s).kernel, Kernel::Sm90Pingpong128x128SmemA, "{s:?}");
        }
        // A medium problem runs the same kernel for every form.
        let s = shape(2048, 4096, 4096);
        let seed = select_kernel(&H200(), Dispatch::Auto, precision, s, (ALIGNED, s.k), (ALIGNED, s.k), 0).unwrap();
        assert_eq!(other(&H200(), precision, s).kernel, seed.kernel);
    }
    let s = shape(16384, 4096, 4096);
    assert_eq!(other(&A100(), Precision::Tf32, s).kernel, Kernel::Sm80Mma128x256Vec4);
}

/// Plain Linear and ReLU take the seed form's plan where out takes a tensor map (the seed's
/// unrolled store; the cooperative cluster kernel on large problems) and the rolled forms' plan
/// where out's rows are stored from registers.
#[test]
fn plain_linear_and_relu_take_the_seed_s_plan_where_out_takes_a_tensor_map() {
    use crate::{Activation, Epilogue};
    let d = H200();
    let s = shape(16384, 4096, 4096);
    for a in [Activation::Identity, Activation::Relu] {
        for (out, want) in [
            (st(ALIGNED, s.n), Kernel::Sm90Cooperative128x256Cluster2SmemA),
            (st(ALIGNED + 8, s.n), Kernel::Sm90Pingpong128x128Cluster2SmemA),
        ] {
            let kind = EpilogueKind::of(&Epilogue::<()>::activation(a), out.rows_aligned(s.n));
            let plan = auto_with(&d, Precision::Tf32, s, kind).for_out(s.n, out);
            assert_eq!(plan.kernel, want, "{a:?} {out:?}");
            assert_eq!(plan.tma_store, out.rows_aligned(s.n));
        }
    }
}

/// The unrolled kind for dispatch is the seed's store: `v·s + v` without a residual, and plain
/// Linear or ReLU without one where out takes a tensor map (the kernels then store them as the
/// seed form); a residual through `C` or through `out` (the kernels' `is_seed()` sees a source
/// either way), any other activation, or plain Linear or ReLU stored from registers is rolled.
#[test]
fn the_unrolled_kind_is_the_seed_s_store() {
    use crate::{Activation, Epilogue};
    use EpilogueKind::{Rolled, Unrolled};
    for out_tma in [true, false] {
        assert_eq!(EpilogueKind::of(&Epilogue::<()>::scale_add(0.5), out_tma), Unrolled);
        assert_eq!(EpilogueKind::of(&Epilogue::<()>::scale_add(f32::NAN), out_tma), Unrolled);
        assert_eq!(EpilogueKind::of(&Epilogue::scale_add(0.5).with_residual((), 1.0), out_tma), Rolled);
        assert_eq!(EpilogueKind::of(&Epilogue::<()>::scale_add(0.5).with_residual_out(1.0), out_tma), Rolled);
        for a in [Activation::Identity, Activation::Relu, Activation::Gelu, Activation::GeluTanh, Activation::Silu] {
            let unrolled = out_tma && matches!(a, Activation::Identity | Activation::Relu);
            let want = if unrolled { Unrolled } else { Rolled };
            assert_eq!(EpilogueKind::of(&Epilogue::<()>::activation(a), out_tma), want, "{a:?} {out_tma}");
            assert_eq!(EpilogueKind::of(&Epilogue::activation(a).with_residual((), 1.0), out_tma), Rolled, "{a:?}");
        }
    }
}

/// `workspace_len` plans the other epilogue kind only where `epilogue_may_change_plan` says it
/// may differ: everywhere else both kinds get the same plan.
#[test]
fn the_epilogue_changes_no_plan_where_dispatch_says_it_cannot() {
    for d in [H200(), A100()] {
        for m in [1, 16, 300, 2048, 4096, 8192, 16384, 32768] {
            for (n, k) in [(768, 3072), (3072, 768), (4096, 4096), (11008, 4096), (4096, 1000)] {
                let s = shape(m, n, k);
                if epilogue_may_change_plan(s, &d.info, &d.occ) {
                    continue;
                }
                for precision in [Precision::Tf32, Precision::Tf32Truncated, Precision::Tf32x3] {
                    let plan = |epilogue| {
                        let call = Call {
                            shape: s,
                            x: st(ALIGNED, k),
                            w: st(ALIGNED, k),
                            w_prepared: None,
                            workspace: usize::MAX,
                            epilogue,
                        };
                        super::select(&d.info, &d.occ, Policy { dispatch: Dispatch::Auto, precision }, call)
                            .map(|p| (p.kernel, p.grid, p.stream_k_tiles, p.workspace_len()))
                            .ok()
                    };
                    assert_eq!(plan(EpilogueKind::Unrolled), plan(EpilogueKind::Rolled), "{s:?} {precision:?}");
                }
            }
        }
    }
}

#[test]
fn unaligned_or_ragged_k_falls_back_to_scalar_loads() {
    let s = shape(16383, 4095, 4097);
    let p = select(&H200(), Dispatch::Auto, s, (ALIGNED, 4097), (ALIGNED, 4097), 0).unwrap();
    assert_eq!(p.kernel, Kernel::Sm80Mma128x256Scalar);
    let s = shape(4096, 4096, 4096);
    let p = select(&H200(), Dispatch::Auto, s, (ALIGNED + 4, 4096), (ALIGNED, 4096), 0).unwrap();
    assert_eq!(p.kernel, Kernel::Sm80Mma128x256Scalar, "x misaligned by one float");
    let p = select(&RTX4090(), Dispatch::Auto, s, (ALIGNED, 4098), (ALIGNED, 4096), 0).unwrap();
    assert_eq!(p.kernel, Kernel::Sm80Mma128x128Scalar, "ldx not a multiple of 4");
    let p = select(&H200(), Dispatch::Auto, shape(7, 9, 0), (ALIGNED, 0), (ALIGNED, 0), 0).unwrap();
    assert_eq!(
        (p.kernel, p.cluster),
        (Kernel::Sm90Skinny8x16Trunc, 1),
        "K = 0: no TMA; the skinny kernel stores the bias"
    );
    let p = select(&H200(), Dispatch::Auto, shape(17, 9, 0), (ALIGNED, 0), (ALIGNED, 0), 0).unwrap();
    assert_eq!(p.kernel, Kernel::Sm80Mma64x64Vec4, "K = 0, M > 16: no TMA, bias-only tile");
}

#[test]
fn a_workspace_lets_unaligned_operands_reach_the_fast_kernels() {
    let s = shape(16383, 4095, 4097);
    let need = (16383 + 4095) * 4128;
    let p = select(&H200(), Dispatch::Auto, s, (ALIGNED, 4097), (ALIGNED, 4097), need).unwrap();
    assert_eq!((p.kernel, p.repack_x, p.repack_w), (Kernel::Sm90Cooperative128x256Cluster2SmemA, true, true));
    assert_eq!(p.workspace_len(), need);
    // One element short: no repack, the scalar kernel, and still no error.
    let p = select(&H200(), Dispatch::Auto, s, (ALIGNED, 4097), (ALIGNED, 4097), need - 1).unwrap();
    assert_eq!((p.kernel, p.repack_x, p.repack_w), (Kernel::Sm80Mma128x256Scalar, false, false));
    // Only the misaligned operand is repacked.
    let s = shape(4096, 4096, 4096);
    let p = select(&A100(), Dispatch::Auto, s, (ALIGNED + 4, 4096), (ALIGNED, 4096), usize::MAX).unwrap();
    assert_eq!((p.kernel, p.repack_x, p.repack_w), (Kernel::Sm80Mma128x256Vec4, true, false));
    // Tiny problems are not worth two extra launches...
    let p = select(&H200(), Dispatch::Auto, shape(33, 65, 4095), (ALIGNED, 4095), (ALIGNED, 4095), usize::MAX).unwrap();
    assert_eq!((p.kernel, p.repack_x), (Kernel::Sm80Mma64x64Scalar, false));
    // ...unless a kernel that needs them is forced.
    let g = Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA);
    let p = select(&H200(), g, shape(33, 65, 4095), (ALIGNED, 4095), (ALIGNED, 4095), usize::MAX).unwrap();
    assert!(p.repack_x && p.repack_w);
    // Scalar kernels never repack.
    let g = Dispatch::Force(Kernel::Sm80Mma128x128Scalar);
    let p = select(&H200(), g, shape(4096, 4096, 4097), (ALIGNED, 4097), (ALIGNED, 4097), usize::MAX).unwrap();
    assert!(!p.repack_x && !p.repack_w);
}

#[test]
fn rounding_decides_between_truncating_and_rounding_kernels() {
    use Precision::{Tf32 as Nearest, Tf32Truncated as Truncate};
    let s = shape(16384, 4096, 4096);
    let a = (ALIGNED, 4096);
    let pick = |d: &Dev, r, ws| select_kernel(d, Dispatch::Auto, r, s, a, a, ws).unwrap();
    // The default rounds to nearest on every device.
    assert_eq!((default_precision(&H200().info), default_precision(&A100().info)), (Nearest, Nearest));
    // A100: the truncating mma.sync kernels only when asked for.
    let p = pick(&A100(), Truncate, 0);
    assert_eq!((p.kernel, p.precision), (Kernel::Sm80Mma128x256Vec4Trunc, Truncate));
    let p = pick(&A100(), Nearest, usize::MAX);
    assert_eq!((p.kernel, p.precision, p.repack_x, p.repack_w), (Kernel::Sm80Mma128x256Vec4, Nearest, false, false));
    let p = pick(&RTX4090(), Truncate, 0);
    assert_eq!(p.kernel, Kernel::Sm80Mma128x128Vec4Trunc, "128×256 does not fit sm_89");
    // H200, Nearest: the TMA kernel that feeds both operands from shared memory, the TMA
    // rounding them on load: a raw W as it is, nothing repacked, no workspace needed...
    let p = pick(&H200(), Nearest, 0);
    assert_eq!(
        (p.kernel, p.repack_x, p.repack_w, p.precision, p.round_on_load),
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, false, false, Nearest, true)
    );
    assert_eq!(p.workspace_len(), 0);
    let p = pick(&H200(), Nearest, usize::MAX);
    assert!(!p.repack_w && !p.repack_x && p.stream_k_tiles > 0 && p.round_on_load, "{p:?}");
    // ...as with a prepared W...
    let p = select_prepared(&H200(), Dispatch::Auto, Nearest, s, a, 0).unwrap();
    assert_eq!(
        (p.kernel, p.repack_x, p.repack_w, p.precision, p.workspace_len()),
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, false, false, Nearest, 0)
    );
    // ...and the same kernel truncates, with fp32 maps, when asked to.
    let p = pick(&H200(), Truncate, usize::MAX);
    assert_eq!(
        (p.kernel, p.repack_x, p.repack_w, p.precision, p.round_on_load),
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, false, false, Truncate, false)
    );
    // Each size class has its kernel, the truncating one's, for either rounding.
    for (m, k) in [
        (17, Kernel::Sm90Pingpong64x64SmemA),
        (200, Kernel::Sm90Pingpong64x128SmemA),
        (1024, Kernel::Sm90Pingpong128x128SmemA),
    ] {
        for r in [Nearest, Truncate] {
            let p = select_prepared(&H200(), Dispatch::Auto, r, shape(m, 4096, 4096), a, 0).unwrap();
            assert_eq!((p.kernel, p.precision, p.round_on_load), (k, r, r == Nearest), "M = {m}, {r:?}");
        }
    }
    // Small problems too: TMA reads the raw W.
    let small = shape(128, 256, 64);
    let p = select_kernel(&H200(), Dispatch::Auto, Nearest, small, (ALIGNED, 64), (ALIGNED, 64), usize::MAX).unwrap();
    assert_eq!(
        (p.kernel, p.precision, p.repack_w, p.round_on_load),
        (Kernel::Sm90Pingpong64x64SmemA, Nearest, false, true)
    );
    // A forced kernel runs as it is, and the plan says how it rounds...
    let p =
        select_kernel(&H200(), Dispatch::Force(Kernel::Sm80Mma128x256Vec4Trunc), Nearest, s, a, a, usize::MAX).unwrap();
    assert_eq!((p.precision, p.repack_x), (Truncate, false));
    // ...but a kernel that can round on load does so for a handle that asks for rounding.
    let p = select_prepared(&H200(), Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA), Nearest, s, a, 0).unwrap();
    assert_eq!((p.precision, p.round_on_load), (Nearest, true), "the TMA rounds X and W");
    let p = select_kernel(&H200(), Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA), Truncate, s, a, a, 0).unwrap();
    assert_eq!((p.precision, p.round_on_load), (Truncate, false));
    // A forced kernel that rounds X in registers needs W rounded: prepared, or room to round it into.
    let w_len = 4096 * 4096;
    let forced = Dispatch::Force(Kernel::Sm90Pingpong128x128RmemA);
    let e = select_kernel(&H200(), forced, Nearest, s, a, a, w_len - 1).unwrap_err();
    assert!(matches!(e, Error::KernelUnavailable { .. }) && e.to_string().contains("prepared weight"), "{e}");
    let p = select_kernel(&H200(), forced, Truncate, s, a, a, w_len).unwrap();
    assert_eq!(
        (p.repack_w, p.precision, p.round_on_load),
        (true, Nearest, false),
        "the kernel rounds whatever the handle asks"
    );
    // Unaligned operands: repacking rounds them, so even the truncating TMA kernel gives Nearest.
    let u = (ALIGNED, 4097);
    let s = shape(16383, 4095, 4097);
    let p = select_kernel(&H200(), Dispatch::Auto, Truncate, s, u, u, usize::MAX).unwrap();
    assert_eq!((p.kernel, p.precision), (Kernel::Sm90Cooperative128x256Cluster2SmemA, Nearest));
    let p = select_kernel(&H200(), Dispatch::Auto, Nearest, s, u, u, usize::MAX).unwrap();
    assert_eq!(
        (p.kernel, p.repack_x, p.repack_w, p.precision),
        (Kernel::Sm90Cooperative128x256Cluster2SmemA, true, true, Nearest)
    );
}

#[test]
fn stream_k_when_a_workspace_has_room() {
    let a = |k| (ALIGNED, k);
    // The ping-pong kernel (Auto's choice for fewer than 3 waves of 256×256 cluster tiles).
    let pp = Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA);
    let plan = |s: Shape, ws| select(&H200(), pp, s, a(s.k), a(s.k), ws).unwrap();
    // A partial tile and a ready word (two f32 elements) per CTA, and the ticket word.
    let sk_len = |grid: usize, _tiles: usize| grid * 128 * 128 + 2 * (grid + 1);
    // At least 8 full waves and a partial one: the reference shape's 4096 tiles are 31 waves
    // of 132 and 4 tiles; those 4 are shared with the wave before (136 stream-K tiles).
    let s = shape(16384, 4096, 4096);
    let p = plan(s, usize::MAX);
    assert_eq!((p.kernel, p.grid, p.stream_k_tiles), (Kernel::Sm90Pingpong128x128SmemA, 132, 136));
    assert_eq!(p.workspace_len(), sk_len(132, 136));
    // 2048 tiles: 15 waves and 68 tiles, more than a quarter wave: those 68 alone.
    assert_eq!(plan(shape(8192, 4096, 4096), usize::MAX).stream_k_tiles, 68);
    // Without room for the partial tiles, or with fewer than 8 waves (4096³: 7 waves and 100
    // tiles), or whole waves only: the plain persistent schedule, and no workspace for it.
    let p = plan(s, sk_len(132, 136) - 1);
    assert_eq!((p.grid, p.stream_k_tiles, p.workspace_len()), (132, 0, 0));
    assert_eq!(plan(shape(4096, 4096, 4096), usize::MAX).stream_k_tiles, 0);
    assert_eq!(plan(shape(132 * 128, 8 * 128, 64), usize::MAX).stream_k_tiles, 0);
    // Fewer tiles than SMs: split-K, every tile into the same number of parts (4 × 32 CTAs),
    // at least 8 k-blocks per CTA.
    let s = shape(1, 4096, 4096);
    let p = plan(s, usize::MAX);
    assert_eq!((p.grid, p.stream_k_ctas, p.stream_k_tiles), (128, 128, 32));
    assert_eq!(p.workspace_len(), sk_len(128, 32));
    // One element short of the partial tiles: one CTA per tile, no error.
    let p = plan(s, sk_len(128, 32) - 1);
    assert_eq!((p.grid, p.stream_k_tiles, p.workspace_len()), (32, 0, 0));
    let p = plan(shape(300, 520, 512), usize::MAX);
    assert_eq!((p.grid, p.stream_k_tiles), (30, 15));
    // Too little K to split: 15 tiles × 2 k-blocks.
    assert_eq!(plan(shape(300, 520, 64), usize::MAX).stream_k_tiles, 0);
    // More than half a wave of tiles (96, 128): one CTA per tile, no split.
    for m in [384, 512] {
        let p = plan(shape(m, 4096, 4096), usize::MAX);
        assert_eq!((p.grid as usize, p.stream_k_tiles), (m / 128 * 32, 0), "{m}");
    }
    // Repacks come first in the workspace; split-K only if room is left after them.
    let u = shape(1000, 3000, 4097);
    let repacks = (1000 + 3000) * 4128;
    let p = select(&H200(), Dispatch::Auto, u, a(4097), a(4097), repacks).unwrap();
    assert_eq!((p.repack_x, p.grid, p.stream_k_tiles), (true, 132, 0), "192 tiles: no split");
    // 64 × 3000: 47 tiles of the 64×64 ping-pong (Auto's pick), each cut in 2 (94 CTAs).
    let u = shape(64, 3000, 4097);
    let repacks = (64 + 3000) * 4128;
    let sk = 94 * 64 * 64 + 2 * (94 + 1);
    let p = select(&H200(), Dispatch::Auto, u, a(4097), a(4097), repacks + sk).unwrap();
    assert_eq!((p.kernel, p.repack_x, p.grid, p.stream_k_tiles), (Kernel::Sm90Pingpong64x64SmemA, true, 94, 47));
    assert_eq!(p.workspace_len(), repacks + sk);
}

#[test]
fn stream_k_for_cluster_and_cooperative_kernels_counts_clusters() {
    let a = |k| (ALIGNED, k);
    let forced = |k, s: Shape| select(&H200(), Dispatch::Force(k), s, a(s.k), a(s.k), usize::MAX).unwrap();
    let reference = shape(16384, 4096, 4096);
    // Cooperative 128×256, no cluster: 2048 tiles = 15 waves of 132 and 68 tiles; two
    // ready words per CTA (one per consumer warpgroup).
    let p = forced(Kernel::Sm90Cooperative128x256SmemA, reference);
    assert_eq!((p.grid, p.stream_k_ctas, p.stream_k_tiles), (132, 132, 68));
    assert_eq!(p.workspace_len(), 132 * 128 * 256 + 2 * (132 * 2 + 1));
    // Its 2-CTA clusters: 1024 cluster tiles of 256×256 = 15 waves of 66 clusters and 34; a
    // slot of two 128×256 tiles per cluster, a ready word per (cluster, CTA, consumer).
    let p = forced(Kernel::Sm90Cooperative128x256Cluster2SmemA, reference);
    assert_eq!((p.grid, p.cluster, p.stream_k_ctas, p.stream_k_tiles), (132, 2, 66, 34));
    assert_eq!(p.workspace_len(), 66 * 2 * 128 * 256 + 2 * (66 * 2 * 2 + 1));
    // Ping-pong clusters: 2048 cluster tiles = 31 waves of 66 and 2, under a quarter wave:
    // shared with the wave before.
    let p = forced(Kernel::Sm90Pingpong128x128Cluster2SmemA, reference);
    assert_eq!((p.grid, p.stream_k_ctas, p.stream_k_tiles), (132, 66, 68));
    assert_eq!(p.workspace_len(), 66 * 2 * 128 * 128 + 2 * (66 * 2 + 1));
    // Split-K: M = 1 has 16 cluster tiles of 256×256, each shared by 4 of the 66 clusters.
    let p = forced(Kernel::Sm90Cooperative128x256Cluster2SmemA, shape(1, 4096, 4096));
    assert_eq!((p.grid, p.stream_k_ctas, p.stream_k_tiles), (128, 64, 16));
    // 4096³: 256 cluster tiles, 3 waves and 58: too few waves to share the last.
    let p = forced(Kernel::Sm90Cooperative128x256Cluster2SmemA, shape(4096, 4096, 4096));
    assert_eq!((p.grid, p.stream_k_tiles), (132, 0));
    // No cluster fits (max_active_clusters = 0): the cluster kernels are refused, never split.
    let no_clusters = no_clusters();
    let forced_c2 = Dispatch::Force(Kernel::Sm90Cooperative128x256Cluster2SmemA);
    assert!(select(&no_clusters, forced_c2, reference, a(4096), a(4096), usize::MAX).is_err());
}

#[test]
fn stream_k_for_mma_sync_kernels_counts_resident_ctas() {
    let a = |k| (ALIGNED, k);
    let s = shape(16384, 4096, 4096);
    let force = |d: &Dev, k: Kernel, s: Shape| select(d, Dispatch::Force(k), s, a(s.k), a(s.k), usize::MAX).unwrap();
    // 2048 tiles of 128×256, one CTA per SM: 15 waves and 68 tiles, shared by 132 CTAs that
    // follow the 1980 whole-tile CTAs.
    let p = force(&H200(), Kernel::Sm80Mma128x256Vec4Trunc, s);
    assert_eq!((p.stream_k_tiles, p.stream_k_ctas, p.grid), (68, 132, 1980 + 132));
    assert_eq!(p.workspace_len(), 132 * 128 * 256 + 2 * (132 + 1));
    // 4096 tiles of 128×128, two CTAs per SM: waves of 264, 15 of them and 136 tiles.
    let p = force(&H200(), Kernel::Sm80Mma128x128Vec4Trunc, s);
    assert_eq!((p.stream_k_tiles, p.stream_k_ctas, p.grid), (136, 264, 3960 + 264));
    // The A100's default (precision) kernel: 108 SMs, 18 waves and 104 tiles.
    let p = select(&A100(), Dispatch::Auto, s, a(4096), a(4096), usize::MAX).unwrap();
    assert_eq!((p.kernel, p.stream_k_tiles, p.stream_k_ctas, p.grid), (Kernel::Sm80Mma128x256Vec4, 104, 108, 2052));
    // Split-K: 128 tiles of 64×64 and 128 k-blocks, two per SM fit: 216 CTAs share them all.
    let small = shape(128, 4096, 4096);
    let p = select(&A100(), Dispatch::Auto, small, a(4096), a(4096), usize::MAX).unwrap();
    assert_eq!((p.kernel, p.stream_k_tiles, p.stream_k_ctas, p.grid), (Kernel::Sm80Mma64x64Vec4, 128, 216, 216));
    // The scalar kernels too (any K), and without a workspace nobody splits.
    let odd = shape(1, 4095, 4097);
    let p = select(&A100(), Dispatch::Auto, odd, (ALIGNED + 4, 4097), (ALIGNED + 4, 4097), usize::MAX).unwrap();
    assert_eq!(p.kernel, Kernel::Sm80Mma64x64Scalar);
    assert!(p.stream_k_tiles == 64 && p.stream_k_ctas > 64, "{p:?}");
    let p = select(&A100(), Dispatch::Auto, s, a(4096), a(4096), 0).unwrap();
    assert_eq!((p.stream_k_tiles, p.stream_k_ctas, p.grid, p.workspace_len()), (0, 0, 2048, 0));
}

#[test]
fn tma_store_needs_16_byte_rows_of_out() {
    let (s, a) = (shape(512, 512, 512), (ALIGNED, 512));
    let p = select(&H200(), Dispatch::Auto, s, a, a, 0).unwrap();
    assert_eq!(p.kernel.family(), Family::TmaWgmma);
    assert!(!p.tma_store, "select() does not know out");
    assert!(p.for_out(512, st(ALIGNED, 512)).tma_store);
    assert!(p.for_out(512, st(ALIGNED + 48, 516)).tma_store);
    assert!(!p.for_out(512, st(ALIGNED + 8, 512)).tma_store, "8-byte aligned base");
    assert!(!p.for_out(512, st(ALIGNED, 514)).tma_store, "ldo % 4 != 0");
    assert!(!p.for_out(510, st(ALIGNED, 512)).tma_store, "N % 4 != 0: the last box would write padding");
    let m = select(&A100(), Dispatch::Auto, s, a, a, 0).unwrap();
    assert!(!m.for_out(512, st(ALIGNED, 512)).tma_store, "mma.sync kernels store from registers");
}

#[test]
fn small_problems_take_the_small_tile() {
    let p = select(&A100(), Dispatch::Auto, shape(128, 4096, 4096), (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
    assert_eq!((p.kernel, p.grid), (Kernel::Sm80Mma64x64Vec4, 2 * 64));
    let p = select(&A100(), Dispatch::Auto, shape(1, 3, 5), (ALIGNED, 5), (ALIGNED, 5), 0).unwrap();
    assert_eq!((p.kernel, p.grid), (Kernel::Sm80Mma64x64Scalar, 1));
}

#[test]
fn forcing_a_kernel_that_cannot_run_is_an_error() {
    let s = shape(64, 64, 64);
    let e = select(&A100(), Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA), s, (ALIGNED, 64), (ALIGNED, 64), 0)
        .unwrap_err();
    assert!(matches!(e, Error::KernelUnavailable { kernel: Kernel::Sm90Pingpong128x128SmemA, .. }), "{e}");
    let e = select(
        &H200(),
        Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA),
        shape(64, 64, 63),
        (ALIGNED, 63),
        (ALIGNED, 63),
        0,
    )
    .unwrap_err();
    assert!(matches!(e, Error::KernelUnavailable { .. }), "{e}");
    let e = select(&H200(), Dispatch::Force(Kernel::Sm80Mma128x128Vec4), s, (ALIGNED + 8, 64), (ALIGNED, 64), 0)
        .unwrap_err();
    assert!(e.to_string().contains("16-byte"), "{e}");
    let p =
        select(&H200(), Dispatch::Force(Kernel::Sm80Mma64x64Scalar), s, (ALIGNED + 4, 64), (ALIGNED, 64), 0).unwrap();
    assert_eq!((p.kernel, p.grid, p.block), (Kernel::Sm80Mma64x64Scalar, 1, 128));
    assert!(!p.repack_x && !p.repack_w);
}

const C2: Dispatch = Dispatch::Force(Kernel::Sm90Pingpong128x128Cluster2SmemA);

#[test]
fn the_cluster_kernel_launches_whole_resident_clusters() {
    // (M, N) -> cluster tiles of 256 × 128, capped at 66 resident clusters, 2 CTAs each.
    for (m, n, expected) in [
        (16384, 4096, 64 * 32),
        (4096, 4096, 16 * 32),
        (1, 1, 1),
        (128, 128, 1), // m <= 128: the second CTA's rows are all past M
        (129, 128, 1), // one row in the second CTA
        (200, 300, 3),
        (256, 128, 1),
        (257, 129, 2 * 2), // a third 128-row tile opens a second cluster row
        (300, 4096, 2 * 32),
        (1000, 256, 4 * 2), // 1000 % 256 = 232: the second CTA of the last row has 104 rows
    ] {
        let s = shape(m, n, 64);
        let p = select(&H200(), C2, s, (ALIGNED, 64), (ALIGNED, 64), 0).unwrap();
        assert_eq!(p.kernel, Kernel::Sm90Pingpong128x128Cluster2SmemA);
        assert_eq!(s.cluster_tiles(p.kernel), expected, "{m}×{n}");
        assert_eq!(p.grid, 2 * expected.min(66) as u32, "{m}×{n}: 2 · min(cluster tiles, clusters)");
        assert!(p.grid % 2 == 0 && p.grid <= 2 * H200().occ.max_active_clusters, "{p:?}");
        assert_eq!((p.cluster, p.block, p.smem_bytes), (2, 384, Kernel::Sm90Pingpong128x128SmemA.smem_bytes()));
        assert!(!p.repack_x && !p.repack_w);
    }
    // The cap is what the occupancy query said, not SMs / 2 (clusters live inside one GPC).
    let fragmented = Dev { occ: Occupancy { max_active_clusters: 60, ..H200().occ }, ..H200() };
    let p = select(&fragmented, C2, shape(16384, 4096, 4096), (ALIGNED, 4096), (ALIGNED, 4096), 0).unwrap();
    assert_eq!((p.grid, p.cluster), (120, 2));
    // The plain ping-pong kernel: no cluster, one CTA per SM.
    let p = select(
        &H200(),
        Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA),
        shape(16384, 4096, 4096),
        (ALIGNED, 4096),
        (ALIGNED, 4096),
        0,
    )
    .unwrap();
    assert_eq!((p.grid, p.cluster), (132, 1));
    // Every other kernel runs without clusters, but a skinny one, whose clusters split K (a
    // GEMV kernel on as many rows of X as it holds).
    for k in Kernel::ALL.into_iter().filter(|&k| k.cluster_m() == 1 && k.family() != Family::Skinny) {
        let m = k.max_m().map_or(300, |rows| rows as usize);
        let p =
            select(&H200(), Dispatch::Force(k), shape(m, 200, 64), (ALIGNED, 64), (ALIGNED, 64), usize::MAX).unwrap();
        assert_eq!(p.cluster, 1, "{p:?}");
    }
}

#[test]
fn auto_picks_the_cooperative_cluster_kernel_for_at_least_three_waves() {
    let a = |k| (ALIGNED, k);
    // 66 clusters: 198 cluster tiles of 256×256 or more, K above 1024, and a last wave no more
    // ragged than the ping-pong cluster kernel's (4096³: 4 waves of 256 tiles against 8 of 512;
    // 8192³: 15.5 waves, the last one shared by stream-K).
    for (m, n, k) in [(16384, 4096, 4096), (4096, 4096, 4096), (8192, 8192, 8192), (8192, 4096, 1028)] {
        let p = select(&H200(), Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
        assert_eq!((p.kernel, p.cluster, p.grid), (Kernel::Sm90Cooperative128x256Cluster2SmemA, 2, 132), "{m}×{n}×{k}");
    }
    // As large, but K ≤ 1024, or a ragged last wave (1024×14336: 224 cluster tiles, 4 waves of
    // 66, where 448 half tiles take 7 half waves; 2048×11008: 6 waves against 11): the
    // ping-pong cluster kernel.
    for (m, n, k) in
        [(12800, 4096, 64), (16384, 1024, 1024), (16384, 3072, 768), (1024, 14336, 4096), (2048, 11008, 4096)]
    {
        let p = select(&H200(), Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
        assert_eq!((p.kernel, p.cluster, p.grid), (Kernel::Sm90Pingpong128x128Cluster2SmemA, 2, 132), "{m}×{n}×{k}");
    }
    // A wave of 128×128 tiles or more, but fewer than 8, with a last wave that 64×128 tiles fill
    // better (4096×768: 192 tiles, 2 waves, against 384 half tiles in 3): the 64×128 ping-pong.
    for (m, n, k) in [(4096, 768, 3072), (256, 11008, 4096), (1024, 3072, 768)] {
        let p = select(&H200(), Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
        assert_eq!((p.kernel, p.cluster), (Kernel::Sm90Pingpong64x128SmemA, 1), "{m}×{n}×{k}");
    }
    // Fewer: the ping-pong (3072 × 4096: 768 tiles of 128×128, but 192 cluster tiles; its 6
    // waves against 12 of 64×128 tiles, no more ragged; 512×11008: 3 waves against 6;
    // 512×14336: 4 against 7, which at 8/7 of the cost is no faster; 1024×11008: 6 against 11,
    // but those 11 end in a shared tail).
    for (m, n, k) in [
        (3072, 4096, 4096),
        (2048, 2048, 2048),
        (1024, 4096, 4096),
        (384, 4096, 4096),
        (512, 4096, 4096),
        (512, 11008, 4096),
        (512, 14336, 4096),
        (1024, 11008, 4096),
    ] {
        let p = select(&H200(), Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
        assert_eq!((p.kernel, p.cluster), (Kernel::Sm90Pingpong128x128SmemA, 1), "{m}×{n}×{k}");
    }
    // At most one wave (132) of 64×64 tiles: the 64×64 ping-pong (5 to 16 rows with a W past
    // the skinny kernels' 3·2²² elements); else of 64×128 tiles: the 64×128 one.
    for (m, n, k) in
        [(5, 4096, 4100), (17, 4096, 4096), (128, 4096, 4096), (64, 8192, 64), (257, 129, 4096), (300, 1024, 512)]
    {
        let p = select(&H200(), Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
        assert_eq!((p.kernel, p.cluster), (Kernel::Sm90Pingpong64x64SmemA, 1), "{m}×{n}×{k}");
    }
    for (m, n, k) in [(129, 4096, 4096), (256, 4096, 4096), (64, 8512, 64), (300, 2048, 512)] {
        let p = select(&H200(), Dispatch::Auto, shape(m, n, k), a(k), a(k), 0).unwrap();
        assert_eq!((p.kernel, p.cluster), (Kernel::Sm90Pingpong64x128SmemA, 1), "{m}×{n}×{k}");
    }
    // K % 4 != 0 with room to repack: the operands are repacked for it too.
    let s = shape(16383, 4095, 4097);
    let p = select(&H200(), Dispatch::Auto, s, a(4097), a(4097), usize::MAX).unwrap();
    assert_eq!((p.kernel, p.repack_x, p.repack_w), (Kernel::Sm90Cooperative128x256Cluster2SmemA, true, true));
    // No cluster fits: the ping-pong, whatever the size.
    let no_clusters = no_clusters();
    let p = select(&no_clusters, Dispatch::Auto, shape(16384, 4096, 4096), a(4096), a(4096), 0).unwrap();
    assert_eq!((p.kernel, p.cluster), (Kernel::Sm90Pingpong128x128SmemA, 1));
}

#[test]
fn the_cluster_kernel_is_refused_where_it_cannot_run() {
    let s = shape(512, 512, 64);
    let a = (ALIGNED, 64);
    for device in [A100(), RTX4090()] {
        let e = select(&device, C2, s, a, a, 0).unwrap_err();
        assert!(matches!(e, Error::KernelUnavailable { kernel: Kernel::Sm90Pingpong128x128Cluster2SmemA, .. }), "{e}");
        assert!(e.to_string().contains("sm_90"), "{e}");
    }
    // sm_90, but load() found no room for a cluster (or the occupancy query failed).
    let no_clusters = no_clusters();
    let e = select(&no_clusters, C2, s, a, a, 0).unwrap_err();
    assert!(e.to_string().contains("cluster"), "{e}");
    assert!(select(&no_clusters, Dispatch::Force(Kernel::Sm90Pingpong128x128SmemA), s, a, a, 0).is_ok());
    // TMA's rules: K = 0, K % 4 != 0, a misaligned base, ld % 4 != 0 (without a workspace).
    let e = select(&H200(), C2, shape(64, 64, 0), (ALIGNED, 0), (ALIGNED, 0), 0).unwrap_err();
    assert!(e.to_string().contains("K > 0"), "{e}");
    for (x, w, k) in [
        ((ALIGNED, 63), (ALIGNED, 63), 63),
        ((ALIGNED + 4, 64), (ALIGNED, 64), 64),
        ((ALIGNED, 64), (ALIGNED + 8, 64), 64),
        ((ALIGNED, 66), (ALIGNED, 64), 64),
    ] {
        let e = select(&H200(), C2, shape(300, 200, k), x, w, 0).unwrap_err();
        assert!(matches!(e, Error::KernelUnavailable { kernel: Kernel::Sm90Pingpong128x128Cluster2SmemA, .. }), "{e}");
        assert!(e.to_string().contains("TMA"), "{e}");
        // With a workspace the unaligned operands are repacked, as for the plain kernel.
        let p = select(&H200(), C2, shape(300, 200, k), x, w, usize::MAX).unwrap();
        assert_eq!((p.kernel, p.grid, p.cluster), (Kernel::Sm90Pingpong128x128Cluster2SmemA, 2 * 2 * 2, 2));
        assert!(p.repack_x || p.repack_w, "{p:?}");
    }
}

#[test]
fn huge_problems_plan_without_overflow() {
    // M·N·K past 2⁶⁴ (valid dimensions: X and W views of one large buffer): the multiply-add
    // count saturates instead of overflowing (a panic in debug builds, a wrapped count before).
    let big = crate::gemm::validate::MAX_DIM;
    let s = shape(big, big, 8);
    assert_eq!(s.macs(), u64::MAX);
    for d in [H200(), A100()] {
        match select(&d, Dispatch::Auto, s, (ALIGNED, 8), (ALIGNED, 8), usize::MAX) {
            Ok(_) | Err(Error::DimensionTooLarge { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
}

/// Tf32x3: Auto's kernels per size and device, W split into the workspace or read from a split
/// weight, X repacked as it is for them, and the refusal of a split weight that only the TMA
/// kernels can read when X cannot reach them.
#[test]
fn tf32x3_picks_its_kernels_and_reads_w_split() {
    use Precision::Tf32x3;
    let a = (ALIGNED, 4096);
    let x3 = |d: &Dev, s: Shape, x: (u64, usize), workspace: usize| {
        select_kernel(d, Dispatch::Auto, Tf32x3, s, x, a, workspace)
    };
    // Large and small M on sm_90 with a raw W: the TMA kernels, W split into the workspace.
    let p = x3(&H200(), shape(16384, 4096, 4096), a, usize::MAX).unwrap();
    assert_eq!(
        (p.kernel, p.repack_x, p.repack_w, p.precision),
        (Kernel::Sm90Cooperative128x128Tf32x3, false, true, Tf32x3)
    );
    assert_eq!(p.workspace.w.map(|r| r.len), Some(2 * 4096 * 4096), "both parts of W");
    let p = x3(&H200(), shape(64, 4096, 4096), a, usize::MAX).unwrap();
    assert_eq!((p.kernel, p.precision), (Kernel::Sm90Pingpong64x128Tf32x3, Tf32x3));
    // No room to split W: the mma.sync kernels split it in registers.
    let p = x3(&H200(), shape(16384, 4096, 4096), a, 0).unwrap();
    assert_eq!((p.kernel, p.repack_w, p.precision), (Kernel::Sm80Mma64x64Vec4Tf32x3, false, Tf32x3));
    // Off sm_90: the mma.sync kernels, whatever the size.
    for d in [A100(), RTX4090()] {
        let p = x3(&d, shape(16384, 4096, 4096), a, usize::MAX).unwrap();
        assert_eq!((p.kernel, p.precision), (Kernel::Sm80Mma64x64Vec4Tf32x3, Tf32x3));
    }
    // A split weight: read as it is by the TMA kernels, also at tiny sizes and odd K (X repacked
    // as it is, since the kernel splits it).
    let p = select_prepared(&H200(), Dispatch::Auto, Tf32x3, shape(16384, 4096, 4096), a, 0).unwrap();
    assert_eq!(
        (p.kernel, p.repack_x, p.repack_w, p.precision, p.workspace_len()),
        (Kernel::Sm90Cooperative128x128Tf32x3, false, false, Tf32x3, 0)
    );
    let p = select_prepared(&H200(), Dispatch::Auto, Tf32x3, shape(3, 5, 7), (ALIGNED, 7), usize::MAX).unwrap();
    assert_eq!((p.kernel.family(), p.repack_x, p.repack_w, p.precision), (Family::TmaWgmma, true, false, Tf32x3));
    // ...but without a workspace unaligned X cannot reach them: refused, not run at TF32 precision.
    let e = select_prepared(&H200(), Dispatch::Auto, Tf32x3, shape(3, 5, 7), (ALIGNED, 7), 0).unwrap_err();
    assert!(matches!(e, Error::KernelUnavailable { .. }) && e.to_string().contains("split"), "{e}");
    // Forcing an mma.sync Tf32x3 kernel on a split weight is refused; with K = 0 nothing is read.
    let forced = Dispatch::Force(Kernel::Sm80Mma64x64Vec4Tf32x3);
    assert!(select_prepared(&H200(), forced, Tf32x3, shape(64, 64, 64), (ALIGNED, 64), usize::MAX).is_err());
    let p = select_prepared(&H200(), forced, Tf32x3, shape(64, 64, 0), (ALIGNED, 0), usize::MAX).unwrap();
    assert_eq!(p.precision, Tf32x3);
}

#[test]
fn decoding_sizes_take_the_gemv_and_skinny_kernels_on_sm_90() {
    use Precision::{Tf32 as Nearest, Tf32Truncated as Truncate, Tf32x3};
    let a = |k| (ALIGNED, k);
    let auto = |d: &Dev, r, m, n, k| select_kernel(d, Dispatch::Auto, r, shape(m, n, k), a(k), a(k), 0).unwrap();
    // M = 1: the GEMV kernels (the 2-row tile from K = 2048 on, else the 4-row one); 2 ≤ M ≤ 4
    // from K = 1024 on: the 4-row GEMV; both only with W below 2²² or from 2²⁴ elements on (in
    // between it stays in L2, where the others read it faster). Up to 8 rows (shorter K at M ≤
    // 4, or W in L2) with up to 3·2²² elements of W, and M ≤ 16 up to 2²²: the skinny kernels.
    // Each
    // precision its build, nothing repacked, no stream-K, no workspace; what the kernel does is
    // what the plan says.
    for (m, n, k, kernel) in [
        (1, 768, 3072, Kernel::Sm80Gemv1x2),
        (1, 4096, 14336, Kernel::Sm80Gemv1x2),
        (1, 16384, 2048, Kernel::Sm80Gemv1x2),
        (1, 16384, 2044, Kernel::Sm80Gemv1x4),
        (1, 1024, 2048, Kernel::Sm80Gemv1x2),
        (1, 2048, 2044, Kernel::Sm80Gemv1x4),
        (1, 3072, 768, Kernel::Sm80Gemv1x4),
        (2, 4096, 4096, Kernel::Sm80Gemv4x4),
        (4, 768, 3072, Kernel::Sm80Gemv4x4),
        (4, 8192, 8192, Kernel::Sm80Gemv4x4),
        (4, 1024, 1024, Kernel::Sm80Gemv4x4),
        (4, 3072, 768, Kernel::Sm90Skinny8x16),
        (2, 4096, 1020, Kernel::Sm90Skinny8x16),
        (1, 4092, 1024, Kernel::Sm80Gemv1x4),
        (1, 4096, 1024, Kernel::Sm90Skinny8x16),
        (1, 4096, 2048, Kernel::Sm90Skinny8x16),
        (4, 4096, 2048, Kernel::Sm90Skinny8x16),
        (1, 4096, 3072, Kernel::Sm90Skinny8x16),
        (5, 768, 3072, Kernel::Sm90Skinny8x16),
        (8, 3072, 4096, Kernel::Sm90Skinny8x16),
        (9, 1024, 1024, Kernel::Sm90Skinny16x16),
        (16, 768, 3072, Kernel::Sm90Skinny16x16),
    ] {
        for (r, build) in [(Nearest, 0), (Truncate, 1), (Tf32x3, 2)] {
            let p = auto(&H200(), r, m, n, k);
            let want = Kernel::ALL[kernel.index() + build];
            assert_eq!(
                (p.kernel, p.precision, p.round_on_load, p.repack_x, p.repack_w),
                (want, r, false, false, false),
                "{m}×{n}×{k} {r:?}"
            );
            assert_eq!(
                (p.stream_k_tiles, p.workspace_len(), p.smem_bytes, p.block),
                (0, 0, want.smem_bytes(), want.threads())
            );
            let rows_per_cta = want.tile().1 as usize;
            assert_eq!(p.grid, p.cluster * n.div_ceil(rows_per_cta) as u32, "one cluster per tile of W rows");
            if want.family() == Family::Gemv {
                assert_eq!(p.cluster, 1, "a GEMV CTA covers all of K");
            }
        }
    }
    // The skinny split: 48 clusters of 16 rows × 3 CTAs fill 132 SMs. A GEMV CTA covers all of K.
    assert_eq!(auto(&H200(), Nearest, 5, 768, 3072).cluster, 3);
    assert_eq!(auto(&H200(), Nearest, 1, 768, 3072).cluster, 1);
    // Past the limits: the TMA kernels (at 5×4096×4096 the 64×64 tiles, unsplit)...
    for (m, n, k) in [(17, 768, 3072), (9, 4096, 4096), (5, 8192, 4096), (5, 4096, 4096), (8, 4096, 3076)] {
        assert_eq!(auto(&H200(), Nearest, m, n, k).kernel.family(), Family::TmaWgmma, "{m}×{n}×{k}");
    }
    let p =
        select_kernel(&H200(), Dispatch::Auto, Nearest, shape(5, 4096, 4096), a(4096), a(4096), usize::MAX).unwrap();
    assert_eq!((p.kernel, p.grid, p.stream_k_tiles), (Kernel::Sm90Pingpong64x64SmemA, 64, 0));
    // ...except Tf32x3, whose skinny build keeps W up to 2²⁴ for M ≤ 8.
    assert_eq!(auto(&H200(), Tf32x3, 8, 4096, 4096).kernel, Kernel::Sm90Skinny8x16Tf32x3);
    assert_ne!(auto(&H200(), Tf32x3, 5, 4096, 4100).kernel.family(), Family::Skinny);
    // Not on sm_80 (measured on sm_90 only), and not on operands it would have to repack
    // (unaligned X: the scalar mma.sync kernel, as before; with a workspace, still no GEMV or
    // skinny plan).
    assert_eq!(auto(&A100(), Nearest, 1, 768, 3072).kernel, Kernel::Sm80Mma64x64Vec4);
    for (m, ws) in [(1, 0), (1, usize::MAX), (4, 0), (8, usize::MAX)] {
        let p = select_kernel(&H200(), Dispatch::Auto, Nearest, shape(m, 768, 3072), (ALIGNED + 4, 3072), a(3072), ws)
            .unwrap();
        assert!(p.kernel.max_m().is_none(), "{p:?}");
    }
    // A prepared W rounded: read as it is. A split one (Tf32x3 on sm_90): the TMA kernel.
    let p = select_prepared(&H200(), Dispatch::Auto, Nearest, shape(1, 768, 3072), a(3072), 0).unwrap();
    assert_eq!((p.kernel, p.precision), (Kernel::Sm80Gemv1x2, Nearest));
    let p = select_prepared(&H200(), Dispatch::Auto, Nearest, shape(6, 768, 3072), a(3072), 0).unwrap();
    assert_eq!((p.kernel, p.precision), (Kernel::Sm90Skinny8x16, Nearest));
    let p = select_prepared(&H200(), Dispatch::Auto, Tf32x3, shape(1, 768, 3072), a(3072), 0).unwrap();
    assert_eq!((p.kernel, p.precision), (Kernel::Sm90Pingpong64x128Tf32x3, Tf32x3));
    // Forced: M beyond the tile is refused with the reason; sm_80 cannot run a skinny kernel,
    // but runs a GEMV one; neither reads a split weight.
    let e = select(&H200(), Dispatch::Force(Kernel::Sm90Skinny8x16), shape(9, 64, 64), a(64), a(64), 0).unwrap_err();
    assert!(e.to_string().contains("at most 8"), "{e}");
    let e = select(&H200(), Dispatch::Force(Kernel::Sm90Skinny16x16), shape(17, 64, 64), a(64), a(64), 0).unwrap_err();
    assert!(e.to_string().contains("skinny kernel holds all of X in one tile: M must be at most 16"), "{e}");
    let e = select(&H200(), Dispatch::Force(Kernel::Sm80Gemv4x4), shape(5, 64, 64), a(64), a(64), 0).unwrap_err();
    assert!(e.to_string().contains("at most 4"), "{e}");
    let e = select(&H200(), Dispatch::Force(Kernel::Sm80Gemv1x2Trunc), shape(2, 64, 64), a(64), a(64), 0).unwrap_err();
    assert!(e.to_string().contains("M must be 1"), "{e}");
    let e = select(&A100(), Dispatch::Force(Kernel::Sm90Skinny16x16), shape(1, 64, 64), a(64), a(64), 0).unwrap_err();
    assert!(e.to_string().contains("sm_90"), "{e}");
    let p = select(&A100(), Dispatch::Force(Kernel::Sm80Gemv1x4), shape(1, 64, 64), a(64), a(64), 0).unwrap();
    assert_eq!((p.grid, p.cluster, p.block), (16, 1, 128));
    let e = select_prepared(&H200(), Dispatch::Force(Kernel::Sm90Skinny8x16Tf32x3), Tf32x3, shape(1, 64, 64), a(64), 0)
        .unwrap_err();
    assert!(e.to_string().contains("split"), "{e}");
    let e = select_prepared(&H200(), Dispatch::Force(Kernel::Sm80Gemv1x4Tf32x3), Tf32x3, shape(1, 64, 64), a(64), 0)
        .unwrap_err();
    assert!(e.to_string().contains("split"), "{e}");
    // An unaligned X, forced: repacked into a workspace when there is one, refused without.
    let p = select(
        &H200(),
        Dispatch::Force(Kernel::Sm80Gemv1x2),
        shape(1, 64, 2048),
        (ALIGNED + 4, 2048),
        a(2048),
        usize::MAX,
    )
    .unwrap();
    assert!(p.repack_x && !p.repack_w, "{p:?}");
    let e = select(&H200(), Dispatch::Force(Kernel::Sm80Gemv1x2), shape(1, 64, 2048), (ALIGNED + 4, 2048), a(2048), 0)
        .unwrap_err();
    assert!(e.to_string().contains("16-byte"), "{e}");
}

#[test]
fn a_plan_reports_the_weaker_rounding_of_x_and_w() {
    use Precision::{Tf32, Tf32Truncated, Tf32x3};
    let a = |k: usize| (ALIGNED, k);
    let s = shape(256, 256, 256);
    // A truncating mma.sync kernel (it cannot round on load) on a W prepared rounded: X is
    // truncated, so the product is.
    let trunc = Dispatch::Force(Kernel::Sm80Mma128x128Vec4Trunc);
    let p = select_prepared(&H200(), trunc, Tf32, s, a(256), 0).unwrap();
    assert_eq!((p.repack_x, p.repack_w, p.round_on_load, p.precision), (false, false, false, Tf32Truncated));
    // The same kernel on an X repacked (rounded) into the workspace and a raw W: W is truncated.
    let p = select_kernel(&H200(), trunc, Tf32, s, (ALIGNED + 4, 256), a(256), usize::MAX).unwrap();
    assert_eq!((p.repack_x, p.repack_w, p.precision), (true, false, Tf32Truncated));
    // Both repacked: both rounded.
    let p = select_kernel(&H200(), trunc, Tf32, s, (ALIGNED + 4, 256), (ALIGNED + 4, 256), usize::MAX).unwrap();
    assert_eq!((p.repack_x, p.repack_w, p.precision), (true, true, Tf32));
    // A 3xTF32 kernel that splits a raw W itself: 3xTF32.
    let x3 = Kernel::Sm80Mma64x64Vec4Tf32x3;
    let p = select_kernel(&H200(), Dispatch::Force(x3), Tf32x3, s, a(256), a(256), 0).unwrap();
    assert_eq!(p.precision, Tf32x3);
    // The rule itself, where the two are TF32 and 3xTF32: TF32. (No call reaches this pair: a
    // weight prepared rounded belongs to a Tf32 handle, whose kernels do not split X.)
    assert_eq!(plan_precision(x3, false, false, WeightForm::Rounded, 256), Tf32);
}

#[test]
fn tf32x3_refusals_say_what_the_kernel_needs() {
    // The sm_90 3xTF32 kernels read W split: without a split weight or room to split it, the
    // refusal says so (not that it wants W rounded).
    let a = (ALIGNED, 256);
    let forced = Dispatch::Force(Kernel::Sm90Cooperative128x128Tf32x3);
    let e = select_kernel(&H200(), forced, Precision::Tf32x3, shape(256, 256, 256), a, a, 0).unwrap_err();
    assert!(e.to_string().contains("reads W split into 3xTF32's two parts"), "{e}");
    // A problem too small to pay for splitting W into the workspace: Auto takes the mma.sync
    // kernel that splits W in registers, though the workspace has room for the sm_90 one.
    let p = select_kernel(
        &H200(),
        Dispatch::Auto,
        Precision::Tf32x3,
        shape(64, 64, 64),
        (ALIGNED, 64),
        (ALIGNED, 64),
        usize::MAX,
    )
    .unwrap();
    assert_eq!((p.kernel, p.repack_w, p.precision), (Kernel::Sm80Mma64x64Vec4Tf32x3, false, Precision::Tf32x3));
}

/// docs/TILING.md's "Force only" list is every kernel that no preference list names (so only
/// `Dispatch::Force` runs it): `Kernel::ALL` minus what [`preference`] gives for every size,
/// alignment and precision and what the decoding preferences give on an sm_90 device over a
/// grid of decoding shapes (M ≤ 16, W from 16·64 to 2²⁸ elements, K below and above every GEMV
/// tile's).
#[test]
fn tiling_md_force_only_list_is_what_no_preference_names() {
    use std::collections::BTreeSet;
    let (h200, _, _) = devices();
    let precisions = [Precision::Tf32, Precision::Tf32Truncated, Precision::Tf32x3];
    let sizes = [
        Size::Large,
        Size::LargePingpong,
        Size::Medium,
        Size::Medium64x128,
        Size::Small,
        Size::Small64x128,
        Size::Small64x64,
    ];
    let mut named: BTreeSet<String> = BTreeSet::new();
    for size in sizes {
        for aligned in [true, false] {
            for p in precisions {
                named.extend(preference(size, aligned, p).iter().map(|k| format!("{k:?}")));
            }
        }
    }
    for m in 1..=16 {
        for n in [16, 256, 1024, 4096, 16384] {
            for k in [64, 512, 1024, 2048, 4096, 14336, 16384] {
                for p in precisions {
                    let s = shape(m, n, k);
                    let decoding = gemv_preference(s, &h200.info, p).iter().chain(skinny_preference(s, &h200.info, p));
                    named.extend(decoding.map(|k| format!("{k:?}")));
                }
            }
        }
    }
    let force_only: BTreeSet<String> =
        Kernel::ALL.iter().map(|k| format!("{k:?}")).filter(|k| !named.contains(k)).collect();

    let tiling = include_str!("../../docs/TILING.md");
    let section = tiling
        .split_once("\n### Force only\n")
        .map(|(_, rest)| rest)
        .expect("docs/TILING.md has a `### Force only` section");
    let section = &section[..section.find("\n#").unwrap_or(section.len())];
    let listed: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .map(|l| l.split('`').next().unwrap_or_default().to_string())
        .collect();
    assert_eq!(listed, force_only, "docs/TILING.md, \"Force only\" (left) against the preference lists (right)");
    for name in &listed {
        let bullet = section.lines().find(|l| l.starts_with(&format!("- `{name}`"))).unwrap_or_default();
        assert!(bullet.len() > name.len() + 12, "docs/TILING.md, \"Force only\": `{name}` needs its reason: {bullet}");
    }
}
