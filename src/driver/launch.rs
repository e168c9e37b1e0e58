//! Launches that cudarc's `LaunchArgs` cannot express: kernels run in thread-block clusters,
//! through `cuLaunchKernelEx` with a `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION` attribute, and the
//! occupancy query (`cuOccupancyMaxActiveClusters`) that sizes their persistent grids.
//! Like cudarc's launches, nothing here allocates or synchronises, so a cluster launch can be
//! captured into a CUDA graph.

use std::ffi::c_void;

use cudarc::driver::sys::{
    self, CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributeValue, CUlaunchAttributeValue_union__bindgen_ty_1,
    CUlaunchConfig,
};
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, DeviceRepr, LaunchConfig};

use crate::error::Result;

/// The one launch attribute: clusters of `x × y × z` CTAs.
fn cluster_attribute((x, y, z): (u32, u32, u32)) -> CUlaunchAttribute {
    let mut value = CUlaunchAttributeValue { pad: [0; 64] };
    value.clusterDim = CUlaunchAttributeValue_union__bindgen_ty_1 { x, y, z };
    CUlaunchAttribute { id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, pad: [0; 4], value }
}

/// The driver's launch configuration for `cfg` on `stream`, with `attrs`.
fn driver_config(cfg: LaunchConfig, stream: sys::CUstream, attrs: &mut [CUlaunchAttribute]) -> CUlaunchConfig {
    CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream,
        attrs: attrs.as_mut_ptr(),
        numAttrs: attrs.len() as u32,
    }
}

/// How many clusters of `cluster` CTAs of `function`, each launched as `cfg` says (block size and
/// dynamic shared memory; the grid only has to be a whole number of clusters), can be resident
/// on the device at once. The function's `MAX_DYNAMIC_SHARED_SIZE_BYTES` attribute must already
/// allow `cfg.shared_mem_bytes`.
pub(crate) fn max_active_clusters(
    ctx: &CudaContext,
    function: &CudaFunction,
    cfg: LaunchConfig,
    cluster: (u32, u32, u32),
) -> Result<u32> {
    ctx.bind_to_thread()?;
    let mut attrs = [cluster_attribute(cluster)];
    let config = driver_config(cfg, std::ptr::null_mut(), &mut attrs);
    let mut clusters: std::ffi::c_int = 0;
    // SAFETY: `config` and the attribute array it points to are live locals for the whole call;
    // the function handle belongs to a module that `function`'s owner keeps loaded, in `ctx`,
    // which is current on this thread; the driver writes one int into `clusters`.
    unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, function.cu_function(), &config) }.result()?;
    Ok(clusters.max(0) as u32)
}

/// Launches `function(params)` on `stream` as `cfg` says, in clusters of `cluster` CTAs.
///
/// # Safety
///
/// As for cudarc's `LaunchArgs::launch`, and more:
/// - `P` is exactly the kernel's one by-value parameter (layout, size), and everything it
///   points to is valid for what the kernel does with it until the kernel has finished on
///   `stream`: the caller keeps the buffers' stream-ordered guards alive across this call;
/// - `cfg.grid_dim` is a whole number of clusters (for a persistent kernel, best no more than
///   [`max_active_clusters`]: the rest would run as a second wave);
/// - the function's dynamic shared memory limit allows `cfg.shared_mem_bytes`.
pub(crate) unsafe fn launch_clustered<P: DeviceRepr>(
    stream: &CudaStream,
    function: &CudaFunction,
    cfg: LaunchConfig,
    cluster: (u32, u32, u32),
    params: &P,
) -> Result<()> {
    stream.context().bind_to_thread()?;
    let mut attrs = [cluster_attribute(cluster)];
    let config = driver_config(cfg, stream.cu_stream(), &mut attrs);
    // The driver copies the parameter bytes out of `params` during the call.
    let mut args = [params as *const P as *mut c_void];
    // SAFETY: `config`, its attribute array and `args` are live locals for the whole call;
    // `args[0]` points at a `P`, the kernel's parameter (caller's contract); the stream and the
    // function belong to the context bound above; the caller keeps every buffer the kernel touches
    // alive and ordered on `stream`.
    unsafe { sys::cuLaunchKernelEx(&config, function.cu_function(), args.as_mut_ptr(), std::ptr::null_mut()) }
        .result()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_attribute_says_2_by_1_by_1() {
        let a = cluster_attribute((2, 1, 1));
        assert_eq!(a.id, CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
        // SAFETY: clusterDim is the member written above.
        let d = unsafe { a.value.clusterDim };
        assert_eq!((d.x, d.y, d.z), (2, 1, 1));
        let mut attrs = [a];
        let cfg = LaunchConfig { grid_dim: (132, 1, 1), block_dim: (384, 1, 1), shared_mem_bytes: 198_656 };
        let c = driver_config(cfg, std::ptr::null_mut(), &mut attrs);
        assert_eq!((c.gridDimX, c.blockDimX, c.sharedMemBytes, c.numAttrs), (132, 384, 198_656, 1));
        assert_eq!((c.gridDimY, c.gridDimZ, c.blockDimY, c.blockDimZ), (1, 1, 1, 1));
    }
}
