//! The fatbins loaded into one context (one module per translation unit of csrc/units/): every
//! kernel the device can run looked up once, its shared-memory limit raised, and how many of its
//! CTAs (or clusters) fit on the device at once.
//! Occupancy is private to this module and to dispatch: it depends on the loaded kernels, not on
//! the device alone.

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
use cudarc::driver::sys::CUresult;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, DriverError, LaunchConfig};
use cudarc::nvrtc::Ptx;

use super::catalogue::{Family, Kernel, KERNEL_COUNT};
use crate::device::DeviceInfo;
use crate::driver::launch;
use crate::error::Result;

/// A translation unit's fatbin, as build.rs compiled it: SASS for sm_80 and sm_90a, PTX for newer
/// chips.
pub(crate) struct Unit {
    /// The file stem of its source in csrc/units/ (the tests name it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub name: &'static str,
    pub fatbin: &'static [u8],
}

// `UNITS: [Unit; _]`, and `ENTRY_UNITS: [(&str, usize); _]`: each kernel's index in UNITS, by
// name (build.rs reads it from ptxas's report of compiling the kernel).
include!(concat!(env!("OUT_DIR"), "/units.rs"));

/// The index in [`UNITS`] of the unit that holds the kernel `name`.
fn unit_of(name: &str) -> Option<usize> {
    ENTRY_UNITS.iter().find(|(n, _)| *n == name).map(|&(_, unit)| unit)
}

/// The repack kernel's symbol (`csrc/elementwise/repack_tf32.cuh`).
const REPACK: &str = "ge_repack_tf32";

/// What fits on the device at once, per kernel: sizes the persistent grids and stream-K's waves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Occupancy {
    /// 2-CTA clusters of the cluster kernels resident at once (`cuOccupancyMaxActiveClusters`;
    /// the cluster kernels share one block and shared-memory size, so one answer serves all).
    /// 0 where they cannot run: not sm_90, or the query failed or said 0.
    pub max_active_clusters: u32,
    /// CTAs of each kernel resident per SM (`cuOccupancyMaxActiveBlocksPerMultiprocessor`),
    /// indexed like [`Kernel::ALL`]; 1 where unknown.
    pub ctas_per_sm: [u32; KERNEL_COUNT],
}

impl Occupancy {
    /// Before anything is loaded: one CTA per SM, no cluster.
    pub const NONE: Self = Self { max_active_clusters: 0, ctas_per_sm: [1; KERNEL_COUNT] };

    /// A wave of `kernel` on `device`: what runs at once. One CTA per SM for the persistent
    /// sm_90 kernels (counted in clusters for the cluster kernels), the resident CTAs for
    /// mma.sync, skinny and GEMV.
    pub fn wave(&self, device: &DeviceInfo, kernel: Kernel) -> u32 {
        match kernel.family() {
            Family::TmaWgmma if kernel.cluster_m() > 1 => self.max_active_clusters,
            Family::TmaWgmma => device.sm_count,
            Family::MmaSync | Family::Skinny | Family::Gemv => {
                device.sm_count * self.ctas_per_sm[kernel.index()].max(1)
            }
        }
    }
}

/// Why `kernel` cannot run on `device` whatever the call, if it cannot: the facts known before
/// the module is loaded (architecture, shared memory) and, once loaded, whether a cluster fits.
pub(crate) fn unsupported(kernel: Kernel, device: &DeviceInfo, occupancy: &Occupancy) -> Option<&'static str> {
    let spec = kernel.spec();
    if spec.family == Family::TmaWgmma && !device.is_hopper() {
        return Some("the TMA + wgmma kernels are built for sm_90a and need an sm_90 device");
    }
    if spec.family == Family::Skinny && !device.is_hopper() {
        return Some("the skinny kernels split K over thread-block clusters and need an sm_90 device");
    }
    if spec.smem_bytes > device.max_smem_per_block {
        return Some("the device has too little shared memory per block for this tile");
    }
    if spec.cluster_m > 1 && occupancy.max_active_clusters == 0 {
        return Some(
            "no 2-CTA cluster of this kernel fits on the device (cuOccupancyMaxActiveClusters failed or returned 0)",
        );
    }
    None
}

