//! The gathered forward's buffers, and the engine NCCL gathers them with.
//!
//! Per device and per row chunk, one buffer of G blocks (one per device, each as wide as the
//! widest shard) that an in-place all-gather fills. Where the library has copy-engine
//! collectives (NCCL ≥ 2.28), each buffer is NCCL memory (`ncclMemAlloc`) registered on every
//! rank as a symmetric window (`ncclCommWindowRegister`, `NCCL_WIN_COLL_SYMMETRIC`): with the
//! communicators' zero-CTA policy (`comms.rs`) the all-gather is then peer copies on the copy
//! engines and takes no SM from the GEMM it overlaps (the block copies that follow it still
//! need some: `ShardedLinear::with_comm_sms`). NCCL registers no window where the devices
//! cannot map each other's memory; the buffers then stay ordinary and NCCL gathers with its
//! kernels, which need SMs of their own.

use std::ffi::{c_int, c_void};
use std::mem::ManuallyDrop;
use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};
use cudarc::nccl::{result::NcclError, sys};

use super::comms::Comms;
use crate::error::Result;
use crate::linear::{alloc_f32, f32_bytes};

/// How NCCL moves a gathered forward's blocks between devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatherEngine {
    /// Peer copies on the copy engines (symmetric windows, NCCL ≥ 2.28): the transfer takes no
    /// SM from the GEMM running next to it.
    CopyEngines,
    /// NCCL's kernels: they need SMs while the next chunk's GEMM runs.
    Kernels,
}

/// What a gather buffer's size counts, for the error that refuses one too large.
const BUFFER: &str = "gather buffer (ranks · rows per chunk · widest shard, bytes)";

/// `NCCL_WIN_COLL_SYMMETRIC`: every rank's window has the same size and is used at the same
/// offsets.
const WIN_COLL_SYMMETRIC: c_int = 0x01;

/// Every device's buffers: `chunks[c][g]` is chunk c's buffer on device g.
#[derive(Debug, Default)]
pub(crate) struct GatherBuffers {
    chunks: Vec<Vec<GatherBuffer>>,
    /// f32 per buffer (all equal).
    len: usize,
    engine: Option<GatherEngine>,
}

/// One device's buffer of one chunk.
#[derive(Debug)]
struct GatherBuffer {
    slice: ManuallyDrop<CudaSlice<f32>>,
    /// Set when the buffer is NCCL memory.
    nccl: Option<NcclMemory>,
}

/// An `ncclMemAlloc` allocation and its window on `comm` (null until registered, and where
/// NCCL registers none).
#[derive(Debug)]
struct NcclMemory {
    comm: sys::ncclComm_t,
    ptr: *mut c_void,
    window: sys::ncclWindow_t,
}

// SAFETY: the handles are used only by the owner of the layer's `CommState`, behind its mutex.
unsafe impl Send for GatherBuffer {}

impl GatherBuffers {
    /// The engine of the buffers held (`None` before the first gathered forward).
    pub fn engine(&self) -> Option<GatherEngine> {
        self.engine
    }

    /// Chunk `c`'s buffer on device `g`.
    pub fn buffer(&mut self, c: usize, g: usize) -> &mut CudaSlice<f32> {
        &mut self.chunks[c][g].slice
    }

    /// At least `chunks` chunks of buffers of at least `len` f32 on every device, allocated on
    /// the compute streams `compute` (one per rank of `comms`) and kept for the next calls;
    /// buffers too small are freed (after `release`) and replaced.
    pub fn reserve(&mut self, comms: &Comms, compute: &[Arc<CudaStream>], len: usize, chunks: usize) -> Result<()> {
        if self.len < len && !self.chunks.is_empty() {
            self.release(comms)?;
        }
        self.len = self.len.max(len);
        while self.chunks.len() < chunks {
            let chunk = self.allocate(comms, compute)?;
            self.chunks.push(chunk);
        }
        Ok(())
    }

    /// Frees every buffer once no stream can touch them: the last users are the
    /// communication streams (each rank's gather writes into the other ranks' buffers and its
    /// block copies read its own), so those are waited for first: windows are unmapped on the
    /// host, outside stream order.
    pub fn release(&mut self, comms: &Comms) -> Result<()> {
        if self.chunks.is_empty() {
            return Ok(());
        }
        for stream in comms.streams() {
            stream.synchronize()?;
        }
        self.chunks.clear();
        Ok(())
    }

