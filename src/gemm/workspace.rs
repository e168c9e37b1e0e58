//! The workspace of [`crate::FusedGemm::run_with_workspace`], laid out once per plan: repacked X,
//! repacked W, then stream-K's partial tiles and hand-off words. Nothing in it needs a value
//! before a call (the kernels' words carry their launch's number: `stream_k::next_launch`). Sizes and offsets come from here
//! alone; the launch only adds the workspace's address.

use super::shape::Shape;
use super::stream_k::{self, partial_tile_len, StreamK};
use crate::device::DeviceInfo;
use crate::kernels::loaded::{unsupported, Occupancy};
use crate::kernels::Kernel;

/// `len` f32 elements at element `offset` of the workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    pub offset: usize,
    pub len: usize,
}

impl Region {
    /// Device address of the region in a workspace at `base`.
    pub fn addr(self, base: u64) -> u64 {
        base + 4 * self.offset as u64
    }
}

/// Where everything a plan keeps in the workspace lies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WorkspaceLayout {
    /// X repacked: M rows of [`repacked_ld`]`(K)` elements.
    pub x: Option<Region>,
    /// W repacked: N rows of [`repacked_ld`]`(K)` elements (twice that, split, for a kernel
    /// that reads W split).
    pub w: Option<Region>,
    /// One partial tile per stream-K CTA (cluster).
    pub partials: Option<Region>,
    /// Stream-K's u64 hand-off words (two f32 elements each, 8-byte aligned: every region
    /// before it has an even length): the ready words, then the ticket word.
    pub sync: Option<Region>,
    /// f32 elements in all.
    pub len: usize,
}

impl WorkspaceLayout {
    pub fn new(s: Shape, repack_x: bool, repack_w: bool, kernel: Kernel, stream_k: Option<StreamK>) -> Self {
        let mut next = 0;
        let mut take = |len: usize| {
            let r = Region { offset: next, len };
            next += len;
            r
        };
        let ld = repacked_ld(s.k);
        let x = repack_x.then(|| take(s.m * ld));
        let w = repack_w.then(|| take(w_parts(kernel) * s.n * ld));
        let partials = stream_k.map(|sk| take(sk.ctas as usize * partial_tile_len(kernel)));
        let sync = stream_k.map(|sk| take(2 * sk.sync_words(kernel)));
        Self { x, w, partials, sync, len: next }
    }
}

/// Leading dimension of a repacked operand: whole 128-byte lines per row. A multiple of 4 would
/// satisfy TMA, but rows that straddle 128-byte lines make every TMA box row touch two lines,
/// which measured far slower (docs/BENCHMARKS.md).
pub(crate) fn repacked_ld(k: usize) -> usize {
    k.next_multiple_of(32)
}

/// Matrices a repack of W writes for `kernel`: 2 (big and small parts) for the kernels that
/// read W split, else 1.
pub(crate) fn w_parts(kernel: Kernel) -> usize {
    if kernel.needs_split_w() {
        2
    } else {
        1
    }
}

/// f32 elements that repacking X (when `x`) and W (when `w`) of shape `s` take for `kernel`.
pub(crate) fn repack_len(s: Shape, x: bool, w: bool, kernel: Kernel) -> usize {
    let ld = repacked_ld(s.k);
    (x as usize) * s.m * ld + (w as usize) * w_parts(kernel) * s.n * ld
}

