//! What the crate's tests, benchmarks and examples compare against — not part of the product,
//! compiled only with the `testbed` feature (which also turns on cudarc's cuBLAS and cuBLASLt):
//! - [`CublasBaseline`]: cuBLAS's TF32 GEMM, then one elementwise pass of ours applying the same
//!   epilogue functor, for every [`crate::Epilogue`] (what a user would do without this crate);
//! - [`CublasLtLinear`]: cuBLASLt's GEMM with its own epilogue in one call (bias, ReLU + bias,
//!   GELU (tanh) + bias: [`CublasLtEpilogue`]);
//! - [`Form`]: the epilogue forms as the examples and benches name them;
//! - [`timing`]: interleaved CUDA-event timing of several variants;
//! - [`reference`](mod@reference): the f64 CPU reference with a per-element error scale, and the seeded
//!   generator of test inputs;
//! - [`tf32`]: the TF32-emulating reference (operands converted as a call converted them, f64
//!   sums) and its accumulation bound.

mod cublas;
mod cublaslt;
mod form;
pub mod reference;
pub mod tf32;
pub mod timing;

use std::fmt;

pub use cublas::{CublasBaseline, CublasCompute};
pub use cublaslt::{CublasLtEpilogue, CublasLtLinear, CublasLtPlan};
pub use form::{Form, RESIDUAL_BETA};

/// What a testbed call can fail with: the crate's own errors, and those of the libraries it
/// compares against.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Validation or a launch of ours.
    Gemm(crate::Error),
    /// A CUDA driver call.
    Driver(cudarc::driver::DriverError),
    /// A cuBLAS call.
    Cublas(cudarc::cublas::result::CublasError),
    /// A cuBLASLt call.
    CublasLt(cudarc::cublaslt::result::CublasError),
    /// A library the baseline calls could not be loaded (cudarc panics on first use without it).
    NoLibrary {
        /// The library's name, as cudarc looks for it.
        name: &'static str,
    },
    /// The baseline cannot compute what was asked (an epilogue cuBLASLt has none for, an
    /// in-place residual after cuBLAS's GEMM).
    Unsupported {
        /// What, and why.
        what: &'static str,
    },
}

/// Whether cudarc can load the library `present` checks for: it loads cuBLAS and cuBLASLt at run
/// time and panics on first use when it cannot, so the constructors ask first. Where cudarc links
/// them instead (its `dynamic-linking`, which candle asks for), a missing library stops the
/// process at start-up, before any call.
#[cfg(not(feature = "candle"))]
fn library(name: &'static str, present: unsafe fn() -> bool) -> Result<()> {
    // SAFETY: cudarc's own check: loading the library runs its initialisers; nothing is called.
    match unsafe { present() } {
        true => Ok(()),
        false => Err(Error::NoLibrary { name }),
    }
}

#[cfg(not(feature = "candle"))]
pub(crate) fn cublas_library() -> Result<()> {
    library("libcublas", cudarc::cublas::sys::is_culib_present)
}

#[cfg(not(feature = "candle"))]
pub(crate) fn cublaslt_library() -> Result<()> {
    library("libcublasLt", cudarc::cublaslt::sys::is_culib_present)
}

#[cfg(feature = "candle")]
pub(crate) fn cublas_library() -> Result<()> {
    Ok(())
}

#[cfg(feature = "candle")]
pub(crate) fn cublaslt_library() -> Result<()> {
    Ok(())
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Gemm(e) => e.fmt(f),
            Error::Driver(e) => write!(f, "CUDA driver error: {e:?}"),
            Error::Cublas(e) => write!(f, "cuBLAS error: {e:?}"),
            Error::CublasLt(e) => write!(f, "cuBLASLt error: {e:?}"),
            Error::NoLibrary { name } => {
                write!(f, "{name} could not be loaded: install the CUDA toolkit's {name}, or put it on LD_LIBRARY_PATH")
            }
            Error::Unsupported { what } => write!(f, "not supported: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Gemm(e) => Some(e),
            Error::Driver(e) => Some(e),
            Error::Cublas(e) => Some(e),
            Error::CublasLt(e) => Some(e),
            Error::NoLibrary { .. } | Error::Unsupported { .. } => None,
        }
    }
}

impl From<crate::Error> for Error {
    fn from(e: crate::Error) -> Self {
        match e {
            crate::Error::Driver(d) => Error::Driver(d),
            e => Error::Gemm(e),
        }
    }
}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::Driver(e)
    }
}

impl From<cudarc::cublas::result::CublasError> for Error {
    fn from(e: cudarc::cublas::result::CublasError) -> Self {
        Error::Cublas(e)
    }
}

impl From<cudarc::cublaslt::result::CublasError> for Error {
    fn from(e: cudarc::cublaslt::result::CublasError) -> Self {
        Error::CublasLt(e)
    }
}

/// `Result` with the testbed's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
