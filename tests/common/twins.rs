//! Kernels that differ only in how they convert fp32 operands to TF32: a rounding build and its
//! truncating twin. On mma.sync and skinny the twin's symbol is the rounding one's with `_trunc`
//! appended; on sm_90 TMA the rounding build takes X from registers (`_rmem_a`) and its twin
//! feeds X to wgmma from shared memory (`_smem_a`), truncated through fp32 tensor maps. Twins launch
//! alike (family, tile, stages, threads, shared memory, cluster, access), so on the same shape
//! and workspace they plan the same grid and stream-K and add the same products in the same
//! order: given operands already rounded, they must agree bit for bit.

use gemm_epilogue::{Kernel, Precision};

/// The truncating twin of `kernel` (a [`Precision::Tf32`] build), if it has one.
pub fn trunc_twin(kernel: Kernel) -> Option<Kernel> {
    let name = match kernel.name().strip_suffix("_rmem_a") {
        Some(stem) => format!("{stem}_smem_a"),
        None => format!("{}_trunc", kernel.name()),
    };
    let twin = Kernel::ALL.into_iter().find(|t| t.name() == name)?;
    assert_launch_alike(kernel, twin);
    assert_eq!(
        (kernel.precision(), twin.precision()),
        (Precision::Tf32, Precision::Tf32Truncated),
        "{kernel:?} / {twin:?}"
    );
    assert!(!twin.needs_rounded_w(), "{twin:?} truncates both operands: it cannot need W rounded");
    Some(twin)
}

/// The rounding twin of `trunc` (a [`Precision::Tf32Truncated`] build), if it has one.
pub fn rounding_twin(trunc: Kernel) -> Option<Kernel> {
    let name = match trunc.name().strip_suffix("_smem_a") {
        Some(stem) => format!("{stem}_rmem_a"),
        None => trunc.name().strip_suffix("_trunc")?.to_string(),
    };
    let twin = Kernel::ALL.into_iter().find(|t| t.name() == name)?;
    assert_eq!(trunc_twin(twin), Some(trunc), "{trunc:?} / {twin:?}");
    Some(twin)
}

/// Everything public about how two kernels launch and read their operands agrees.
pub fn assert_launch_alike(a: Kernel, b: Kernel) {
    assert_eq!(
        (a.family(), a.tile(), a.stages(), a.threads(), a.smem_bytes(), a.cluster_m(), a.needs_aligned_rows()),
        (b.family(), b.tile(), b.stages(), b.threads(), b.smem_bytes(), b.cluster_m(), b.needs_aligned_rows()),
        "{a:?} and {b:?} must launch alike"
    );
}

/// The kernels that round X in registers and read W as given ([`Kernel::needs_rounded_w`]).
pub fn rounding_w_readers() -> Vec<Kernel> {
    Kernel::ALL.into_iter().filter(|k| k.needs_rounded_w()).collect()
}
