//! What the driver knows about raw handles a caller passes in (`FusedGemm::run_raw`): which
//! device an address belongs to and where its allocation ends, and a stream's context.

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUpointer_attribute};
use cudarc::driver::{CudaContext, DriverError};

use crate::error::Result;

/// Device ordinal of the allocation holding `ptr`, and the address one past its end.
pub(crate) fn allocation(ctx: &CudaContext, ptr: u64) -> Result<(i32, u64)> {
    ctx.bind_to_thread()?;
    let (mut ordinal, mut start, mut size): (i32, u64, usize) = (-1, 0, 0);
    // One query for the three (a call's addresses are checked on every call). Unlike
    // cuPointerGetAttribute it succeeds on an address the driver does not know, leaving the
    // values at their defaults: an allocation that starts at 0 is no allocation.
    let mut attributes = [
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE,
    ];
    let mut data: [*mut c_void; 3] =
        [(&mut ordinal as *mut i32).cast(), (&mut start as *mut u64).cast(), (&mut size as *mut usize).cast()];
    // SAFETY: three attributes, each with a pointer to a live local of its documented type
    // (int, CUdeviceptr, size_t); an unknown address leaves them as they are.
    unsafe { sys::cuPointerGetAttributes(3, attributes.as_mut_ptr(), data.as_mut_ptr(), ptr) }.result()?;
    if start == 0 {
        return Err(DriverError(sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE).into());
    }
    Ok((ordinal, start.saturating_add(size as u64)))
}

/// The context `stream` belongs to (the null stream: the context current on this thread, which
/// this binds to `ctx` first).
///
/// # Safety
/// `stream` is null or a stream handle that has not been destroyed.
pub(crate) unsafe fn stream_context(ctx: &CudaContext, stream: sys::CUstream) -> Result<sys::CUcontext> {
    ctx.bind_to_thread()?;
    let mut owner: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the caller vouches for the handle; the driver writes one handle into `owner`.
    unsafe { sys::cuStreamGetCtx(stream, &mut owner) }.result()?;
    Ok(owner)
}
