//! [`ShardedLinear`]: one layer over several GPUs of one process, split by output columns
//! (tensor parallelism, Megatron's column-parallel linear). Device g holds rows `columns(g)` of
//! W and of the bias and runs the fused kernel on them: the epilogue is per element, so a shard
//! needs nothing from the others, and its output is exactly the single-GPU call on that shard.
//! The full output, when wanted, is an NCCL all-gather (`gather.rs`).
//!
//! - `columns.rs`: the split (even shards, row chunks of the gathered forward);
//! - `comms.rs`: NCCL: the library check, one communicator per device, groups;
//! - `gather_buffers.rs`: the gather buffers, and whether NCCL gathers them on the copy engines;
//! - `gather.rs`: the gathered forward, overlapping each chunk's gather with the next chunk's GEMM.

mod columns;
mod comms;
mod gather;
mod gather_buffers;

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{CudaSlice, CudaStream};

use crate::error::{Error, Operand, Result};
use crate::gemm::FusedGemm;
use crate::kernels::Precision;
use crate::linear::{alloc_f32, Linear};
use crate::matrix::{MatrixMut, MatrixRef};

pub use comms::nccl_library_present;
use comms::Comms;
use gather_buffers::GatherBuffers;
pub use gather_buffers::GatherEngine;

/// A `Linear` (`out = v*s + v`, `v = x·Wᵀ + b`) whose W is split by rows over several devices:
/// device g owns output columns [`ShardedLinear::columns`]`(g)`, as evenly as possible.
///
/// - [`ShardedLinear::forward`] returns each device's shard of the output (no communication);
/// - [`ShardedLinear::forward_gathered`] returns the full output on every device, gathered
///   with NCCL while the next rows compute;
/// - [`ShardedLinear::replicate`] broadcasts an input from one device to all.
///
/// Device g computes on the stream given for it at construction; everything is stream-ordered
/// and no call synchronises the host. The layer holds one NCCL communicator per device (one
/// process, CTA policy zero: NCCL gathers on the copy engines where it can), its own
/// communication streams and the gather buffers (grown once per larger batch). G = 1 runs the
/// same code (its "gather" is a copy).
///
/// NCCL is loaded at run time: without it the constructors return [`Error::NoNccl`]; a device
/// that does not exist is [`Error::NoDevice`] from [`device_streams`].
#[derive(Debug)]
pub struct ShardedLinear {
    shards: Vec<Shard>,
    in_features: usize,
    out_features: usize,
    scale: f32,
    precision: Precision,
    gather_chunks: usize,
    comm_sms: u32,
    comm: Mutex<CommState>,
}

/// One device's part.
#[derive(Debug)]
struct Shard {
    /// Where this device's work is queued (the caller's stream).
    compute: Arc<CudaStream>,
    /// Output columns (rows of W) this device owns.
    columns: Range<usize>,
    /// The layer on those rows; `None` when the shard is empty (fewer columns than devices).
    linear: Option<Linear>,
}

/// What the collective calls share, one user at a time. The buffers are declared first: they
/// are dropped before the communicators their windows belong to.
#[derive(Debug)]
struct CommState {
    buffers: GatherBuffers,
    comms: Comms,
}

impl Drop for CommState {
    fn drop(&mut self) {
        // Nowhere to report an error; a failed wait leaves the buffers to be freed anyway.
        let _ = self.buffers.release(&self.comms);
    }
}

/// One device's rows of W and of the bias, as received.
type ShardRows = (CudaSlice<f32>, Option<CudaSlice<f32>>);

/// Opens devices `0..count` (primary contexts) and a new stream on each: the streams a
/// [`ShardedLinear`] over every device wants. [`Error::NoDevice`] when fewer devices exist.
pub fn device_streams(count: usize) -> Result<Vec<Arc<CudaStream>>> {
    (0..count).map(|g| Ok(crate::device::cuda_context(g)?.new_stream()?)).collect()
}

