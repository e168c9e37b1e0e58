//! What the driver knows about raw handles a caller passes in (`FusedGemm::run_raw`): which
//! device an address belongs to and where its allocation ends, and a stream's context.

use std::ffi::c_void;

use cudarc::driver::sys::{self, CUpointer_attribute};
use cudarc::driver::CudaContext;

use crate::error::Result;

/// Device ordinal of the allocation holding `ptr`, and the address one past its end.
pub(crate) fn allocation(ctx: &CudaContext, ptr: u64) -> Result<(i32, u64)> {
    ctx.bind_to_thread()?;
    let (mut ordinal, mut start, mut size): (i32, u64, usize) = (-1, 0, 0);
    // SAFETY: each call writes one value of the attribute's documented type (int,
    // CUdeviceptr, size_t) into a live local; an unknown address is an error status, not UB.
    unsafe {
        let attr = |data: *mut c_void, a: CUpointer_attribute| sys::cuPointerGetAttribute(data, a, ptr).result();
        attr((&mut ordinal as *mut i32).cast(), CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)?;
        attr((&mut start as *mut u64).cast(), CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR)?;
        attr((&mut size as *mut usize).cast(), CUpointer_attribute::CU_POINTER_ATTRIBUTE_RANGE_SIZE)?;
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
