//! Devices for the unit tests of dispatch and stream-K, with what `LoadedKernels::load` fills in
//! on them.

use crate::device::DeviceInfo;
use crate::kernels::loaded::Occupancy;
use crate::kernels::Kernel;

pub const H200: DeviceInfo = DeviceInfo { compute_capability: (9, 0), sm_count: 132, max_smem_per_block: 232_448 };
pub const A100: DeviceInfo = DeviceInfo { compute_capability: (8, 0), sm_count: 108, max_smem_per_block: 166_912 };
pub const RTX4090: DeviceInfo = DeviceInfo { compute_capability: (8, 9), sm_count: 128, max_smem_per_block: 101_376 };

/// 66 clusters on sm_90 (one 2-CTA cluster per SM pair; clusters must fit in one GPC, so the
/// real figure may be lower), none elsewhere. CTAs per SM: the 96 KiB mma.sync kernels fit twice
/// on sm_80/sm_90, the 64 KiB ones three times on sm_90 and twice on sm_80 (what the occupancy
/// query says), once on sm_89; everything else once.
pub fn occupancy(d: &DeviceInfo) -> Occupancy {
    let (clusters, mid, small) = match d.compute_capability {
        (9, 0) => (66, 2, 3),
        (8, 0) => (0, 1, 2),
        _ => (0, 1, 1),
    };
    let mut o = Occupancy { max_active_clusters: clusters, ..Occupancy::NONE };
    for k in Kernel::ALL {
        o.ctas_per_sm[k.index()] = match k.tile() {
            (128, 128, _) if k.family() == crate::Family::MmaSync => mid,
            (64, 64, _) if k.family() == crate::Family::MmaSync => small,
            _ => 1,
        };
    }
    o
}
