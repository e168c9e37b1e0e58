//! The workspace of [`crate::FusedGemm::run_with_workspace`], laid out once per plan: repacked X,
//! repacked W, then stream-K's partial tiles and counters. Sizes and offsets come from here
//! alone; the launch only adds the workspace's address.

use super::shape::Shape;
use super::stream_k::{partial_tile_len, StreamK};
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
    /// Stream-K's i32 counters (same size as f32), zeroed before each launch.
    pub counters: Option<Region>,
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
        let counters = stream_k.map(|sk| take(sk.counters(kernel)));
        Self { x, w, partials, counters, len: next }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_follow_each_other_in_order() {
        let s = Shape { m: 64, n: 3000, k: 4097 };
        let k = Kernel::Sm90Pingpong64x64Trunc;
        let sk = StreamK { ctas: 94, tiles: 47 };
        let l = WorkspaceLayout::new(s, true, true, k, Some(sk));
        let ld = 4128;
        assert_eq!(l.x, Some(Region { offset: 0, len: 64 * ld }));
        assert_eq!(l.w, Some(Region { offset: 64 * ld, len: 3000 * ld }));
        assert_eq!(l.partials, Some(Region { offset: 3064 * ld, len: 94 * 64 * 64 }));
        assert_eq!(l.counters, Some(Region { offset: 3064 * ld + 94 * 64 * 64, len: 47 + 1 }));
        assert_eq!(l.len, repack_len(s, true, true, k) + sk.len(k));
        // A kernel that reads W split takes both parts.
        let x3 = Kernel::Sm90Pingpong64x128Tf32x3;
        let l = WorkspaceLayout::new(s, true, true, x3, None);
        assert_eq!((l.w, l.len), (Some(Region { offset: 64 * ld, len: 2 * 3000 * ld }), repack_len(s, true, true, x3)));
        assert_eq!(l.len, (64 + 2 * 3000) * ld);
        // Only W repacked, no stream-K: W starts at 0.
        let l = WorkspaceLayout::new(s, false, true, k, None);
        assert_eq!((l.x, l.w, l.partials, l.counters, l.len), (None, Some(Region { offset: 0, len: 3000 * ld }), None, None, 3000 * ld));
        assert_eq!(WorkspaceLayout::new(s, false, false, k, None).len, 0);
        assert_eq!(Region { offset: 3, len: 1 }.addr(0x1000), 0x100c);
    }

    #[test]
    fn repacked_rows_are_whole_128_byte_lines() {
        assert_eq!([0, 1, 32, 33, 4095, 4097].map(repacked_ld), [0, 32, 32, 64, 4096, 4128]);
    }
}
