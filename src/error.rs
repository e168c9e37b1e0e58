//! Every way a call can refuse or fail. Validation errors are returned before anything is
//! launched or written; driver errors carry the raw status.

use std::fmt;

use cudarc::driver::DriverError;

use crate::kernels::{Kernel, Precision};

/// Which argument of a call an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    /// The input `X` (M × K).
    X,
    /// The weight `W` (N × K).
    W,
    /// The bias `b` (N).
    Bias,
    /// The output (M × N).
    Out,
    /// The scratch memory of [`crate::FusedGemm::run_with_workspace`].
    Workspace,
    /// The memory [`crate::FusedGemm::prepare_weight_raw`] writes a prepared weight into.
    PreparedWeight,
    /// The residual source `C` (M × N) of an [`crate::Epilogue`].
    Residual,
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operand::X => "x",
            Operand::W => "w",
            Operand::Bias => "bias",
            Operand::Out => "out",
            Operand::Workspace => "workspace",
            Operand::PreparedWeight => "prepared weight",
            Operand::Residual => "residual",
        })
    }
}

/// The crate's error type.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// `libcuda` (the NVIDIA driver library) could not be loaded on this machine.
    NoDriver,
    /// The driver loaded but has no device with this ordinal.
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// How many devices the driver reports.
        count: usize,
    },
    /// The device is older than sm_80 (Ampere), which the TF32 tensor-core kernels need.
    UnsupportedDevice {
        /// Compute capability, major.
        major: i32,
        /// Compute capability, minor.
        minor: i32,
    },
    /// Two dimensions that must agree do not (e.g. X's columns and W's columns, both K).
    ShapeMismatch {
        /// Which dimension, in words ("x.cols (K) vs w.cols (K)").
        what: &'static str,
        /// What the other operands imply.
        expected: usize,
        /// What this operand has.
        found: usize,
    },
    /// A dimension does not fit the kernels' 32-bit shape fields (or the launch grid).
    DimensionTooLarge {
        /// Which dimension.
        what: &'static str,
        /// Its value.
        value: usize,
        /// The largest accepted.
        max: usize,
    },
    /// A leading dimension (row stride, in elements) is smaller than the row width.
    LeadingDimension {
        /// The operand.
        operand: Operand,
        /// Its leading dimension.
        ld: usize,
        /// Its number of columns.
        cols: usize,
    },
    /// A buffer is too short for `rows` rows of stride `ld` (the last row needs only `cols`).
    BufferTooSmall {
        /// The operand.
        operand: Operand,
        /// Elements the shape needs: `(rows - 1) * ld + cols`.
        needed: usize,
        /// Elements the buffer has.
        len: usize,
    },
    /// A buffer or the stream belongs to another CUDA context than the loaded kernels.
    WrongContext {
        /// The operand (`None`: the stream).
        operand: Option<Operand>,
    },
    /// The workspace does not start at a 16-byte-aligned address (a view at an odd offset).
    MisalignedWorkspace {
        /// Its device address.
        address: u64,
    },
    /// The memory given to [`crate::FusedGemm::prepare_weight_raw`] does not start at a
    /// 16-byte-aligned address.
    MisalignedPreparedWeight {
        /// Its device address.
        address: u64,
    },
    /// A raw device address ([`crate::FusedGemm::run_raw`]) is not 4-byte aligned, as f32
    /// data must be.
    MisalignedPointer {
        /// The operand.
        operand: Operand,
        /// Its device address.
        address: u64,
    },
    /// The output overlaps another operand ([`crate::FusedGemm::run_raw`]; the safe calls
    /// cannot be given overlapping buffers).
    Overlapping {
        /// The operand written.
        operand: Operand,
        /// The operand it overlaps.
        with: Operand,
    },
    /// A kernel was forced that cannot run these arguments on this device.
    KernelUnavailable {
        /// The kernel asked for.
        kernel: Kernel,
        /// Why it cannot run.
        reason: &'static str,
    },
    /// A [`crate::PreparedWeight`] was given to a handle of another precision than the one that
    /// prepared it.
    PreparedForOtherPrecision {
        /// The precision it was prepared for.
        prepared: Precision,
        /// The handle's precision.
        asked: Precision,
    },
    /// A CUDA driver call failed.
    Driver(DriverError),
    /// The devices given to a multi-GPU call are not a valid set (none, or one device twice).
    InvalidDevices {
        /// What is wrong, in words.
        reason: &'static str,
    },
    /// The NCCL library could not be loaded (feature `nccl`): cudarc looks for `libnccl.so`
    /// (README, "Several GPUs").
    #[cfg(feature = "nccl")]
    NoNccl,
    /// An NCCL call failed (feature `nccl`).
    #[cfg(feature = "nccl")]
    Nccl(cudarc::nccl::result::NcclError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDriver => write!(
                f,
                "the CUDA driver library (libcuda.so.1) could not be loaded: no NVIDIA driver on this machine"
            ),
            Error::NoDevice { ordinal, count } => {
                write!(f, "no CUDA device with ordinal {ordinal} (the driver reports {count})")
            }
            Error::UnsupportedDevice { major, minor } => write!(
                f,
                "device is sm_{major}{minor}; the TF32 tensor-core kernels need sm_80 or newer"
            ),
            Error::ShapeMismatch { what, expected, found } => {
                write!(f, "shape mismatch: {what}: expected {expected}, found {found}")
            }
            Error::DimensionTooLarge { what, value, max } => {
                write!(f, "{what} = {value} is too large (at most {max})")
            }
            Error::LeadingDimension { operand, ld, cols } => write!(
                f,
                "{operand}: leading dimension {ld} is smaller than its {cols} columns"
            ),
            Error::BufferTooSmall { operand, needed, len } => write!(
                f,
                "{operand}: buffer holds {len} elements but the shape and leading dimension need {needed}"
            ),
            Error::WrongContext { operand: Some(op) } => {
                write!(f, "{op} lives in another CUDA context than the loaded kernels")
            }
            Error::WrongContext { operand: None } => {
                write!(f, "the stream belongs to another CUDA context than the loaded kernels")
            }
            Error::MisalignedWorkspace { address } => write!(
                f,
                "workspace: address {address:#x} is not 16-byte aligned (use an allocation or a view at a multiple of 4 elements)"
            ),
            Error::MisalignedPreparedWeight { address } => write!(
                f,
                "prepared weight: address {address:#x} is not 16-byte aligned (the kernels read its rows 16 bytes at a time and through TMA)"
            ),
            Error::MisalignedPointer { operand, address } => {
                write!(f, "{operand}: address {address:#x} is not 4-byte aligned (f32 data)")
            }
            Error::Overlapping { operand, with } => {
                write!(f, "{operand} overlaps {with} in device memory")
            }
            Error::KernelUnavailable { kernel, reason } => {
                write!(f, "kernel {} cannot run here: {reason}", kernel.name())
            }
            Error::PreparedForOtherPrecision { prepared, asked } => write!(
                f,
                "w: the weight was prepared for precision {prepared:?} but this handle computes in {asked:?}; prepare it with a handle of the same precision (FusedGemm::with_precision)"
            ),
            Error::Driver(e) => write!(f, "CUDA driver error: {e:?}"),
            Error::InvalidDevices { reason } => write!(f, "devices: {reason}"),
            #[cfg(feature = "nccl")]
            Error::NoNccl => write!(
                f,
                "the NCCL library (libnccl.so) could not be loaded: install NCCL, or link libnccl.so to the libnccl.so.2 of the nvidia-nccl wheel on LD_LIBRARY_PATH"
            ),
            #[cfg(feature = "nccl")]
            Error::Nccl(e) => write!(f, "NCCL error: {:?}", e.0),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Driver(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(feature = "nccl")]
impl From<cudarc::nccl::result::NcclError> for Error {
    fn from(e: cudarc::nccl::result::NcclError) -> Self {
        Error::Nccl(e)
    }
}

impl From<DriverError> for Error {
    fn from(e: DriverError) -> Self {
        Error::Driver(e)
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_says_what_and_where() {
        let cases: Vec<(Error, &[&str])> = vec![
            (Error::NoDriver, &["libcuda", "driver"]),
            (Error::NoDevice { ordinal: 3, count: 1 }, &["3", "1"]),
            (Error::UnsupportedDevice { major: 7, minor: 5 }, &["sm_75", "sm_80"]),
            (Error::ShapeMismatch { what: "w.cols (K) vs x.cols (K)", expected: 7, found: 8 }, &["w.cols", "7", "8"]),
            (
                Error::DimensionTooLarge { what: "K", value: 1 << 31, max: i32::MAX as usize },
                &["K", "2147483648", "2147483647"],
            ),
            (Error::LeadingDimension { operand: Operand::W, ld: 6, cols: 7 }, &["w:", "6", "7"]),
            (Error::BufferTooSmall { operand: Operand::Out, needed: 19, len: 18 }, &["out:", "19", "18"]),
            (Error::WrongContext { operand: Some(Operand::Bias) }, &["bias", "context"]),
            (Error::WrongContext { operand: None }, &["stream", "context"]),
            (Error::MisalignedWorkspace { address: 0x1004 }, &["workspace", "0x1004", "16-byte"]),
            (Error::MisalignedPointer { operand: Operand::X, address: 0x1002 }, &["x:", "0x1002", "4-byte"]),
            (Error::MisalignedPreparedWeight { address: 0x1008 }, &["prepared weight", "0x1008", "16-byte"]),
            (
                Error::BufferTooSmall { operand: Operand::PreparedWeight, needed: 64, len: 32 },
                &["prepared weight", "64"],
            ),
            (Error::Overlapping { operand: Operand::Out, with: Operand::Workspace }, &["out", "workspace", "overlaps"]),
            (
                Error::PreparedForOtherPrecision { prepared: Precision::Tf32, asked: Precision::Tf32Truncated },
                &["w:", "Tf32", "Tf32Truncated"],
            ),
            (Error::InvalidDevices { reason: "device 1 appears twice" }, &["devices", "device 1 appears twice"]),
            (
                Error::KernelUnavailable { kernel: Kernel::Sm90Pingpong128x128SmemA, reason: "needs sm_90" },
                &["ge_sm90_pingpong_128x128x32_s6_smem_a", "needs sm_90"],
            ),
        ];
        for (error, words) in cases {
            let text = error.to_string();
            for w in words {
                assert!(text.contains(w), "{error:?} displays as {text:?}, which lacks {w:?}");
            }
        }
    }
}
