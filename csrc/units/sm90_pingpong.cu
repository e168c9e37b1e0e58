// A translation unit of the crate's kernels (build.rs compiles each file of csrc/units/ into a
// fatbin of its own, side by side, and src/kernels/loaded.rs loads them all): the TMA + wgmma
// ping-pong kernels. SASS for sm_80 and sm_90a, PTX for newer chips; below sm_90a they trap.
#include "../sm90/entries_pingpong.cuh"
