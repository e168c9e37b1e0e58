// A translation unit of the crate's kernels (build.rs compiles each file of csrc/units/ into a
// fatbin of its own, side by side, and src/kernels/loaded.rs loads them all): the mma.sync
// kernels, which run everywhere (sm_80 and sm_90a SASS, PTX for newer chips).
#include "../sm80/entries.cuh"
