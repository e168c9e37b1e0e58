//! Tensor maps (TMA descriptors) for the sm_90 kernels, encoded on the host per call.
//! `cuTensorMapEncodeTiled` only fills 128 bytes of host memory: no allocation, no sync, so a
//! launch that uses it can still be captured into a CUDA graph.

use cudarc::driver::sys::{
    self, CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};

use crate::error::Result;
use crate::sys::GeTensorMap;

/// What the tensor map calls its elements: fp32 moved as it is, or TF32 (fp32 in memory; the
/// map's type tells the copy engine to convert on the way in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TmaElement {
    F32,
    Tf32,
}

/// A row-major fp32 matrix `rows × cols` (stride `ld`) as a 2-D tensor {cols, rows}, moved in
/// boxes of `box_rows × box_cols` to or from 128-byte-swizzled shared memory: the operands X and
/// W (K-major: `cols` = K), loaded with out-of-range elements zero-filled, and `out`, stored with
/// out-of-range elements clipped. Requires (checked by the caller): `base % 16 == 0`,
/// `(ld * 4) % 16 == 0`, `box_cols * 4 == 128`.
pub(crate) fn encode_row_major(
    base: u64,
    rows: usize,
    cols: usize,
    ld: usize,
    box_rows: u32,
    box_cols: u32,
    element: TmaElement,
) -> Result<GeTensorMap> {
    debug_assert!(base % 16 == 0 && (ld * 4) % 16 == 0 && box_cols * 4 == 128);
    let dims: [u64; 2] = [cols as u64, rows as u64];
    let strides: [u64; 1] = [(ld * 4) as u64]; // bytes between rows; dim 0 is contiguous
    let boxes: [u32; 2] = [box_cols, box_rows];
    let element_strides: [u32; 2] = [1, 1];
    let mut map = std::mem::MaybeUninit::<CUtensorMap>::zeroed();
    // SAFETY: all pointers point at live locals of the lengths the rank (2) implies; the driver
    // writes exactly one CUtensorMap into `map`.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            map.as_mut_ptr(),
            match element {
                TmaElement::F32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
                TmaElement::Tf32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
            },
            2,
            base as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    status.result()?;
    // SAFETY: initialised by the successful call above.
    let map = unsafe { map.assume_init() };
    Ok(GeTensorMap { opaque: map.opaque })
}
