// The one translation unit compiled into the crate's fatbin (see build.rs).
// SASS for sm_80 and sm_90a, PTX for newer chips; the sm90 and skinny entries compile to a trap elsewhere
// (the mma.sync, elementwise and gemv ones run everywhere).
#include "elementwise/epilogue.cuh"
#include "elementwise/repack_tf32.cuh"
#include "gemv/entries.cuh"
#include "skinny/entries.cuh"
#include "sm80/entries.cuh"
#include "sm90/entries.cuh"
