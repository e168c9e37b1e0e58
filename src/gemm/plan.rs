//! [`Plan`]: what a call runs — the kernel, its launch shape, what the workspace holds.

use super::shape::Strided;
use super::workspace::WorkspaceLayout;
use crate::kernels::{Family, Kernel, Precision};

/// What a call ran (or would run): the kernel, its launch shape and its use of the workspace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Plan {
    /// The kernel.
    pub kernel: Kernel,
    /// CTAs launched (1-D grid; a multiple of `cluster`).
    pub grid: u32,
    /// CTAs per thread-block cluster: 1 for a plain launch, 2 (along M) for the `Cluster2`
    /// kernels, and for a [`crate::Family::Skinny`] kernel the number of CTAs that split K for
    /// each 16 columns of `out` (1 to 8; more than 1 is launched with a cluster-dimension
    /// attribute, as the `Cluster2` kernels are).
    pub cluster: u32,
    /// Threads per CTA.
    pub block: u32,
    /// Dynamic shared memory per CTA, bytes.
    pub smem_bytes: u32,
    /// X was first copied into the workspace (rows padded to whole 128-byte lines, rounded to TF32
    /// to nearest): its rows are not 16-byte aligned and the kernel needs them to be.
    pub repack_x: bool,
    /// Likewise for W, which is also copied (and so rounded) for the sm_90 kernels that read it
    /// rounded ([`Kernel::needs_rounded_w`]) when it is not a weight prepared rounded.
    pub repack_w: bool,
    /// How the operands the tensor cores saw were converted to TF32: [`Precision::Tf32`]
    /// when X and W both were rounded to nearest — by the TMA as it loaded them
    /// ([`Plan::round_on_load`]), by the kernel, by a repack, or (W) as a
    /// [`crate::PreparedWeight`] of a rounding handle — [`Precision::Tf32x3`] when both were
    /// split, else [`Precision::Tf32Truncated`].
    pub precision: Precision,
    /// The kernel read X and W through TF32 tensor maps ([`Kernel::can_round_on_load`] kernels
    /// under a handle asking for at least [`Precision::Tf32`]): the TMA rounded every element
    /// to TF32, to nearest with ties to even, on its way into shared memory. An operand the
    /// crate rounded before (ties away: repacked, or a prepared weight) is a TF32 value already
    /// and comes through unchanged. False: fp32 maps, or no TMA.
    pub round_on_load: bool,
    /// Tiles that [`Plan::stream_k_ctas`] CTAs share along K (stream-K, one partial tile per
    /// such CTA in the workspace): every tile when there are fewer tiles than fit on the device
    /// at once (split-K), or on large problems the last, partial wave (with the wave before it
    /// when that one is thin). 0: none, every CTA computes whole tiles (always so without a
    /// workspace). For the cluster kernels these are cluster tiles (`2·TILE_M × TILE_N`).
    pub stream_k_tiles: u32,
    /// CTAs that share the stream-K tiles: the whole persistent grid of an sm_90 kernel (counted
    /// in clusters for the cluster kernels), or the last `stream_k_ctas` CTAs of an mma.sync
    /// grid, after one CTA per whole tile. 0 without stream-K.
    pub stream_k_ctas: u32,
    /// The epilogue staged `out` in shared memory and stored it with TMA (sm_90 kernels, when
    /// `out` is 16-byte aligned and N and its leading dimension are multiples of 4); false: it
    /// stored from registers.
    pub tma_store: bool,
    pub(crate) workspace: WorkspaceLayout,
}

impl Plan {
    /// f32 elements of workspace the plan uses (0 without repacks or stream-K).
    pub fn workspace_len(&self) -> usize {
        self.workspace.len
    }

    /// The plan for an `n`-column output at `out`: TMA kernels store through TMA when its rows
    /// are whole 16-byte units at 16-byte-aligned addresses. TMA clips a store box at N only to
    /// 16-byte granularity (with N = 130 and ldo = 136 it wrote columns 130 and 131), so
    /// N % 4 == 0 is part of the rule, or padding past N would be overwritten.
    pub(crate) fn for_out(self, n: usize, out: Strided) -> Plan {
        Plan { tma_store: self.kernel.family() == Family::TmaWgmma && out.rows_aligned(n), ..self }
    }
}