/// Default chunks of the gathered forward (see [`ShardedLinear::with_gather_chunks`]) and SMs
/// left free while a chunk's gather overlaps the next chunk's GEMM
/// ([`ShardedLinear::with_comm_sms`]): the best of the pairs measured on two H200s on both
/// shapes (docs/BENCHMARKS.md, "Two GPUs").
const DEFAULT_GATHER_CHUNKS: usize = 8;
const DEFAULT_COMM_SMS: u32 = 24;

impl ShardedLinear {
    /// Splits a layer held on the host — `weight` (out_features × in_features, row-major, as in
    /// PyTorch) and `bias` — over the devices of `streams` (one stream per device, each device
    /// once), evenly by output columns, each shard prepared for `precision`.
    pub fn from_host(
        streams: &[Arc<CudaStream>],
        precision: Precision,
        weight: &[f32],
        bias: Option<&[f32]>,
        in_features: usize,
        out_features: usize,
        scale: f32,
    ) -> Result<Self> {
        Self::check_nccl_and_devices(streams)?;
        check_layer(weight.len(), bias.map(<[f32]>::len), in_features, out_features)?;
        let columns = columns::even_columns(out_features, streams.len());
        let mut shards = Vec::with_capacity(streams.len());
        for (stream, cols) in streams.iter().zip(columns) {
            let linear = if cols.is_empty() {
                None
            } else {
                let w = stream.clone_htod(&weight[cols.start * in_features..cols.end * in_features])?;
                let b = bias.map(|b| stream.clone_htod(&b[cols.clone()])).transpose()?;
                let gemm = FusedGemm::new(stream.context())?.with_precision(precision);
                Some(Linear::new(gemm, w, b, in_features, cols.len(), scale)?)
            };
            shards.push(Shard { compute: stream.clone(), columns: cols, linear });
        }
        Ok(Self::assemble(Comms::init(comm_streams(streams)?)?, shards, in_features, out_features, scale, precision))
    }

    /// Splits `layer`, held on one of the devices of `streams`, over all of them: each device's
    /// rows of W and of the bias are sent from the layer's device with NCCL. Shards use the
    /// layer's precision. Waits for the transfers (construction, not the hot path), so `layer`
    /// may be dropped as soon as this returns.
    pub fn from_linear(streams: &[Arc<CudaStream>], layer: &Linear) -> Result<Self> {
        Self::check_nccl_and_devices(streams)?;
        let (k, n) = (layer.in_features(), layer.out_features());
        let ctx = layer.gemm().context().cu_ctx();
        let root = streams
            .iter()
            .position(|s| s.context().cu_ctx() == ctx)
            .ok_or(Error::WrongContext { operand: Some(Operand::W) })?;
        let columns = columns::even_columns(n, streams.len());
        let comms = Comms::init(comm_streams(streams)?)?;
        // Each device's rows of W and b, received into buffers of its own.
        let mut parts: Vec<Option<ShardRows>> = Vec::with_capacity(streams.len());
        for (g, cols) in columns.iter().enumerate() {
            parts.push(if cols.is_empty() {
                None
            } else {
                let s = comms.rank(g).stream();
                // SAFETY: written whole by the copy or receive below before anything reads it
                // (stream order; the construction waits for it).
                let w = unsafe { s.alloc::<f32>(cols.len() * k) }?;
                let b = layer.bias().map(|_| unsafe { s.alloc::<f32>(cols.len()) }).transpose()?;
                Some((w, b))
            });
        }
        comms.group(|comms| {
            for (g, (cols, part)) in columns.iter().zip(parts.iter_mut()).enumerate() {
                let Some((w, b)) = part else { continue };
                let w_rows = layer.weight().slice(cols.start * k..cols.end * k);
                let b_rows = layer.bias().map(|b| b.slice(cols.clone()));
                if g == root {
                    let s = comms.rank(root).stream();
                    s.memcpy_dtod(&w_rows, w)?;
                    if let (Some(src), Some(dst)) = (&b_rows, b.as_mut()) {
                        s.memcpy_dtod(src, dst)?;
                    }
                    continue;
                }
                comms.rank(root).send(&w_rows, g)?;
                comms.rank(g).recv(w, root)?;
                if let (Some(src), Some(dst)) = (&b_rows, b.as_mut()) {
                    comms.rank(root).send(src, g)?;
                    comms.rank(g).recv(dst, root)?;
                }
            }
            Ok(())
        })?;
        for s in comms.streams() {
            s.synchronize()?;
        }
        let mut shards = Vec::with_capacity(streams.len());
        for ((stream, cols), part) in streams.iter().zip(columns).zip(parts) {
            let linear = match part {
                None => None,
                Some((w, b)) => {
                    let gemm = FusedGemm::new(stream.context())?.with_precision(layer.gemm().precision());
                    Some(Linear::new(gemm, w, b, k, cols.len(), layer.scale())?.with_activation(layer.activation()))
                }
            };
            shards.push(Shard { compute: stream.clone(), columns: cols, linear });
        }
        Ok(Self::assemble(comms, shards, k, n, layer.scale(), layer.gemm().precision()))
    }

