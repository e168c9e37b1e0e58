//! A validated call's sizes and operands, and how many tiles a kernel cuts it into.

use crate::kernels::Kernel;

/// M, N and K of a validated call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

impl Shape {
    /// Output tiles of `kernel`'s CTA tile.
    pub fn tiles(self, kernel: Kernel) -> u64 {
        let (tm, tn, _) = kernel.tile();
        (self.m as u64).div_ceil(tm as u64) * (self.n as u64).div_ceil(tn as u64)
    }

    /// Tiles of `cluster_m · TILE_M × TILE_N`, one per cluster ([`Shape::tiles`] without a
    /// cluster).
    pub fn cluster_tiles(self, kernel: Kernel) -> u64 {
        let (tm, tn, _) = kernel.tile();
        (self.m as u64).div_ceil(tm as u64 * kernel.cluster_m() as u64) * (self.n as u64).div_ceil(tn as u64)
    }

    /// K-blocks of `kernel`'s tile along K (the last one partial when TILE_K does not divide K).
    pub fn k_blocks(self, kernel: Kernel) -> u64 {
        (self.k as u64).div_ceil(kernel.spec().tile_k as u64)
    }

    /// Multiply-adds of the GEMM, saturating: M·N·K of valid dimensions can pass 2⁶⁴.
    pub fn macs(self) -> u64 {
        (self.m as u64).saturating_mul(self.n as u64).saturating_mul(self.k as u64)
    }
}

/// A row-major operand in device memory: address of element (0, 0) and row stride in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Strided {
    pub addr: u64,
    pub ld: usize,
}

impl Strided {
    /// Whether rows of `cols` elements can be read 16 bytes at a time and described to TMA
    /// (whose row stride must be a multiple of 16 bytes below 2⁴⁰).
    pub fn rows_aligned(self, cols: usize) -> bool {
        cols % 4 == 0 && self.addr % 16 == 0 && self.ld % 4 == 0 && (self.ld as u64) < (1 << 38)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_rows_need_whole_16_byte_units_and_a_tma_stride() {
        let a = |addr: u64, ld: usize| Strided { addr, ld };
        assert!(a(0x7f00_0000_0000, 4096).rows_aligned(4096));
        // Each condition on its own: K, the address, the stride.
        assert!(!a(0x7f00_0000_0000, 4096).rows_aligned(4094));
        assert!(!a(0x7f00_0000_0008, 4096).rows_aligned(4096));
        assert!(!a(0x7f00_0000_0000, 4098).rows_aligned(4096));
        // TMA's row stride in bytes stays below 2^40: ld below 2^38 elements.
        assert!(a(0, (1 << 38) - 4).rows_aligned(4));
        assert!(!a(0, 1 << 38).rows_aligned(4));
        // K = 0: no element is read, but the address and stride still describe the rows.
        assert!(a(0, 0).rows_aligned(0));
    }

    #[test]
    fn tiles_and_cluster_tiles_round_up() {
        let s = Shape { m: 8193, n: 3071, k: 768 };
        // 128×128: 65 × 24 tiles; in 2-CTA clusters along M, 33 × 24.
        assert_eq!(s.tiles(Kernel::Sm90Pingpong128x128SmemA), 65 * 24);
        assert_eq!(s.cluster_tiles(Kernel::Sm90Pingpong128x128Cluster2SmemA), 33 * 24);
        assert_eq!(s.cluster_tiles(Kernel::Sm90Pingpong128x128SmemA), 65 * 24);
        assert_eq!(Shape { m: 0, n: 5, k: 5 }.tiles(Kernel::Sm90Pingpong128x128SmemA), 0);
        // M·N·K saturates instead of wrapping.
        assert_eq!(Shape { m: usize::MAX, n: 2, k: 2 }.macs(), u64::MAX);
        assert_eq!(s.macs(), 8193 * 3071 * 768_u64);
    }
}
