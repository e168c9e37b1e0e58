//! `gemm_epilogue._native`: the crate's raw entry (`run_raw_gemm`, `prepare_weight_raw`) for
//! Python, with tensors passed as (address, rows, cols, row stride,
//! elements available) and streams as `cudaStream_t` integers. Private to the package:
//! `gemm_epilogue.torch` is the API, and it is what vouches for the addresses (live tensors of
//! the handle's device, queued on the stream given) — the crate still checks every one against
//! the driver's record of its allocation before anything is queued.

use std::ffi::c_void;

use gemm_epilogue::{
    cuda_context, Activation, Epilogue, FusedGemm, Precision, RawBuffer, RawGemm, RawMatrix, RawPreparedWeight,
    RawWeight,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    _native,
    GemmEpilogueError,
    PyRuntimeError,
    "A call the crate refused or that failed, with the crate's error text; nothing was written."
);

fn err(e: gemm_epilogue::Error) -> PyErr {
    GemmEpilogueError::new_err(e.to_string())
}

/// The precision names of the Python API, and the crate's.
fn precision(name: &str) -> PyResult<Precision> {
    match name {
        "tf32" => Ok(Precision::Tf32),
        "tf32x3" => Ok(Precision::Tf32x3),
        "tf32-truncated" => Ok(Precision::Tf32Truncated),
        _ => Err(PyValueError::new_err(format!(
            "precision {name:?}: one of \"tf32\" (the default), \"tf32x3\", \"tf32-truncated\""
        ))),
    }
}

/// (address, rows, cols, ld, elements available from the address on).
type Matrix = (u64, usize, usize, usize, usize);
/// (address, elements available).
type Buffer = (u64, usize);

fn matrix((ptr, rows, cols, ld, len): Matrix) -> RawMatrix {
    RawMatrix { ptr, rows, cols, ld, len }
}

fn buffer((ptr, len): Buffer) -> RawBuffer {
    RawBuffer { ptr, len }
}

/// (activation code, scale, residual C or `None`, β): the header's `GE_ACTIVATION_*` code (the
/// scale is `GE_ACTIVATION_SCALE_ADD`'s), and C as a matrix (`out`'s own address and stride: the
/// in-place residual).
type EpilogueArgs = (i32, f32, Option<Matrix>, f32);

fn epilogue((code, scale, residual, beta): EpilogueArgs) -> PyResult<Epilogue<RawMatrix>> {
    let activation = match code {
        0 => Activation::ScaleAdd(scale),
        1 => Activation::Identity,
        2 => Activation::Relu,
        3 => Activation::Gelu,
        4 => Activation::GeluTanh,
        5 => Activation::Silu,
        _ => return Err(PyValueError::new_err(format!("activation code {code}: 0 to 5"))),
    };
    let e = Epilogue::activation(activation);
    Ok(match residual {
        Some(c) => e.with_residual(matrix(c), beta),
        None => e,
    })
}

/// A handle of one device and one precision: the kernels loaded once into the device's primary
/// context, the one PyTorch's runtime uses.
#[pyclass(frozen, module = "gemm_epilogue._native")]
struct Gemm {
    gemm: FusedGemm,
    precision: &'static str,
}

impl Gemm {
    /// The descriptor of a prepared weight at `w.ptr` (N = `w.rows`, K = `w.cols`), as
    /// `prepare_weight` of this handle wrote it.
    fn prepared(&self, w: RawMatrix) -> PyResult<RawPreparedWeight> {
        // SAFETY: describing reads nothing; gemm_epilogue.torch passes only memory that this
        // handle's prepare_weight filled (kept with the weight's version), and the call that
        // uses it checks its allocation.
        unsafe { self.gemm.raw_prepared_weight(w.ptr, w.rows, w.cols) }.map_err(err)
    }
}

#[pymethods]
impl Gemm {
    #[new]
    fn new(device: usize, precision_name: &str) -> PyResult<Self> {
        let p = precision(precision_name)?;
        let ctx = cuda_context(device).map_err(err)?;
        let gemm = FusedGemm::new(&ctx).map_err(err)?.with_precision(p);
        let precision = match p {
            Precision::Tf32 => "tf32",
            Precision::Tf32x3 => "tf32x3",
            _ => "tf32-truncated",
        };
        Ok(Self { gemm, precision })
    }