    /// Joins layers already split by the caller: `shards[g]` lives on the device of
    /// `streams[g]` and owns the next `shards[g].out_features()` output columns. They must agree
    /// on in_features, scale and precision.
    pub fn from_shards(streams: &[Arc<CudaStream>], shards: Vec<Linear>) -> Result<Self> {
        Self::check_nccl_and_devices(streams)?;
        if shards.len() != streams.len() {
            return Err(Error::ShapeMismatch {
                what: "shards vs streams (one shard per device)",
                expected: streams.len(),
                found: shards.len(),
            });
        }
        let first = &shards[0];
        let (k, scale, precision) = (first.in_features(), first.scale(), first.gemm().precision());
        for (stream, shard) in streams.iter().zip(&shards) {
            if shard.gemm().context().cu_ctx() != stream.context().cu_ctx() {
                return Err(Error::WrongContext { operand: Some(Operand::W) });
            }
            if shard.in_features() != k {
                return Err(Error::ShapeMismatch {
                    what: "a shard's in_features vs the first shard's",
                    expected: k,
                    found: shard.in_features(),
                });
            }
            // The header's code and the parameter's bits: `==` would refuse a NaN parameter and
            // take 0.0 for -0.0, whose outputs differ in sign.
            let (code, param) = shard.activation().code();
            let (first_code, first_param) = first.activation().code();
            let same_form = code == first_code && param.to_bits() == first_param.to_bits();
            if shard.scale().to_bits() != scale.to_bits() || !same_form || shard.gemm().precision() != precision {
                return Err(Error::InvalidDevices { reason: "the shards differ in scale, epilogue or precision" });
            }
        }
        let widths: Vec<usize> = shards.iter().map(Linear::out_features).collect();
        let n = widths.iter().sum();
        let shards = streams
            .iter()
            .zip(columns::columns_of_widths(&widths))
            .zip(shards)
            .map(|((stream, columns), linear)| Shard { compute: stream.clone(), columns, linear: Some(linear) })
            .collect();
        Ok(Self::assemble(Comms::init(comm_streams(streams)?)?, shards, k, n, scale, precision))
    }

