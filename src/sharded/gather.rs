//! The gathered forward: the full `rows × N` output on every device.
//!
//! An NCCL all-gather concatenates equal contiguous pieces, but a device's shard is a column
//! block of the output (strided), so the gather runs per row chunk through a gather buffer:
//!
//! 1. on its compute stream, device g writes its chunk's shard as a dense block (block g of the
//!    chunk's gather buffer: the blocks of all devices, one after another);
//! 2. on the communication streams, one NCCL group broadcasts block r from device r into every
//!    device's buffer (in place; any widths, so uneven shards need no padding);
//! 3. on the same streams, each block is copied into its columns of the output rows
//!    (`cuMemcpy2DAsync`).
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
        let mut state = self.state();
        state.reserve(&self.shards, per * n, chunks.len())?;
        let CommState { comms, staging } = &mut *state;

        let mut outs = Vec::with_capacity(self.shards.len());
        for shard in &self.shards {
            // SAFETY: every element is written by the block copies before anything reads it.
            outs.push(unsafe { alloc_f32(&shard.compute, rows * n, "rows · out_features (output bytes)") }?);
        }
        for (c, chunk) in chunks.iter().enumerate() {
            let rc = chunk.len();
            // 1. Each device's block of this chunk; after the first chunk, next to the previous
            // chunk's gather, on fewer SMs.
            for (g, shard) in self.shards.iter().enumerate() {
                if let Some(linear) = &shard.linear {
                    let x = MatrixRef::new(xs[g].slice(chunk.start * k..chunk.end * k), rc, k);
                    let cols = &shard.columns;
                    let block = staging[g][c].slice_mut(rc * cols.start..rc * cols.end);
                    let gemm = if c == 0 { linear.gemm().clone() } else { self.overlapping(linear.gemm()) };
                    linear.forward_into_held(&gemm, &shard.compute, &x, &mut MatrixMut::new(block, rc, cols.len()))?;
                }
                comms.rank(g).stream().join(&shard.compute)?;
            }
            // 2. Every block to every device.
            comms.group(|comms| {
                for (g, buffers) in staging.iter_mut().enumerate() {
                    for (r, owner) in self.shards.iter().enumerate().filter(|(_, s)| !s.columns.is_empty()) {
                        let cols = &owner.columns;
                        let mut block = buffers[c].slice_mut(rc * cols.start..rc * cols.end);
                        comms.rank(g).broadcast_in_place(&mut block, r as i32)?;
                    }
                }
                Ok(())
            })?;
            // 3. The blocks into their columns of the output rows.
            for (g, out) in outs.iter_mut().enumerate() {
                let stream = comms.rank(g).stream();
                for owner in &self.shards {
                    let cols = &owner.columns;
                    let block = staging[g][c].slice(rc * cols.start..rc * cols.end);
                    copy_block(&stream, &block, rc, cols.len(), out, BlockAt { row: chunk.start, col: cols.start, ld: n })?;
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
        match self.comm_sms {
            0 => gemm.clone(),
            comm => gemm.with_sm_limit(NonZeroU32::new(sms.saturating_sub(comm).max(1))),
        }
    }
}

impl CommState {
    /// At least `chunks` gather buffers of `len` f32 per device, allocated on its compute
    /// stream the first time (and again when a call needs larger ones), kept otherwise.
    fn reserve(&mut self, shards: &[super::Shard], len: usize, chunks: usize) -> Result<()> {
        for (buffers, shard) in self.staging.iter_mut().zip(shards) {
            if buffers.first().is_some_and(|b| b.len() < len) {
                buffers.clear();
            }
            while buffers.len() < chunks {
                // SAFETY: scratch: each chunk's blocks are written (GEMM, broadcast) before
                // they are read (broadcast, copies), in stream order.
                buffers.push(unsafe { alloc_f32(&shard.compute, len, "gather buffer (rows per chunk · out_features, bytes)") }?);
            }
        }
        Ok(())
    }
}
