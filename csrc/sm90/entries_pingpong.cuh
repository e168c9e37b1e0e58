// The ping-pong kernels (two consumer warpgroups taking turns at the tensor cores) of the TMA +
// wgmma family, one GE_SM90_ENTRY (entry.cuh) per configuration. A list of its own so that a unit
// of csrc/units/ compiles them apart from the others: build.rs builds the units side by side.
#pragma once

#include "entry.cuh"

// clang-format off
GE_SM90_ENTRY(ge_sm90_pingpong_128x128x32_s6_rmem_a,             GE_SM90_PINGPONG_128X128,       Schedule::PingPong,    /*CLUSTER_M*/ 1,   Precision::Tf32)
GE_SM90_ENTRY(ge_sm90_pingpong_128x128x32_s6_smem_a,             GE_SM90_PINGPONG_128X128,       Schedule::PingPong,    /*CLUSTER_M*/ 1,   Precision::Tf32Truncated)
GE_SM90_ENTRY(ge_sm90_pingpong_64x128x32_s8_rmem_a,              GE_SM90_PINGPONG_64X128,        Schedule::PingPong,    /*CLUSTER_M*/ 1,   Precision::Tf32)
GE_SM90_ENTRY(ge_sm90_pingpong_64x128x32_s8_smem_a,              GE_SM90_PINGPONG_64X128,        Schedule::PingPong,    /*CLUSTER_M*/ 1,   Precision::Tf32Truncated)
GE_SM90_ENTRY(ge_sm90_pingpong_64x64x32_s12_rmem_a,              GE_SM90_PINGPONG_64X64,         Schedule::PingPong,    /*CLUSTER_M*/ 1,   Precision::Tf32)
GE_SM90_ENTRY(ge_sm90_pingpong_64x64x32_s12_smem_a,              GE_SM90_PINGPONG_64X64,         Schedule::PingPong,    /*CLUSTER_M*/ 1,   Precision::Tf32Truncated)
GE_SM90_ENTRY(ge_sm90_pingpong_128x128x32_s6_cluster2_rmem_a,    GE_SM90_PINGPONG_128X128,       Schedule::PingPong,    GE_SM90_CLUSTER_M, Precision::Tf32)
GE_SM90_ENTRY(ge_sm90_pingpong_128x128x32_s6_cluster2_smem_a,    GE_SM90_PINGPONG_128X128,       Schedule::PingPong,    GE_SM90_CLUSTER_M, Precision::Tf32Truncated)
GE_SM90_ENTRY(ge_sm90_pingpong_64x128x32_s4_x3,                  GE_SM90_PINGPONG_64X128_X3,     Schedule::PingPong,    /*CLUSTER_M*/ 1,   Precision::Tf32x3)
// clang-format on