    /// Devices (shards).
    pub fn devices(&self) -> usize {
        self.shards.len()
    }
    /// Output columns device `g` owns (empty when there are fewer columns than devices).
    pub fn columns(&self, g: usize) -> Option<Range<usize>> {
        self.shards.get(g).map(|s| s.columns.clone())
    }
    /// Device `g`'s layer (`None` for an empty shard or no such device).
    pub fn shard(&self, g: usize) -> Option<&Linear> {
        self.shards.get(g).and_then(|s| s.linear.as_ref())
    }
    /// The stream device `g` computes on.
    pub fn stream(&self, g: usize) -> Option<&Arc<CudaStream>> {
        self.shards.get(g).map(|s| &s.compute)
    }
    /// Input width K.
    pub fn in_features(&self) -> usize {
        self.in_features
    }
    /// Output width N (all shards).
    pub fn out_features(&self) -> usize {
        self.out_features
    }
    /// The scale `s`.
    pub fn scale(&self) -> f32 {
        self.scale
    }
    /// How the shards' operands become TF32.
    pub fn precision(&self) -> Precision {
        self.precision
    }
    /// Row chunks the gathered forward asks for (default 8).
    pub fn gather_chunks(&self) -> usize {
        self.gather_chunks
    }
    /// Splits [`ShardedLinear::forward_gathered`] into about `chunks` row chunks (at least 1;
    /// chunks are whole 128-row tiles and at least 512 rows): chunk c's all-gather runs while
    /// chunk c+1 computes. 1 computes everything first and then gathers.
    pub fn with_gather_chunks(mut self, chunks: usize) -> Self {
        self.set_gather_chunks(chunks);
        self
    }
    /// [`ShardedLinear::with_gather_chunks`] in place.
    pub fn set_gather_chunks(&mut self, chunks: usize) {
        self.gather_chunks = chunks.max(1);
    }
    /// SMs each device leaves free while its GEMM runs next to a gather (default 24): a
    /// persistent GEMM holds every SM it is given until it ends, and what runs beside it needs
    /// SMs of its own: the copies that place the gathered blocks into the output (a same-device
    /// copy waits for SMs, docs/BENCHMARKS.md, "Two GPUs") and, where NCCL cannot gather on the
    /// copy engines, NCCL's kernels. Chunks after the first run with
    /// [`FusedGemm::with_sm_limit`]`(SMs − comm_sms)`; 0 gives the GEMM every SM, and a value of
    /// SMs or more leaves it one.
    pub fn with_comm_sms(mut self, sms: u32) -> Self {
        self.set_comm_sms(sms);
        self
    }
    /// [`ShardedLinear::with_comm_sms`] in place.
    pub fn set_comm_sms(&mut self, sms: u32) {
        self.comm_sms = sms;
    }
    /// SMs left free during an overlapped gather.
    pub fn comm_sms(&self) -> u32 {
        self.comm_sms
    }
    /// How NCCL gathered the last [`ShardedLinear::forward_gathered`] (`None` before the first):
    /// on the copy engines where the library (NCCL ≥ 2.28) and the devices (peer mappings)
    /// allow it, else with its kernels.
    pub fn gather_engine(&self) -> Option<GatherEngine> {
        self.state().buffers.engine()
    }

    /// Each device's shard of the output: `outs[g]` is the dense `rows × columns(g).len()`
    /// block `out[:, columns(g)]` on device g (`None` when it is empty). `xs[g]` is the input,
    /// `rows × in_features` dense, on device g (replicated: [`ShardedLinear::replicate`]).
    /// Launches one fused GEMM per device; no communication, no host synchronisation. Each
    /// shard is bitwise the single-GPU [`Linear::forward`] of its layer ([`ShardedLinear::shard`]).
    pub fn forward(&self, xs: &[CudaSlice<f32>], rows: usize) -> Result<Vec<Option<CudaSlice<f32>>>> {
        self.check_inputs(xs, rows)?;
        let mut outs = Vec::with_capacity(self.shards.len());
        for (shard, x) in self.shards.iter().zip(xs) {
            let Some(linear) = &shard.linear else {
                outs.push(None);
                continue;
            };
            let n = shard.columns.len();
            // SAFETY: every element is written by the kernel before anything reads it.
            let mut out = unsafe { alloc_f32(&shard.compute, rows * n, "rows · shard columns (output bytes)") }?;
            let x = MatrixRef::from_slice(x, rows, self.in_features);
            linear.forward_into_held(
                linear.gemm(),
                &shard.compute,
                &x,
                &mut MatrixMut::from_slice(&mut out, rows, n),
            )?;
            outs.push(Some(out));
        }
        Ok(outs)
    }