/// The loaded modules and what [`crate::FusedGemm`] launches from them.
pub(crate) struct LoadedKernels {
    pub ctx: Arc<CudaContext>,
    pub device: DeviceInfo,
    pub occupancy: Occupancy,
    /// One per [`UNITS`], in its order.
    modules: Vec<Arc<CudaModule>>,
    functions: [Option<CudaFunction>; KERNEL_COUNT],
    pub repack: CudaFunction,
}

impl LoadedKernels {
    pub fn load(ctx: &Arc<CudaContext>, device: DeviceInfo) -> Result<Self> {
        let modules = UNITS
            .iter()
            .map(|unit| ctx.load_module(Ptx::from_binary(unit.fatbin.to_vec())))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let load_function = |name: &str| load_function(&modules, name);
        let mut functions: [Option<CudaFunction>; KERNEL_COUNT] = std::array::from_fn(|_| None);
        // Answers below fill this in; until then a cluster kernel counts as not fitting, which
        // `unsupported` ignores for the checks made before the cluster query.
        let mut occupancy = Occupancy::NONE;
        let mut clusters_asked = false;
        for kernel in Kernel::ALL {
            let spec = kernel.spec();
            let before_cluster_query = Occupancy { max_active_clusters: u32::MAX, ..occupancy };
            if unsupported(kernel, &device, &before_cluster_query).is_some() {
                continue;
            }
            let function = load_function(spec.name)?;
            // Before the occupancy queries: they count with this much shared memory per CTA.
            function.set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, spec.smem_bytes as i32)?;
            if spec.cluster_m > 1 {
                // One block size, smem size and cluster shape for every cluster kernel (a unit
                // test checks it); each is asked and the smallest answer kept. A failed query
                // leaves the kernel out (`unsupported` then says why) rather than failing the
                // load of every other kernel.
                let probe = LaunchConfig {
                    grid_dim: (spec.cluster_m * (device.sm_count / spec.cluster_m).max(1), 1, 1),
                    block_dim: (spec.threads, 1, 1),
                    shared_mem_bytes: spec.smem_bytes,
                };
                let clusters = launch::max_active_clusters(ctx, &function, probe, (spec.cluster_m, 1, 1)).unwrap_or(0);
                occupancy.max_active_clusters =
                    if clusters_asked { occupancy.max_active_clusters.min(clusters) } else { clusters };
                clusters_asked = true;
                if unsupported(kernel, &device, &occupancy).is_some() {
                    continue;
                }
            }
            // Waves of the mma.sync kernels (stream-K). A failed query leaves the default, 1.
            if let Ok(n) =
                function.occupancy_max_active_blocks_per_multiprocessor(spec.threads, spec.smem_bytes as usize, None)
            {
                occupancy.ctas_per_sm[kernel.index()] = n.max(1);
            }
            functions[kernel.index()] = Some(function);
        }
        let repack = load_function(REPACK)?;
        Ok(Self { ctx: ctx.clone(), device, occupancy, modules, functions, repack })
    }

    /// Any kernel of the fatbins by its symbol, also one outside the table (the testbed's
    /// elementwise pass).
    #[cfg_attr(not(feature = "testbed"), allow(dead_code))]
    pub fn load_function(&self, name: &str) -> Result<CudaFunction> {
        load_function(&self.modules, name)
    }

    /// The loaded function of `kernel` (`None`: the device cannot run it).
    pub fn function(&self, kernel: Kernel) -> Option<&CudaFunction> {
        self.functions[kernel.index()].as_ref()
    }
}