    /// One chunk's buffers, a window on each where NCCL registers them.
    fn allocate(&mut self, comms: &Comms, compute: &[Arc<CudaStream>]) -> Result<Vec<GatherBuffer>> {
        let len = self.len;
        if !comms.has_copy_engine_gathers() || self.engine == Some(GatherEngine::Kernels) {
            self.engine = Some(GatherEngine::Kernels);
            return compute.iter().map(|s| GatherBuffer::stream_ordered(s, len)).collect();
        }
        let mut chunk = Vec::with_capacity(compute.len());
        for (rank, stream) in comms.ranks().iter().zip(compute) {
            chunk.push(GatherBuffer::nccl(rank.handle(), stream, len)?);
        }
        // Registration is collective: every rank's call of one buffer, in one group.
        let mut windows = vec![std::ptr::null_mut(); chunk.len()];
        comms.group(|_| {
            for (buffer, window) in chunk.iter().zip(windows.iter_mut()) {
                buffer.register(len, window)?;
            }
            Ok(())
        })?;
        // The handles are filled at the group's end; null: NCCL has no symmetric memory here.
        for (buffer, window) in chunk.iter_mut().zip(&windows) {
            if let Some(memory) = buffer.nccl.as_mut() {
                memory.window = *window;
            }
        }
        let registered = windows.iter().all(|w| !w.is_null());
        self.engine = Some(if registered { GatherEngine::CopyEngines } else { GatherEngine::Kernels });
        Ok(chunk)
    }
}

impl GatherBuffer {
    /// A stream-ordered allocation.
    fn stream_ordered(stream: &Arc<CudaStream>, len: usize) -> Result<Self> {
        // SAFETY: scratch: each chunk's blocks are written (GEMM, all-gather) before they are
        // read (all-gather, block copies), in stream order.
        let slice = unsafe { alloc_f32(stream, len, BUFFER) }?;
        Ok(Self { slice: ManuallyDrop::new(slice), nccl: None })
    }

    /// `ncclMemAlloc` on the device of `stream`, owned by `stream` from then on.
    fn nccl(comm: sys::ncclComm_t, stream: &Arc<CudaStream>, len: usize) -> Result<Self> {
        let bytes = f32_bytes(len, BUFFER)?;
        stream.context().bind_to_thread()?;
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` outlives the call; NCCL allocates on the current (bound) device.
        unsafe { sys::ncclMemAlloc(&mut ptr, bytes) }.result()?;
        // SAFETY: `ptr` is a live allocation of `bytes` on this stream's device; it is never
        // freed by cudarc (`leak` in `drop`) but by `ncclMemFree`. Scratch, as above.
        let slice = unsafe { stream.upgrade_device_ptr::<f32>(ptr as u64, len) };
        Ok(Self { slice: ManuallyDrop::new(slice), nccl: Some(NcclMemory { comm, ptr, window: std::ptr::null_mut() }) })
    }

    /// Queues this rank's `ncclCommWindowRegister` of the buffer (inside a group).
    fn register(&self, len: usize, window: &mut sys::ncclWindow_t) -> Result<()> {
        let Some(memory) = &self.nccl else { return Ok(()) };
        // SAFETY: `ptr` is this buffer's NCCL allocation of `len` f32 on the communicator's
        // device; `window` lives until the group ends (the caller's).
        unsafe {
            sys::ncclCommWindowRegister(memory.comm, memory.ptr, f32_bytes(len, BUFFER)?, window, WIN_COLL_SYMMETRIC)
        }
        .result()?;
        Ok(())
    }
}

impl Drop for GatherBuffer {
    fn drop(&mut self) {
        // SAFETY: taken once, here.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        let Some(memory) = self.nccl.take() else {
            drop(slice);
            return;
        };
        // No stream uses the buffer any more (`GatherBuffers::release`, `CommState`'s drop),
        // and the communicator outlives it (`CommState` drops its buffers first).
        let _ = slice.stream().context().bind_to_thread();
        // NCCL's memory: freed below, not by cudarc.
        let _ = slice.leak();
        // SAFETY: this buffer's window on its communicator (where NCCL registered one) and its
        // NCCL allocation, each released once. Errors have nowhere to go in a drop.
        unsafe {
            if !memory.window.is_null() {
                let _: std::result::Result<_, NcclError> =
                    sys::ncclCommWindowDeregister(memory.comm, memory.window).result();
            }
            let _: std::result::Result<_, NcclError> = sys::ncclMemFree(memory.ptr).result();
        }
    }
}