    /// Copies `x`, on one of the layer's devices, to every device with an NCCL broadcast:
    /// `replicas[g]` lives on device g, ordered on its compute stream.
    pub fn replicate(&self, x: &CudaSlice<f32>) -> Result<Vec<CudaSlice<f32>>> {
        let ctx = x.context().cu_ctx();
        let root = self
            .shards
            .iter()
            .position(|s| s.compute.context().cu_ctx() == ctx)
            .ok_or(Error::WrongContext { operand: Some(Operand::X) })?;
        let state = self.state();
        let mut replicas = Vec::with_capacity(self.shards.len());
        for shard in &self.shards {
            // SAFETY: written whole by the broadcast before anything reads it (stream order).
            replicas.push(unsafe { alloc_f32(&shard.compute, x.len(), "x (replica bytes)") }?);
        }
        for (g, shard) in self.shards.iter().enumerate() {
            state.comms.rank(g).stream().join(&shard.compute)?;
        }
        state.comms.group(|comms| {
            for (g, replica) in replicas.iter_mut().enumerate() {
                comms.rank(g).broadcast(Some(x).filter(|_| g == root), replica, root)?;
            }
            Ok(())
        })?;
        for (g, shard) in self.shards.iter().enumerate() {
            shard.compute.join(&state.comms.rank(g).stream())?;
        }
        Ok(replicas)
    }

    /// What every constructor checks first: NCCL loads, and the streams are on distinct devices.
    fn check_nccl_and_devices(streams: &[Arc<CudaStream>]) -> Result<()> {
        if !nccl_library_present() {
            return Err(Error::NoNccl);
        }
        if streams.is_empty() {
            return Err(Error::InvalidDevices { reason: "no streams: a sharded layer needs at least one device" });
        }
        let mut ordinals: Vec<usize> = streams.iter().map(|s| s.context().ordinal()).collect();
        ordinals.sort_unstable();
        if ordinals.windows(2).any(|p| p[0] == p[1]) {
            return Err(Error::InvalidDevices { reason: "two streams on one device: one stream per device" });
        }
        Ok(())
    }

    /// The layer from its shards and their communicators.
    fn assemble(
        comms: Comms,
        shards: Vec<Shard>,
        in_features: usize,
        out_features: usize,
        scale: f32,
        precision: Precision,
    ) -> Self {
        let comm = Mutex::new(CommState { buffers: GatherBuffers::default(), comms });
        Self {
            shards,
            in_features,
            out_features,
            scale,
            precision,
            gather_chunks: DEFAULT_GATHER_CHUNKS,
            comm_sms: DEFAULT_COMM_SMS,
            comm,
        }
    }

    /// `xs`: one dense `rows × in_features` input per device, on that device. Zero rows never
    /// pass (the driver allocates no 0-byte input to go with them).
    fn check_inputs(&self, xs: &[CudaSlice<f32>], rows: usize) -> Result<()> {
        if xs.len() != self.shards.len() {
            return Err(Error::ShapeMismatch {
                what: "xs.len() vs devices (one input per device)",
                expected: self.shards.len(),
                found: xs.len(),
            });
        }
        let expected = rows.checked_mul(self.in_features).ok_or(Error::DimensionTooLarge {
            what: "rows (rows · in_features overflows)",
            value: rows,
            max: usize::MAX / self.in_features.max(1),
        })?;
        rows.checked_mul(self.out_features).ok_or(Error::DimensionTooLarge {
            what: "rows (rows · out_features overflows)",
            value: rows,
            max: usize::MAX / self.out_features.max(1),
        })?;
        for (shard, x) in self.shards.iter().zip(xs) {
            if x.len() != expected {
                return Err(Error::ShapeMismatch {
                    what: "xs[g].len() vs rows · in_features",
                    expected,
                    found: x.len(),
                });
            }
            if x.context().cu_ctx() != shard.compute.context().cu_ctx() {
                return Err(Error::WrongContext { operand: Some(Operand::X) });
            }
        }
        if rows > crate::gemm::validate::MAX_DIM {
            return Err(Error::DimensionTooLarge { what: "rows", value: rows, max: crate::gemm::validate::MAX_DIM });
        }
        Ok(())
    }