/// `name` from the module of its unit; a name no unit holds is the driver's "not found", as
/// from one module.
fn load_function(modules: &[Arc<CudaModule>], name: &str) -> Result<CudaFunction> {
    let module = unit_of(name).and_then(|u| modules.get(u));
    let module = module.ok_or(DriverError(CUresult::CUDA_ERROR_NOT_FOUND))?;
    Ok(module.load_function(name)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ptxas's report of the build that made [`UNITS`] (build.rs keeps it next to them): the
    /// fatbins themselves are compressed, their names unreadable in them.
    const PTXAS_REPORT: &str = include_str!(concat!(env!("OUT_DIR"), "/nvcc-resource-usage.txt"));

    fn compiled_for(name: &str, arch: &str) -> bool {
        PTXAS_REPORT.contains(&format!("Compiling entry function '{name}' for '{arch}'"))
    }

    #[test]
    fn every_kernel_is_in_one_unit() {
        assert!(UNITS.iter().all(|u| u.fatbin.len() > 1024), "empty fatbin: was the crate built with DOCS_RS set?");
        // Every entry compiled to SASS for both targets (an sm_90 one's sm_80 build is a stub),
        // in exactly one unit, which loading looks it up in.
        for name in Kernel::ALL.iter().map(|k| k.name()).chain([REPACK, "ge_elementwise_epilogue"]) {
            for arch in ["sm_80", "sm_90a"] {
                assert!(compiled_for(name, arch), "{name} missing for {arch}");
            }
            assert_eq!(ENTRY_UNITS.iter().filter(|(n, _)| *n == name).count(), 1, "{name}");
            assert!(unit_of(name).is_some_and(|u| u < UNITS.len()), "{name}");
        }
        assert_eq!(unit_of("ge_no_such_kernel"), None);
        // Every unit holds a kernel, and the entries are ptxas's, nothing else.
        for (i, unit) in UNITS.iter().enumerate() {
            assert!(ENTRY_UNITS.iter().any(|&(_, u)| u == i), "unit {} holds no kernel", unit.name);
        }
        assert_eq!(ENTRY_UNITS.len(), PTXAS_REPORT.matches("Compiling entry function").count() / 2);
    }

    const H200: DeviceInfo = DeviceInfo { compute_capability: (9, 0), sm_count: 132, max_smem_per_block: 232_448 };
    const A100: DeviceInfo = DeviceInfo { compute_capability: (8, 0), sm_count: 108, max_smem_per_block: 166_912 };

    #[test]
    fn cluster_kernels_need_room_for_a_cluster() {
        let fits = Occupancy { max_active_clusters: 66, ..Occupancy::NONE };
        assert_eq!(unsupported(Kernel::Sm90Pingpong128x128Cluster2SmemA, &H200, &fits), None);
        let why = unsupported(Kernel::Sm90Pingpong128x128Cluster2SmemA, &H200, &Occupancy::NONE).expect("refused");
        assert!(why.contains("cluster"), "{why}");
        // The plain kernels do not care.
        assert_eq!(unsupported(Kernel::Sm90Pingpong128x128SmemA, &H200, &Occupancy::NONE), None);
        assert!(unsupported(Kernel::Sm90Pingpong128x128Cluster2SmemA, &A100, &fits)
            .expect("refused")
            .contains("sm_90"));
        // The skinny kernels' clusters are the plan's, not the table's: sm_90 is all they need.
        assert_eq!(unsupported(Kernel::Sm90Skinny8x16, &H200, &Occupancy::NONE), None);
        assert!(unsupported(Kernel::Sm90Skinny8x16, &A100, &fits).expect("refused").contains("sm_90"));
    }

    #[test]
    fn a_tile_fits_in_exactly_the_shared_memory_the_device_allows() {
        // The 128×256 mma.sync tile takes 144 KiB: a device allowing exactly that runs it, one
        // allowing a byte less does not (sm_86/89 allow 99 KiB, sm_80 163 KiB).
        let k = Kernel::Sm80Mma128x256Vec4;
        let smem = k.spec().smem_bytes;
        let exact = DeviceInfo { max_smem_per_block: smem, ..A100 };
        assert_eq!(unsupported(k, &exact, &Occupancy::NONE), None);
        let short = DeviceInfo { max_smem_per_block: smem - 1, ..A100 };
        assert!(unsupported(k, &short, &Occupancy::NONE).expect("refused").contains("shared memory"));
    }

    #[test]
    fn waves_count_what_runs_at_once() {
        let mut o = Occupancy { max_active_clusters: 60, ..Occupancy::NONE };
        o.ctas_per_sm[Kernel::Sm80Mma128x128Vec4.index()] = 2;
        assert_eq!(o.wave(&H200, Kernel::Sm90Pingpong128x128SmemA), 132);
        assert_eq!(o.wave(&H200, Kernel::Sm90Cooperative128x256Cluster2SmemA), 60);
        assert_eq!(o.wave(&H200, Kernel::Sm80Mma128x128Vec4), 264);
        assert_eq!(o.wave(&A100, Kernel::Sm80Mma128x256Vec4), 108);
    }
}
