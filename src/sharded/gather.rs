//! The gathered forward: the full `rows × N` output on every device.
//!
//! An NCCL all-gather concatenates equal contiguous blocks, but a device's shard is a column
//! block of the output (strided), so the gather runs per row chunk through a gather buffer of
//! G blocks, each `rows_c × widest shard` (`gather_buffers.rs`):
//!
//! 1. on its compute stream, device g writes its chunk's shard as a dense block at the start
//!    of block g of its own buffer (uneven shards leave the rest of a block unused);
//! 2. on the communication streams, one in-place NCCL all-gather fills every device's buffer
//!    with every block (on the copy engines where NCCL can);
//! 3. on the same streams, each block is copied into its columns of the output rows
//!    (`cuMemcpy2DAsync`; a same-device copy needs SMs, hence `with_comm_sms`).
//!
//! Chunk c's steps 2–3 run while chunk c+1's GEMM runs on the compute stream. Each chunk has a
//! buffer of its own (a separate allocation: cudarc orders uses per allocation, and a shared one
//! would make chunk c+1's GEMM wait for chunk c's gather).

use std::num::NonZeroU32;
use std::ops::Range;

use cudarc::driver::CudaSlice;

use super::{columns, CommState, ShardedLinear};
use crate::driver::copy::{copy_block, BlockAt};
use crate::error::Result;
use crate::gemm::FusedGemm;
use crate::linear::alloc_f32;
use crate::matrix::{MatrixMut, MatrixRef};

impl ShardedLinear {
    /// The full `rows × out_features` output on every device: `outs[g]` lives on device g,
    /// ordered on its compute stream. `xs[g]` is the input on device g, as for
    /// [`ShardedLinear::forward`].
    ///
    /// Runs in [`ShardedLinear::gather_chunks`] row chunks, each chunk's NCCL gather
    /// overlapping the next chunk's GEMM. Each device's columns are bitwise those of
    /// `forward` with the same chunking (a chunk is a call of `rows_c` rows), and every device
    /// holds the same bits.
    pub fn forward_gathered(&self, xs: &[CudaSlice<f32>], rows: usize) -> Result<Vec<CudaSlice<f32>>> {
        self.check_inputs(xs, rows)?;
        let (k, n) = (self.in_features, self.out_features);
        let per = columns::chunk_rows(rows, self.gather_chunks);
        let chunks: Vec<Range<usize>> = columns::row_chunks(rows, per).collect();
        let widest = self.shards.iter().map(|s| s.columns.len()).max().unwrap_or(0);
        let devices = self.shards.len();
        let mut state = self.state();
        let CommState { buffers, comms } = &mut *state;
        let compute: Vec<_> = self.shards.iter().map(|s| s.compute.clone()).collect();
        buffers.reserve(comms, &compute, devices * per * widest, chunks.len())?;

        let mut outs = Vec::with_capacity(devices);
        for shard in &self.shards {
            // SAFETY: every element is written by the block copies before anything reads it.
            outs.push(unsafe { alloc_f32(&shard.compute, rows * n, "rows · out_features (output bytes)") }?);
        }
        for (c, chunk) in chunks.iter().enumerate() {
            let (rc, block) = (chunk.len(), chunk.len() * widest);
            // 1. Each device's block of this chunk; after the first chunk, on fewer SMs, next to
            // the previous chunk's gather and block copies.
            for (g, shard) in self.shards.iter().enumerate() {
                if let Some(linear) = &shard.linear {
                    let x = MatrixRef::new(xs[g].slice(chunk.start * k..chunk.end * k), rc, k);
                    let width = shard.columns.len();
                    let mine = buffers.buffer(c, g).slice_mut(g * block..g * block + rc * width);
                    let gemm = if c == 0 { linear.gemm().clone() } else { self.overlapping(linear.gemm()) };
                    linear.forward_into_held(&gemm, &shard.compute, &x, &mut MatrixMut::new(mine, rc, width))?;
                }
                comms.rank(g).stream().join(&shard.compute)?;
            }
            // 2. Every block to every device.
            comms.group(|comms| {
                for g in 0..devices {
                    comms.rank(g).all_gather_in_place(buffers.buffer(c, g), block, g)?;
                }
                Ok(())
            })?;
            // 3. The blocks into their columns of the output rows.
            for (g, out) in outs.iter_mut().enumerate() {
                let stream = comms.rank(g).stream();
                let gathered = buffers.buffer(c, g);
                for (r, owner) in self.shards.iter().enumerate() {
                    let cols = &owner.columns;
                    let src = gathered.slice(r * block..r * block + rc * cols.len());
                    copy_block(
                        &stream,
                        &src,
                        rc,
                        cols.len(),
                        out,
                        BlockAt { row: chunk.start, col: cols.start, ld: n },
                    )?;
                }
            }
        }
        // The output (and the next call's use of the gather buffers) after the gathers.
        for (g, shard) in self.shards.iter().enumerate() {
            shard.compute.join(&comms.rank(g).stream())?;
        }
        Ok(outs)
    }
}

impl ShardedLinear {
    /// `gemm` limited to the SMs a GEMM running next to a gather gets.
    fn overlapping(&self, gemm: &FusedGemm) -> FusedGemm {
        let sms = gemm.device().sm_count;
        match self.comm_sms() {
            0 => gemm.clone(),
            comm => gemm.with_sm_limit(NonZeroU32::new(sms.saturating_sub(comm).max(1))),
        }
    }
}
