// A translation unit of the crate's kernels (build.rs compiles each file of csrc/units/ into a
// fatbin of its own, side by side, and src/kernels/loaded.rs loads them all): the kernels that
// are small to build, the decoding sizes' GEMV and skinny kernels, the elementwise epilogue (the
// testbed's baseline) and the TF32 repack. The skinny kernels trap below sm_90.
#include "../elementwise/epilogue.cuh"
#include "../elementwise/repack_tf32.cuh"
#include "../gemv/entries.cuh"
#include "../skinny/entries.cuh"
