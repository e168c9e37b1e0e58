//! The inputs of a case: host copies laid out as uploaded, their device copies and views, and
//! the parallel helpers that generate and check them.

use std::ops::Range;

use gemm_epilogue::cudarc::driver::{CudaSlice, CudaView};
use gemm_epilogue::testbed::reference::HostMatrix;
use gemm_epilogue::MatrixRef;

use super::case::{Case, XDist};
use super::gpu::Gpu;
use super::poison::{extent, input_pad, lay_out, TAIL};
use super::rng::Rng;

/// Host copies of the input buffers, laid out exactly as uploaded (offset, padding and tail
/// filled with [`input_pad`]).
#[derive(Clone, Debug)]
pub struct Inputs {
    pub x: Vec<f32>,
    pub w: Vec<f32>,
    pub b: Option<Vec<f32>>,
}

impl Inputs {
    /// x ~ U(0,1) or U(−1,1), w, b ~ U(−1/√K, 1/√K) (K = 0: U(−1, 1)); no zeros.
    pub fn generate(case: &Case, rng: &mut Rng) -> Self {
        let a = 1.0 / (case.k.max(1) as f32).sqrt();
        let x = match case.x_dist {
            XDist::Unit => fill(case.m * case.k, rng, |r| r.unit()),
            XDist::Sym => fill(case.m * case.k, rng, |r| r.sym(1.0)),
        };
        let w = fill(case.n * case.k, rng, |r| a * r.sym(1.0));
        let b: Option<Vec<f32>> = case.bias.then(|| (0..case.n).map(|_| a * rng.sym(1.0)).collect());
        Self::from_dense(case, &x, &w, b.as_deref())
    }

    /// Lays out dense row-major x (M×K), w (N×K) and b (N) as the case says.
    pub fn from_dense(case: &Case, x: &[f32], w: &[f32], b: Option<&[f32]>) -> Self {
        assert_eq!(case.bias, b.is_some(), "case.bias must agree with the bias given");
        let b = b.map(|b| {
            assert_eq!(b.len(), case.n);
            let mut buf = vec![input_pad(); case.off_b + case.n + TAIL];
            buf[case.off_b..case.off_b + case.n].copy_from_slice(b);
            buf
        });
        Self {
            x: lay_out(x, case.m, case.k, case.ldx(), case.off_x),
            w: lay_out(w, case.n, case.k, case.ldw(), case.off_w),
            b,
        }
    }

    pub fn x_host<'a>(&'a self, case: &Case) -> HostMatrix<'a> {
        HostMatrix { data: &self.x[case.off_x..], rows: case.m, cols: case.k, ld: case.ldx() }
    }
    pub fn w_host<'a>(&'a self, case: &Case) -> HostMatrix<'a> {
        HostMatrix { data: &self.w[case.off_w..], rows: case.n, cols: case.k, ld: case.ldw() }
    }
    pub fn b_host<'a>(&'a self, case: &Case) -> Option<&'a [f32]> {
        self.b.as_ref().map(|b| &b[case.off_b..case.off_b + case.n])
    }
}

/// `len` values from `f`, generated in parallel from independent streams split off `rng` (the
/// result depends only on the seed, not on the number of threads).
pub fn fill(len: usize, rng: &mut Rng, f: impl Fn(&mut Rng) -> f32 + Sync) -> Vec<f32> {
    const CHUNK: usize = 1 << 16;
    let base = rng.next_u64();
    let chunks = len.div_ceil(CHUNK);
    par_map(chunks, |range| {
        let mut v = Vec::with_capacity(range.len() * CHUNK);
        for c in range {
            let mut r = Rng::new(base ^ (c as u64).wrapping_mul(0xd1b5_4a32_d192_ed03));
            let n = CHUNK.min(len - c * CHUNK);
            v.extend((0..n).map(|_| f(&mut r)));
        }
        v
    })
    .concat()
}

/// The inputs on the device.
pub struct DeviceInputs {
    pub x: CudaSlice<f32>,
    pub w: CudaSlice<f32>,
    pub b: Option<CudaSlice<f32>>,
}

impl DeviceInputs {
    pub fn upload(g: &Gpu, inputs: &Inputs) -> Self {
        let s = &g.stream;
        Self {
            x: s.clone_htod(&inputs.x).expect("upload x"),
            w: s.clone_htod(&inputs.w).expect("upload w"),
            b: inputs.b.as_ref().map(|b| s.clone_htod(b).expect("upload bias")),
        }
    }
    /// Buffers laid out as [`Inputs::generate`] would lay out `case`'s, holding zeros: enough to
    /// ask the crate about the case's views (their shapes and alignment) without generating data.
    pub fn zeroed(g: &Gpu, case: &Case) -> Self {
        let s = &g.stream;
        Self {
            x: s.alloc_zeros(case.off_x + case.m * case.ldx() + TAIL).expect("allocate x"),
            w: s.alloc_zeros(case.off_w + case.n * case.ldw() + TAIL).expect("allocate w"),
            b: case.bias.then(|| s.alloc_zeros(case.off_b + case.n + TAIL).expect("allocate bias")),
        }
    }
    pub fn x_view(&self, case: &Case) -> MatrixRef<'_> {
        let len = extent(case.m, case.k, case.ldx());
        MatrixRef::with_ld(self.x.slice(case.off_x..case.off_x + len), case.m, case.k, case.ldx())
    }
    pub fn w_view(&self, case: &Case) -> MatrixRef<'_> {
        w_view_of(&self.w, case)
    }
    pub fn b_view(&self, case: &Case) -> Option<CudaView<'_, f32>> {
        self.b.as_ref().map(|b| b.slice(case.off_b..case.off_b + case.n))
    }
}

/// The W view of `case` in its W buffer (what [`DeviceInputs::w_view`] returns, borrowing only
/// the W buffer: X can be rewritten while it lives).
pub fn w_view_of<'a>(w: &'a CudaSlice<f32>, case: &Case) -> MatrixRef<'a> {
    let len = extent(case.n, case.k, case.ldw());
    MatrixRef::with_ld(w.slice(case.off_w..case.off_w + len), case.n, case.k, case.ldw())
}

/// Splits 0..n over the CPU cores and collects one result per chunk.
pub fn par_map<T: Send>(n: usize, f: impl Fn(Range<usize>) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism().map_or(4, |p| p.get()).min(n.max(1));
    let chunk = n.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .step_by(chunk)
            .map(|lo| {
                let f = &f;
                s.spawn(move || f(lo..(lo + chunk).min(n)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("checker thread panicked")).collect()
    })
}

/// Rows (or columns) to check against the reference in a large problem: every tile boundary the
/// kernels have (64 and 128 multiples ± 1), the first and last, the middle, and `extra` random.
pub fn sample_indices(len: usize, rng: &mut Rng, extra: usize) -> Vec<usize> {
    let mut v = Vec::new();
    for t in [
        0usize, 1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129, 191, 192, 255, 256, 257, 383, 384, 511, 512, 1023, 1024,
        1025,
    ] {
        v.push(t);
    }
    for d in 1..=3 {
        v.push(len.wrapping_sub(d));
    }
    v.push(len / 2);
    for _ in 0..extra {
        if len > 0 {
            v.push(rng.below(len));
        }
    }
    v.retain(|&i| i < len);
    v.sort_unstable();
    v.dedup();
    v
}
