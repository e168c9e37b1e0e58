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
