//! A case: one call's shapes, layout, epilogue parameters, dispatch and how W is passed.

use gemm_epilogue::{Dispatch, FusedGemm, Kernel, Precision};

use super::poison::TAIL;

/// How X is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XDist {
    /// U(0, 1) (like post-ReLU activations).
    Unit,
    /// U(−1, 1).
    Sym,
}

/// One call: shapes, layout and epilogue parameters. `ld = cols + pad`; `off_*` is where the view
/// starts inside its buffer (in elements; a multiple of 4 keeps 16-byte alignment).
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub pad_x: usize,
    pub pad_w: usize,
    pub pad_o: usize,
    pub off_x: usize,
    pub off_w: usize,
    pub off_o: usize,
    pub off_b: usize,
    pub bias: bool,
    pub scale: f32,
    pub dispatch: Dispatch,
    pub x_dist: XDist,
    /// Run through `run_with_workspace` with the workspace `workspace_len` asks for (poisoned).
    pub workspace: bool,
    /// `FusedGemm::with_precision`; `None`: the default ([`FusedGemm::precision`] of a new handle).
    pub precision: Option<Precision>,
    /// Pass W as a [`gemm_epilogue::PreparedWeight`]: the fused call gets
    /// `gemm.prepare_weight(&stream, &w_view)`, prepared by the very handle that runs the case
    /// ([`Case::gemm`]: its dispatch and rounding), instead of the W view. The inputs, their
    /// layout and poisoning, the reference and the cuBLAS baseline (which reads the W view) are
    /// the same either way.
    pub prepared_w: bool,
}

impl Case {
    pub fn new(m: usize, n: usize, k: usize) -> Self {
        Self {
            m,
            n,
            k,
            pad_x: 0,
            pad_w: 0,
            pad_o: 0,
            off_x: 0,
            off_w: 0,
            off_o: 0,
            off_b: 0,
            bias: true,
            scale: 0.5,
            dispatch: Dispatch::Auto,
            x_dist: XDist::Unit,
            workspace: false,
            precision: None,
            prepared_w: false,
        }
    }
    pub fn precision(mut self, r: Precision) -> Self {
        self.precision = Some(r);
        self
    }
    /// The rounding the case asks Auto for: its own, else `gemm`'s ([`FusedGemm::precision`]; for
    /// the test's `Gpu::gemm`, a new handle, the device's default).
    pub fn effective_precision(&self, gemm: &FusedGemm) -> Precision {
        self.precision.unwrap_or(gemm.precision())
    }
    /// The handle that runs the case: `base` (a test's `Gpu::gemm`) with the case's dispatch and,
    /// if it has one, its rounding. It also prepares the case's W ([`Case::prepared_w`]).
    pub fn gemm(&self, base: &FusedGemm) -> FusedGemm {
        let gemm = base.with_dispatch(self.dispatch);
        self.precision.map_or(gemm.clone(), |r| gemm.with_precision(r))
    }
    pub fn prepared_w(mut self, on: bool) -> Self {
        self.prepared_w = on;
        self
    }
    pub fn bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }
    pub fn scale(mut self, scale: f32) -> Self {
        self.scale = scale;
        self
    }
    pub fn dispatch(mut self, d: Dispatch) -> Self {
        self.dispatch = d;
        self
    }
    pub fn force(self, k: Kernel) -> Self {
        self.dispatch(Dispatch::Force(k))
    }
    pub fn pad(mut self, x: usize, w: usize, o: usize) -> Self {
        (self.pad_x, self.pad_w, self.pad_o) = (x, w, o);
        self
    }
    pub fn offset(mut self, x: usize, w: usize, o: usize, b: usize) -> Self {
        (self.off_x, self.off_w, self.off_o, self.off_b) = (x, w, o, b);
        self
    }
    pub fn workspace(mut self, on: bool) -> Self {
        self.workspace = on;
        self
    }
    pub fn x_dist(mut self, d: XDist) -> Self {
        self.x_dist = d;
        self
    }
    pub fn ldx(&self) -> usize {
        self.k + self.pad_x
    }
    pub fn ldw(&self) -> usize {
        self.k + self.pad_w
    }
    pub fn ldo(&self) -> usize {
        self.n + self.pad_o
    }
    /// Whether the rows of X can be read 16 bytes at a time, in the crate's words
    /// ([`Kernel::needs_aligned_rows`]): K % 4 == 0, a 16-byte-aligned start (views start 16-byte
    /// aligned in their buffers iff the offset is a multiple of 4; cudarc allocations are
    /// 256-byte aligned) and a leading dimension that is a multiple of 4.
    pub fn x_rows_aligned(&self) -> bool {
        self.k % 4 == 0 && self.off_x % 4 == 0 && self.ldx() % 4 == 0
    }
    /// [`Case::x_rows_aligned`] for the W the call receives. A prepared weight starts its own
    /// allocation and has a leading dimension of K rounded up to 32: its rows are aligned
    /// exactly when K % 4 == 0, whatever the layout of the W view it was made from.
    pub fn w_rows_aligned(&self) -> bool {
        if self.prepared_w {
            self.k % 4 == 0
        } else {
            self.k % 4 == 0 && self.off_w % 4 == 0 && self.ldw() % 4 == 0
        }
    }
    /// Both operands have 16-byte-aligned rows: what the kernels with
    /// [`Kernel::needs_aligned_rows`] read without a workspace to repack them into.
    pub fn rows_aligned(&self) -> bool {
        self.x_rows_aligned() && self.w_rows_aligned()
    }
    /// The TMA condition of the sm_90 kernels: aligned rows and K > 0.
    pub fn tma_ok(&self) -> bool {
        self.rows_aligned() && self.k > 0
    }
    /// Multiply-adds of the GEMM, M·N·K.
    pub fn macs(&self) -> u64 {
        self.m as u64 * self.n as u64 * self.k as u64
    }
}

/// Length of the output buffer of a case: offset, M rows of stride ldo, tail.
pub fn out_len(case: &Case) -> usize {
    case.off_o + case.m * case.ldo() + TAIL
}
