//! Opening a CUDA context without panicking, and the device facts dispatch needs.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext};

use crate::error::{Error, Result};

/// Opens the primary context of device `ordinal`.
///
/// Unlike `CudaContext::new`, which panics when `libcuda` cannot be loaded, this returns
/// [`Error::NoDriver`] on a machine without the NVIDIA driver and [`Error::NoDevice`] when the
/// driver sees no such device. Use it to skip GPU work gracefully.
///
/// Alone, this crate loads `libcuda` at run time. In a build where another crate makes cudarc
/// link it (candle-core does), an executable does not start without `libcuda.so.1`; with the
/// CUDA toolkit's stub library in its place (a build or CI machine), this returns
/// [`Error::NoDriver`] too.
pub fn cuda_context(ordinal: usize) -> Result<Arc<CudaContext>> {
    if !driver_library_present() {
        return Err(Error::NoDriver);
    }
    let count = match CudaContext::device_count() {
        Ok(n) => n.max(0) as usize,
        Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_NO_DEVICE => 0,
        // The stub libcuda that toolkits ship for linking answers every call so.
        Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_STUB_LIBRARY => return Err(Error::NoDriver),
        Err(e) => return Err(e.into()),
    };
    if ordinal >= count {
        return Err(Error::NoDevice { ordinal, count });
    }
    Ok(CudaContext::new(ordinal)?)
}

/// Whether the driver library loads. cudarc has this check only when it loads the library
/// itself (`dynamic-loading`); where it links it, the library is loaded already if the program
/// runs at all, and this says so.
fn driver_library_present() -> bool {
    const NAMES: [&str; 3] = ["libcuda.so.1", "libcuda.so", "nvcuda.dll"];
    // SAFETY: loading the driver library runs its initialisers, as cudarc's own loading does;
    // no symbol is called, and the handle is closed again.
    NAMES.into_iter().any(|name| unsafe { libloading::Library::new(name) }.is_ok())
}

/// What kernel selection needs to know about a device (what fits of each kernel at once is the
/// loaded kernels' business: [`crate::FusedGemm::wave`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceInfo {
    /// Compute capability (major, minor), e.g. (9, 0) for H100/H200.
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// Largest dynamic shared memory a block may opt into, in bytes.
    pub max_smem_per_block: u32,
}

impl DeviceInfo {
    pub(crate) fn query(ctx: &CudaContext) -> Result<Self> {
        use sys::CUdevice_attribute::*;
        let compute_capability = ctx.compute_capability()?;
        let sm_count = ctx.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let max_smem_per_block = ctx.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32;
        Ok(Self { compute_capability, sm_count, max_smem_per_block })
    }

    /// True on sm_90 (H100, H200, GH200): the only chips the sm_90a wgmma kernels run on.
    pub fn is_hopper(&self) -> bool {
        self.compute_capability == (9, 0)
    }
}
