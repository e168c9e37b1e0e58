// What the tensor cores multiply: how fp32 operands become TF32, and how many TF32 products make
// one fp32 product. The policy both kernel families take as a template argument; the same names
// as the Rust `Precision` (the instructions are in ptx.cuh).
#pragma once

namespace ge {

enum class Precision {
    // One TF32 product, operands rounded to nearest, ties away from zero, in registers after each
    // fragment load (what cuBLAS's TF32 conversion does): half a TF32 ulp added, then the tensor
    // core's truncation (ptx::add_half_ulp_tf32). The sm90 kernels round X this way and take W
    // already rounded.
    Tf32,
    // One TF32 product of the raw fp32 bits; the tensor core ignores the low 13 mantissa bits
    // (toward zero).
    Tf32Truncated,
    // Three TF32 products ("3xTF32"): each operand split into big = tf32_rn(a) and
    // small = tf32_rn(a - big) (exact in fp32), and small*big + big*small + big*big accumulated
    // in that order (ptx::split_tf32). The sm90 kernels split X in registers and read W's two
    // parts from shared memory (a prepared weight, or W split into the workspace).
    Tf32x3,
};

}  // namespace ge
