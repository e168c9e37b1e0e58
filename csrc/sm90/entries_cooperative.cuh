// The cooperative kernels (two consumer warpgroups sharing each tile) of the TMA + wgmma family,
// one GE_SM90_ENTRY (entry.cuh) per configuration. A list of its own so that a unit of csrc/units/
// compiles them apart from the others: build.rs builds the units side by side.
#pragma once

#include "entry.cuh"

// clang-format off
GE_SM90_ENTRY(ge_sm90_cooperative_128x256x32_s4_rmem_a,          GE_SM90_COOPERATIVE_128X256,    Schedule::Cooperative, /*CLUSTER_M*/ 1,   Precision::Tf32)
GE_SM90_ENTRY(ge_sm90_cooperative_128x256x32_s4_smem_a,          GE_SM90_COOPERATIVE_128X256,    Schedule::Cooperative, /*CLUSTER_M*/ 1,   Precision::Tf32Truncated)
GE_SM90_ENTRY(ge_sm90_cooperative_128x256x32_s4_cluster2_rmem_a, GE_SM90_COOPERATIVE_128X256,    Schedule::Cooperative, GE_SM90_CLUSTER_M, Precision::Tf32)
GE_SM90_ENTRY(ge_sm90_cooperative_128x256x32_s4_cluster2_smem_a, GE_SM90_COOPERATIVE_128X256,    Schedule::Cooperative, GE_SM90_CLUSTER_M, Precision::Tf32Truncated)
GE_SM90_ENTRY(ge_sm90_cooperative_128x128x32_s4_x3,              GE_SM90_COOPERATIVE_128X128_X3, Schedule::Cooperative, /*CLUSTER_M*/ 1,   Precision::Tf32x3)
GE_SM90_ENTRY(ge_sm90_cooperative_128x128x32_s4_cluster2_x3,     GE_SM90_COOPERATIVE_128X128_X3, Schedule::Cooperative, GE_SM90_CLUSTER_M, Precision::Tf32x3)
// clang-format on
