//! How a [`Family::Skinny`] kernel splits K: the CTAs per cluster of a launch (the kernels' side
//! is `csrc/skinny/`). Every 16 rows of W get one cluster; its CTAs take contiguous ranges of
//! k-steps and add their sums through distributed shared memory, so a split costs no
//! workspace and no second pass.

use super::shape::Shape;
use crate::device::DeviceInfo;
use crate::kernels::catalogue::Family;
use crate::kernels::Kernel;

/// Least k-steps per warp for which splitting K further is worth another CTA: with fewer, a
/// warp's ring has nothing to overlap (docs/BENCHMARKS.md, "Decoding sizes: the skinny
/// kernels").
const MIN_STEPS_PER_WARP: u64 = 2;

/// CTAs per cluster for `kernel` on `s`: enough clusters × CTAs to give every SM one CTA, at
/// most [`crate::sys::GE_SKINNY_MAX_SPLIT`], and no more than leaves every warp
/// `MIN_STEPS_PER_WARP` k-steps; at least 1. (W is streamed once, so beyond one CTA per SM a
/// split only adds partial sums: docs/BENCHMARKS.md, "Decoding sizes: the skinny kernels",
/// measured every larger split slower.)
pub(crate) fn split(device: &DeviceInfo, kernel: Kernel, s: Shape) -> u32 {
    let spec = kernel.spec();
    debug_assert_eq!(spec.family, Family::Skinny);
    let clusters = (s.n as u64).div_ceil(spec.tile_n as u64).max(1);
    let fill = (device.sm_count as u64).div_ceil(clusters);
    let warps = (spec.threads / 32) as u64;
    let steps = s.k_blocks(kernel);
    let deep = steps / (warps * MIN_STEPS_PER_WARP);
    fill.min(deep).clamp(1, crate::sys::GE_SKINNY_MAX_SPLIT as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::test_devices::H200;

    fn split_of(kernel: Kernel, n: usize, k: usize) -> u32 {
        split(&H200, kernel, Shape { m: 1, n, k })
    }

    #[test]
    fn splits_fill_the_sms_while_every_warp_keeps_two_steps() {
        let k8 = Kernel::Sm90Skinny8x16;
        // 48 clusters: 3 CTAs each fill 132 SMs; 96 steps leave each of 8 warps 4.
        assert_eq!(split_of(k8, 768, 3072), 3);
        // 64 clusters want 3, but 32 steps over 8 warps allow 2.
        assert_eq!(split_of(k8, 1024, 1024), 2);
        // 192 and 256 clusters fill the SMs alone.
        assert_eq!(split_of(k8, 3072, 768), 1);
        assert_eq!(split_of(k8, 4096, 4096), 1);
        // One cluster on a long K: capped at the portable cluster size.
        assert_eq!(split_of(k8, 16, 1 << 20), crate::sys::GE_SKINNY_MAX_SPLIT);
        // K = 0 or a few steps: no split.
        assert_eq!(split_of(k8, 16, 0), 1);
        assert_eq!(split_of(k8, 16, 64), 1);
        // 4 warps per CTA: the 16-row tile allows a split twice as deep.
        assert_eq!(split_of(Kernel::Sm90Skinny16x16, 1024, 1024), 3);
    }
}