    /// The precision name this handle computes in.
    #[getter]
    fn precision(&self) -> &'static str {
        self.precision
    }

    /// f32 elements `prepare_weight` writes for an N × K weight.
    fn prepared_weight_len(&self, n: usize, k: usize) -> PyResult<usize> {
        self.gemm.prepared_weight_len(n, k).map_err(err)
    }

    /// f32 elements of workspace `run` uses with this X and W (`prepared`: W is a prepared
    /// weight's address, with its N and K).
    fn workspace_len(&self, x: Matrix, w: Matrix, prepared: bool) -> PyResult<usize> {
        let (x, w) = (matrix(x), matrix(w));
        if prepared {
            self.gemm.workspace_len_raw_prepared(x, &self.prepared(w)?).map_err(err)
        } else {
            self.gemm.workspace_len_raw(x, w).map_err(err)
        }
    }

    /// Writes W prepared for this handle into `dst`, queued on `stream`.
    fn prepare_weight(&self, stream: usize, w: Matrix, dst: Buffer) -> PyResult<()> {
        // SAFETY: the Python layer passes live tensors of this device and their current stream
        // (module docs); the crate checks the addresses against their allocations.
        unsafe { self.gemm.prepare_weight_raw(stream as *mut c_void, matrix(w), buffer(dst)) }.map_err(err)?;
        Ok(())
    }

    /// `out = f(v) + β·C`, `v = x·wᵀ + bias`, queued on `stream` (`epilogue`: [`EpilogueArgs`]);
    /// returns the kernel's name (`None`: M or N is 0).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (stream, x, w, prepared, bias, epilogue, out, workspace))]
    fn run(
        &self,
        stream: usize,
        x: Matrix,
        w: Matrix,
        prepared: bool,
        bias: Option<Buffer>,
        epilogue: EpilogueArgs,
        out: Matrix,
        workspace: Option<Buffer>,
    ) -> PyResult<Option<String>> {
        let stream = stream as *mut c_void;
        let (x, out) = (matrix(x), matrix(out));
        let (bias, workspace) = (bias.map(buffer), workspace.map(buffer));
        let epilogue = self::epilogue(epilogue)?;
        let prepared_w = if prepared { Some(self.prepared(matrix(w))?) } else { None };
        let w = match &prepared_w {
            Some(p) => RawWeight::Prepared(p),
            None => RawWeight::Matrix(matrix(w)),
        };
        let gemm = RawGemm { x, w, bias, epilogue, out, workspace };
        // SAFETY: as in prepare_weight; a prepared W as `prepared` says.
        let plan = unsafe { self.gemm.run_raw_gemm(stream, &gemm) }.map_err(err)?;
        Ok(plan.map(|p| p.kernel.name().to_string()))
    }

    /// A [`Layer`] of this handle: the prepared weight `prepare_weight` wrote at `w`'s address
    /// (N = `w`'s rows, K = its columns; its allocation is checked here, once), the bias and
    /// the epilogue, bound for the calls that change only X and the output.
    fn layer(slf: &Bound<'_, Self>, w: Matrix, bias: Option<Buffer>, epilogue: EpilogueArgs) -> PyResult<Layer> {
        let w = slf.get().prepared(matrix(w))?;
        let epilogue = self::epilogue(epilogue)?;
        Ok(Layer { gemm: slf.clone().unbind(), w, bias: bias.map(buffer), epilogue })
    }
}

/// A layer's operands that stay the same from call to call, bound once (`Gemm.layer`): a
/// prepared weight, whose allocation was checked when it was bound, the bias and the epilogue.
/// `gemm_epilogue.torch.FusedLinear` keeps one per weight, bias and form, so that a forward
/// crosses into the crate with X's and the output's addresses alone.
#[pyclass(frozen, module = "gemm_epilogue._native")]
struct Layer {
    gemm: Py<Gemm>,
    w: RawPreparedWeight,
    bias: Option<RawBuffer>,
    epilogue: Epilogue<RawMatrix>,
}

#[pymethods]
impl Layer {
    /// `out = f(x·wᵀ + bias)` for X at `x` (`rows` × K at a row stride of `ld` elements) into
    /// the dense `rows` × N output at `out`, queued on `stream`, with the workspace given.
    /// Returns 0 when queued; when the call needs more workspace than `workspace_len`, nothing
    /// is queued and the elements it needs are returned.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (stream, x, rows, ld, out, workspace=0, workspace_len=0))]
    fn run(
        &self,
        stream: usize,
        x: u64,
        rows: usize,
        ld: usize,
        out: u64,
        workspace: u64,
        workspace_len: usize,
    ) -> PyResult<usize> {
        let gemm = &self.gemm.get().gemm;
        let (n, k) = (self.w.rows(), self.w.cols());
        // The elements X spans (saturating: the crate refuses what no allocation holds).
        let len = if rows == 0 { 0 } else { (rows - 1).saturating_mul(ld).saturating_add(k) };
        let x = RawMatrix { ptr: x, rows, cols: k, ld, len };
        let out = RawMatrix::dense(out, rows, n);
        let needed = gemm.workspace_len_raw_prepared(x, &self.w).map_err(err)?;
        if needed > workspace_len {
            return Ok(needed);
        }
        let workspace = (workspace_len > 0).then_some(RawBuffer { ptr: workspace, len: workspace_len });
        let call =
            RawGemm { x, w: RawWeight::Prepared(&self.w), bias: self.bias, epilogue: self.epilogue, out, workspace };
        // SAFETY: as in Gemm.prepare_weight; the weight is what this handle's prepare_weight
        // wrote, unchanged (gemm_epilogue.torch binds a layer anew when the weight changes).
        unsafe { gemm.run_raw_gemm(stream as *mut c_void, &call) }.map_err(err)?;
        Ok(0)
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Gemm>()?;
    m.add_class::<Layer>()?;
    m.add("GemmEpilogueError", m.py().get_type::<GemmEpilogueError>())?;
    Ok(())
}