    /// The communicators and gather buffers. A poisoned lock (a panic elsewhere while it was
    /// held) leaves them usable: every call orders its own streams.
    fn state(&self) -> MutexGuard<'_, CommState> {
        self.comm.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A new stream on each device of `streams`, of the highest priority: the layer's
/// communication streams, so that a gather overlaps the compute stream's next GEMM, and its
/// kernels take the SMs that free up before that GEMM's waiting CTAs do.
fn comm_streams(streams: &[Arc<CudaStream>]) -> Result<Vec<Arc<CudaStream>>> {
    streams
        .iter()
        .map(|s| {
            let ctx = s.context();
            ctx.bind_to_thread()?;
            let (_, highest) = cudarc::driver::result::stream::get_priority_range()?;
            Ok(ctx.new_stream_with_priority(highest)?)
        })
        .collect()
}

/// A host layer's buffers against its shape.
fn check_layer(weight: usize, bias: Option<usize>, in_features: usize, out_features: usize) -> Result<()> {
    if in_features == 0 || out_features == 0 {
        return Err(Error::ShapeMismatch {
            what: "in_features and out_features (a layer has at least one of each)",
            expected: 1,
            found: 0,
        });
    }
    let expected = out_features.checked_mul(in_features).ok_or(Error::DimensionTooLarge {
        what: "in_features (out_features · in_features overflows)",
        value: in_features,
        max: usize::MAX / out_features,
    })?;
    if weight != expected {
        return Err(Error::ShapeMismatch {
            what: "weight.len() vs out_features · in_features",
            expected,
            found: weight,
        });
    }
    if let Some(b) = bias.filter(|&b| b != out_features) {
        return Err(Error::ShapeMismatch { what: "bias.len() vs out_features", expected: out_features, found: b });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_layer_is_checked_before_anything_is_copied() {
        assert!(check_layer(12, Some(3), 4, 3).is_ok());
        assert!(check_layer(12, None, 4, 3).is_ok());
        assert!(matches!(check_layer(11, None, 4, 3), Err(Error::ShapeMismatch { expected: 12, found: 11, .. })));
        assert!(matches!(check_layer(12, Some(4), 4, 3), Err(Error::ShapeMismatch { expected: 3, found: 4, .. })));
        assert!(matches!(check_layer(0, None, 0, 3), Err(Error::ShapeMismatch { .. })));
        assert!(
            matches!(check_layer(0, None, usize::MAX, 2), Err(Error::DimensionTooLarge { value: usize::MAX, max, .. }) if max == usize::MAX / 2)
        );
        assert!(matches!(check_layer(0, None, 4, 0), Err(Error::ShapeMismatch { .. })));
    }

    #[test]
    fn without_nccl_or_devices_constructors_return_typed_errors() {
        // No stream can exist without a driver; the checks run before any stream is touched.
        let err = ShardedLinear::from_host(&[], Precision::Tf32, &[1.0; 4], None, 2, 2, 0.5).unwrap_err();
        if nccl_library_present() {
            assert!(matches!(err, Error::InvalidDevices { .. }), "{err}");
        } else {
            assert!(matches!(err, Error::NoNccl), "{err}");
            assert!(err.to_string().contains("libnccl.so"), "{err}");
        }
    }
}
