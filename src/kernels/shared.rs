//! One loaded module per CUDA context, shared by every [`crate::FusedGemm`] made for it: a
//! second `FusedGemm::new` on a context whose kernels are loaded takes them from here instead
//! of loading the fatbin again (a module load, the shared-memory attributes and the occupancy
//! queries of every kernel). The map holds weak references, so the module is unloaded and the
//! context can be destroyed once the last handle that uses them is dropped.

use std::sync::{Arc, Mutex, Weak};

use cudarc::driver::CudaContext;

use super::loaded::LoadedKernels;
use crate::device::DeviceInfo;
use crate::error::{Error, Result};

/// Loaded modules by raw context handle. A handle value is only reused after its context was
/// destroyed, and a live entry keeps its context alive (`LoadedKernels::ctx`), so a live entry
/// always belongs to the context it is keyed by; dead ones are skipped and swept.
static LOADED: Mutex<Vec<(usize, Weak<LoadedKernels>)>> = Mutex::new(Vec::new());

/// The kernels loaded into `ctx`: those already loaded there, or a fresh load. Refuses devices
/// older than sm_80 with [`Error::UnsupportedDevice`] before loading anything.
pub(crate) fn loaded_kernels(ctx: &Arc<CudaContext>) -> Result<Arc<LoadedKernels>> {
    let key = ctx.cu_ctx() as usize;
    // A poisoned lock only means another thread panicked while holding it; the map stays valid.
    let mut map = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    map.retain(|(_, weak)| weak.strong_count() > 0);
    if let Some(kernels) = map.iter().filter(|(k, _)| *k == key).find_map(|(_, weak)| weak.upgrade()) {
        return Ok(kernels);
    }
    // Loading under the lock: two threads asking for the same context load it once.
    let device = DeviceInfo::query(ctx)?;
    if device.compute_capability.0 < 8 {
        let (major, minor) = device.compute_capability;
        return Err(Error::UnsupportedDevice { major, minor });
    }
    let kernels = Arc::new(LoadedKernels::load(ctx, device)?);
    map.push((key, Arc::downgrade(&kernels)));
    Ok(kernels)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Needs a GPU: skips (prints `skipped:`) without one, fails with
    /// `GEMM_EPILOGUE_REQUIRE_GPU=1`.
    #[test]
    fn a_context_loads_its_kernels_once_while_a_handle_holds_them() {
        let ctx = match crate::cuda_context(0) {
            Ok(ctx) => ctx,
            Err(e) if std::env::var("GEMM_EPILOGUE_REQUIRE_GPU").is_ok_and(|v| v.trim() == "1") => {
                panic!("no usable GPU: {e}")
            }
            Err(e) => return println!("skipped: {e}"),
        };
        let first = crate::FusedGemm::new(&ctx).expect("first handle");
        let second = crate::FusedGemm::new(&ctx).expect("second handle");
        assert!(Arc::ptr_eq(&first.kernels, &second.kernels), "the second handle shares the first's module");
        let weak = Arc::downgrade(&first.kernels);
        drop((first, second));
        assert_eq!(weak.strong_count(), 0, "the map does not keep the module loaded");
        let third = crate::FusedGemm::new(&ctx).expect("third handle");
        assert_eq!(loaded_kernels(&ctx).map(|k| Arc::ptr_eq(&k, &third.kernels)).ok(), Some(true));
    }
}