/// The most workspace any plan for `s` can lay out on this device, from the shape alone: X and W
/// both repacked (the most any alignment, stride or weight can ask) and the largest stream-K
/// part of any kernel the device runs, as [`WorkspaceLayout::new`] lays them out. Built from
/// the same layout as the plans, so a region added there is counted here too.
pub(crate) fn max_len(device: &DeviceInfo, occupancy: &Occupancy, s: Shape) -> usize {
    Kernel::ALL
        .into_iter()
        .filter(|&k| unsupported(k, device, occupancy).is_none())
        .map(|k| WorkspaceLayout::new(s, true, true, k, stream_k::plan(device, occupancy, k, s, usize::MAX)).len)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_follow_each_other_in_order() {
        let s = Shape { m: 64, n: 3000, k: 4097 };
        let k = Kernel::Sm90Pingpong64x64SmemA;
        let sk = StreamK { ctas: 94, tiles: 47 };
        let l = WorkspaceLayout::new(s, true, true, k, Some(sk));
        let ld = 4128;
        assert_eq!(l.x, Some(Region { offset: 0, len: 64 * ld }));
        assert_eq!(l.w, Some(Region { offset: 64 * ld, len: 3000 * ld }));
        assert_eq!(l.partials, Some(Region { offset: 3064 * ld, len: 94 * 64 * 64 }));
        assert_eq!(l.sync, Some(Region { offset: 3064 * ld + 94 * 64 * 64, len: 2 * (94 + 1) }));
        // The words are 8-byte aligned: an even offset from a 16-byte aligned workspace.
        assert_eq!(l.sync.map(|r| r.offset % 2), Some(0));
        assert_eq!(l.len, repack_len(s, true, true, k) + sk.len(k));
        // A kernel that reads W split takes both parts.
        let x3 = Kernel::Sm90Pingpong64x128Tf32x3;
        let l = WorkspaceLayout::new(s, true, true, x3, None);
        assert_eq!((l.w, l.len), (Some(Region { offset: 64 * ld, len: 2 * 3000 * ld }), repack_len(s, true, true, x3)));
        assert_eq!(l.len, (64 + 2 * 3000) * ld);
        // Only W repacked, no stream-K: W starts at 0.
        let l = WorkspaceLayout::new(s, false, true, k, None);
        assert_eq!(
            (l.x, l.w, l.partials, l.sync, l.len),
            (None, Some(Region { offset: 0, len: 3000 * ld }), None, None, 3000 * ld)
        );
        assert_eq!(WorkspaceLayout::new(s, false, false, k, None).len, 0);
        assert_eq!(Region { offset: 3, len: 1 }.addr(0x1000), 0x100c);
    }

    #[test]
    fn repacked_rows_are_whole_128_byte_lines() {
        assert_eq!([0, 1, 32, 33, 4095, 4097].map(repacked_ld), [0, 32, 32, 64, 4096, 4128]);
    }

    /// No plan, of any dispatch or rounding, for any alignment, stride or prepared W, uses more
    /// than the bound from the shape alone.
    #[test]
    fn no_plan_uses_more_than_the_shape_bound() {
        use super::super::dispatch::{select, Call, Dispatch, EpilogueKind, Policy};
        use super::super::shape::Strided;
        use super::super::weight::WeightForm;
        use crate::gemm::test_devices::{occupancy, A100, H200, RTX4090};
        use crate::kernels::Precision;
        const ALIGNED: u64 = 0x7f00_0000_0000;
        let precisions = [Precision::Tf32, Precision::Tf32Truncated, Precision::Tf32x3];
        let shapes = [
            (1, 4096, 4096),
            (16384, 4096, 4096),
            (16383, 4095, 4097),
            (300, 520, 512),
            (64, 3000, 4097),
            (129, 7, 33),
            (8191, 8192, 64),
        ];
        for device in [H200, A100, RTX4090] {
            let occ = occupancy(&device);
            for (m, n, k) in shapes {
                let s = Shape { m, n, k };
                let bound = max_len(&device, &occ, s);
                let mut most = 0;
                for precision in precisions {
                    let dispatches = std::iter::once(Dispatch::Auto).chain(Kernel::ALL.map(Dispatch::Force));
                    for dispatch in dispatches {
                        for (x_addr, ld) in
                            [(ALIGNED, k), (ALIGNED + 4, k), (ALIGNED, k + 1), (ALIGNED, k.next_multiple_of(32))]
                        {
                            for prepared in [None, Some(precision)] {
                                let w = match prepared {
                                    Some(_) => Strided { addr: ALIGNED, ld: repacked_ld(k) },
                                    None => Strided { addr: ALIGNED + 4, ld: k },
                                };
                                // The form prepare_weight gives a weight of this precision on this device.
                                let form = prepared.map(|p| match p {
                                    Precision::Tf32 => WeightForm::Rounded,
                                    Precision::Tf32x3 if device.is_hopper() => WeightForm::Split,
                                    _ => WeightForm::Raw,
                                });
                                let call = Call {
                                    shape: s,
                                    x: Strided { addr: x_addr, ld },
                                    w,
                                    w_prepared: form,
                                    workspace: usize::MAX,
                                    epilogue: EpilogueKind::Unrolled,
                                };
                                // Calls a rounding or a forced kernel cannot serve are errors; they use nothing.
                                if let Ok(plan) = select(&device, &occ, Policy { dispatch, precision }, call) {
                                    assert!(
                                        plan.workspace_len() <= bound,
                                        "{device:?} {s:?} {precision:?} {dispatch:?}: plan uses {} > bound {bound}",
                                        plan.workspace_len()
                                    );
                                    most = most.max(plan.workspace_len());
                                }
                            }
                        }
                    }
                }
                // A large K % 4 != 0 problem repacks both operands: the bound is not loose there.
                if s.macs() >= 1 << 27 && k % 4 != 0 {
                    assert!(
                        most >= repack_len(s, true, true, Kernel::Sm80Mma64x64Vec4),
                        "{device:?} {s:?}: most {most}, bound {bound}"
                    );
                }
            }
        }
    }
}
