// How fp32 operands become TF32 before the tensor cores see them: the policy both kernel
// families take as a template argument (the instructions are in ptx.cuh).
#pragma once

namespace ge {

enum class Rounding {
    // To nearest, ties away from zero, in registers after each fragment load (what cuBLAS's TF32
    // conversion does): half a TF32 ulp added, then the tensor core's truncation
    // (ptx::add_half_ulp_tf32). The sm90 kernels round X this way and take W already rounded.
    Nearest,
    // Raw fp32 bits; the tensor core ignores the low 13 mantissa bits (toward zero).
    Truncate,
};

}  // namespace ge
