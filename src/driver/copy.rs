//! A stream-ordered 2-D copy between device buffers (`cuMemcpy2DAsync`), which cudarc's safe
//! API lacks: the sharded layer places each gathered column block into the full output's rows.

use cudarc::driver::sys::{self, CUmemorytype};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut};

use crate::error::{Error, Operand, Result};

/// Where a block goes in a row-major destination: its first row and column, and the
/// destination's row stride, in elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlockAt {
    pub row: usize,
    pub col: usize,
    pub ld: usize,
}

/// Copies the dense `rows × cols` block `src` into `dst` at `at`, on `stream`. A block that
/// does not lie inside `dst` (or a `src` shorter than `rows·cols`) is an error, never a stray
/// write.
pub(crate) fn copy_block(
    stream: &CudaStream,
    src: &CudaView<'_, f32>,
    rows: usize,
    cols: usize,
    dst: &mut CudaSlice<f32>,
    at: BlockAt,
) -> Result<()> {
    const F32: usize = std::mem::size_of::<f32>();
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    if src.len() < rows * cols {
        return Err(Error::BufferTooSmall { operand: Operand::X, needed: rows * cols, len: src.len() });
    }
    let end = (at.row + rows - 1).checked_mul(at.ld).and_then(|e| e.checked_add(at.col + cols));
    if at.col + cols > at.ld {
        return Err(Error::LeadingDimension { operand: Operand::Out, ld: at.ld, cols: at.col + cols });
    }
    if end.is_none_or(|end| end > dst.len()) {
        return Err(Error::BufferTooSmall { operand: Operand::Out, needed: end.unwrap_or(usize::MAX), len: dst.len() });
    }
    let (src_ptr, _read) = src.device_ptr(stream);
    let (dst_ptr, _written) = dst.device_ptr_mut(stream);
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src_ptr,
        srcArray: std::ptr::null_mut(),
        srcPitch: cols * F32,
        dstXInBytes: at.col * F32,
        dstY: at.row,
        dstMemoryType: CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: dst_ptr,
        dstArray: std::ptr::null_mut(),
        dstPitch: at.ld * F32,
        WidthInBytes: cols * F32,
        Height: rows,
    };
    stream.context().bind_to_thread()?;
    // SAFETY: both ranges lie inside live allocations (checked above), which the guards keep
    // ordered on `stream` through cudarc's events; the descriptor is read during the call.
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, stream.cu_stream()) }.result()?;
    Ok(())
}
