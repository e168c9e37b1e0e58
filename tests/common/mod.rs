//! Shared harness of the GPU integration tests (CUTLASS-style "testbed").
//!
//! - [`gpu`]: the context, a stream, the loaded kernels and a cuBLAS baseline, or `None` after
//!   printing `skipped: <reason>` when there is no usable GPU. With `GEMM_EPILOGUE_REQUIRE_GPU=1`
//!   a missing GPU is a failure (panic) instead of a skip.
//! - [`rng`]: a seeded SplitMix64. The seed is fresh per process (from the clock), printed by every
//!   test, and can be pinned with `GEMM_EPILOGUE_SEED=<decimal or 0x hex>` to reproduce a failure.
//! - [`Case`] + [`check`]: one generic checker used by every numeric test. It lays the inputs out
//!   in bigger buffers (view offset, leading-dimension padding, tail) whose unused parts are NaN,
//!   poisons the whole output buffer, runs the fused kernel and the cuBLAS + elementwise baseline
//!   on the same inputs, verifies that every in-view output element was written and that every
//!   other element of the output buffer still holds the poison bits, then compares against the
//!   f64 reference (all elements, or sampled rows × columns for large problems) and against cuBLAS
//!   (all elements).
//!
//! One concern per module:
//! - `gpu`: [`Gpu`], [`gpu`], [`hopper_gpu`], [`require_gpu`];
//! - `rng`: [`seed`], [`rng`], [`Rng`];
//! - `poison`: the poison and padding bits, how a view lies in its buffer, and the checks that
//!   nothing outside a view was written;
//! - `case`: [`Case`] (one call: shape, layout, epilogue, dispatch, precision, and whether W is
//!   passed prepared) and [`XDist`];
//! - `weight`: [`CaseWeight`], W as a case passes it (the view, or a
//!   [`gemm_epilogue::PreparedWeight`] made by the handle that runs the case), with the calls
//!   spelled out for both kinds;
//! - `contract`: what the crate promises about a call, in terms of its public kernel facts
//!   ([`gemm_epilogue::Kernel::needs_aligned_rows`], [`gemm_epilogue::Kernel::needs_rounded_w`],
//!   [`gemm_epilogue::Kernel::family`], [`gemm_epilogue::Kernel::precision`],
//!   [`gemm_epilogue::FusedGemm::wave`], [`gemm_epilogue::FusedGemm::precision`]): which forced
//!   kernels must accept a case ([`accepts`]) and what every plan, and Auto's, must satisfy
//!   ([`assert_plan_keeps_the_contract`]);
//! - `twins`: a rounding kernel and its truncating twin ([`trunc_twin`], [`rounding_twin`]);
//! - `bounds`: the error bounds (their derivation is that module's documentation);
//! - `exact`: the exact oracle: small-integer inputs whose products and partial sums are exact
//!   in fp32 and TF32, the exact output, and the bitwise comparison ([`assert_bitwise`]);
//! - `emulate`: the TF32-emulating check ([`verify_emulated`]): operands converted as the call
//!   converted them ([`conversions`]), held to the fp32-accumulation bound;
//! - `inputs`: [`Inputs`] on the host, [`DeviceInputs`] on the device, and the parallel helpers
//!   that generate and check them;
//! - `rounding` (used as `common::rounding::…`): the harness of the two rounding test files —
//!   host TF32 conversions, salted inputs, their shapes, one call into a poisoned output;
//! - `check`: running a case ([`execute`]), checking its numbers ([`verify`], [`check`]) and
//!   expecting a refusal ([`expect_refused`]).
// Not every test binary uses every helper.
#![allow(dead_code)]

mod bounds;
mod case;
mod check;
mod contract;
mod emulate;
mod exact;
mod gpu;
mod inputs;
mod poison;
mod rng;
pub mod rounding;
mod twins;
mod weight;

// The harness, flat: `common::check`, `common::Case`, … Not every test binary uses every item.
#[allow(unused_imports)]
pub use bounds::{
    coeff, norm, norm_tol, unit_roundoff, Norm, ABS_SLACK, FULL_REF_MACS, MIN_NORM_COUNT, NORM_TOL, NORM_TOL_CUBLAS,
    U_CUBLAS,
};
#[allow(unused_imports)]
pub use case::{out_len, Case, XDist};
#[allow(unused_imports)]
pub use check::{check, check_inputs, epilogue_f32, execute, execute_on, expect_refused, verify, Outcome};
#[allow(unused_imports)]
pub use contract::{
    accepts, assert_plan_keeps_the_contract, auto_refuses, refusal, specified_to_accept, REPACK_MIN_MACS,
};
#[allow(unused_imports)]
pub use emulate::{conversions, verify_emulated, EMUL_NORM_TOL};
#[allow(unused_imports)]
pub use exact::{assert_bitwise, exact_output, integer_inputs, B_MAX, K_MAX, SCALES as EXACT_SCALES, XW_MAX};
#[allow(unused_imports)]
pub use gpu::{gpu, hopper_gpu, require_gpu, Gpu};
#[allow(unused_imports)]
pub use inputs::{fill, par_map, sample_indices, w_view_of, DeviceInputs, Inputs};
#[allow(unused_imports)]
pub use poison::{
    assert_all_poisoned, extent, input_pad, poison, poisoned, take_view_checked, INPUT_PAD_BITS, POISON_BITS, TAIL,
};
#[allow(unused_imports)]
pub use rng::{rng, seed, Rng};
#[allow(unused_imports)]
pub use twins::{assert_launch_alike, rounding_twin, rounding_w_readers, trunc_twin};
#[allow(unused_imports)]
pub use weight::CaseWeight;
