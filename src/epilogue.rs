//! What the kernels apply to `v = x·wᵀ + b` before their one store: `out = f(v) + β·C`. Each form
//! names the PyTorch expression it reproduces bit for bit for the same `v` (docs/EPILOGUE.md has
//! the operations and their rounding). The description is generic over how `C` is given: a
//! [`crate::MatrixRef`] for the safe calls, a [`crate::RawMatrix`] for the raw ones.

use crate::sys;

/// `f` in `out = f(v) + β·C`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Activation {
    /// `v·s + v`, the seed's `y * s + y.clone()`: `v·s` rounded, then `+ v` rounded (no FMA).
    ScaleAdd(f32),
    /// `v`: `F.linear(x, w, b)`.
    Identity,
    /// `torch.relu(v)` (NaN stays NaN).
    Relu,
    /// `F.gelu(v)` (`approximate="none"`, erf).
    Gelu,
    /// `F.gelu(v, approximate="tanh")`.
    GeluTanh,
    /// `F.silu(v)`.
    Silu,
}

impl Activation {
    /// The header's `GE_ACTIVATION_*` code and the scale it carries (0 where none).
    pub(crate) fn code(self) -> (i32, f32) {
        let (code, scale) = match self {
            Activation::ScaleAdd(s) => (sys::GE_ACTIVATION_SCALE_ADD, s),
            Activation::Identity => (sys::GE_ACTIVATION_IDENTITY, 0.0),
            Activation::Relu => (sys::GE_ACTIVATION_RELU, 0.0),
            Activation::Gelu => (sys::GE_ACTIVATION_GELU, 0.0),
            Activation::GeluTanh => (sys::GE_ACTIVATION_GELU_TANH, 0.0),
            Activation::Silu => (sys::GE_ACTIVATION_SILU, 0.0),
        };
        (code as i32, scale)
    }

    /// `f(v)` on the host, in f64: what the tests bound the kernels' results against.
    pub fn reference(self, v: f64) -> f64 {
        match self {
            Activation::ScaleAdd(s) => v * s as f64 + v,
            Activation::Identity => v,
            Activation::Relu if v.is_nan() => v,
            Activation::Relu => v.max(0.0),
            Activation::Gelu => 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2)),
            Activation::GeluTanh => {
                let inner = (2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v);
                0.5 * v * (1.0 + inner.tanh())
            }
            Activation::Silu => v / (1.0 + (-v).exp()),
        }
    }
}

/// Where the residual `C` comes from.
#[derive(Clone, Copy, Debug)]
pub enum Source<M> {
    /// An M × N matrix of its own (it must not overlap `out`).
    Matrix(M),
    /// `out` itself, read before it is written: an in-place residual update `out = f(v) + β·out`.
    Out,
}

/// `+ β·C`: `torch.add(f(v), C, alpha=β)`, one fused multiply-add as PyTorch's add rounds it
/// (exactly `f(v) + C` for β = 1).
#[derive(Clone, Copy, Debug)]
pub struct Residual<M> {
    /// `C`.
    pub source: Source<M>,
    /// `β`.
    pub beta: f32,
}

/// `out = f(v) + β·C`, `v = x·wᵀ + b`: the epilogue of one call.
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<M> {
    /// `f`.
    pub activation: Activation,
    /// `β·C`, or none.
    pub residual: Option<Residual<M>>,
}

impl<M> Epilogue<M> {
    /// The seed's `v·s + v` (what [`crate::FusedGemm::run`] computes).
    pub fn scale_add(scale: f32) -> Self {
        Self::activation(Activation::ScaleAdd(scale))
    }

    /// Plain `F.linear`: `out = v`.
    pub fn linear() -> Self {
        Self::activation(Activation::Identity)
    }

    /// `out = f(v)`.
    pub fn activation(activation: Activation) -> Self {
        Self { activation, residual: None }
    }

    /// This epilogue plus `β·C` for an M × N matrix `c`.
    pub fn with_residual(self, c: M, beta: f32) -> Self {
        Self { residual: Some(Residual { source: Source::Matrix(c), beta }), ..self }
    }

    /// This epilogue plus `β·out`: `out` is read, then overwritten.
    pub fn with_residual_out(self, beta: f32) -> Self {
        Self { residual: Some(Residual { source: Source::Out, beta }), ..self }
    }

    /// The same epilogue with `C` given another way.
    pub(crate) fn map<N>(self, f: impl FnOnce(M) -> N) -> Epilogue<N> {
        let residual = self.residual.map(|r| Residual {
            source: match r.source {
                Source::Matrix(m) => Source::Matrix(f(m)),
                Source::Out => Source::Out,
            },
            beta: r.beta,
        });
        Epilogue { activation: self.activation, residual }
    }

    /// `f(v) + β·c` on the host, in f64 (`c` ignored without a residual).
    pub fn reference(&self, v: f64, c: f64) -> f64 {
        let y = self.activation.reference(v);
        match &self.residual {
            Some(r) => y + r.beta as f64 * c,
            None => y,
        }
    }
}

/// erf(x) to about 1e-15 (std has none): the host reference for [`Activation::Gelu`].
fn erf(x: f64) -> f64 {
    // Below 2 its Maclaurin series (little cancellation there); beyond, erfc's continued
    // fraction (Lentz). Both far below what the tests' f32 bounds resolve.
    let a = x.abs();
    let r = if a < 2.0 {
        // Maclaurin: erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)).
        let (mut term, mut sum, x2) = (a, a, a * a);
        for n in 1..60 {
            term *= -x2 / n as f64;
            let add = term / (2 * n + 1) as f64;
            sum += add;
            if add.abs() < 1e-17 * sum.abs() {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc(a) = exp(-a²)/√π · 1/(a + 1/2/(a + 1/(a + 3/2/(a + ...)))).
        let mut f = a;
        let (mut c, mut d) = (a, 0.0);
        for n in 1..200 {
            let an = n as f64 / 2.0;
            d = 1.0 / (a + an * d);
            c = a + an / c;
            let delta = c * d;
            f *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        1.0 - (-a * a).exp() / (std::f64::consts::PI.sqrt() * f)
    };
    if x.is_nan() {
        x
    } else {
        r.copysign(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // erf at a few points (Abramowitz & Stegun, Table 7.1, and Wolfram), to 1e-15.
        for (x, want) in [
            (0.0, 0.0),
            (0.1, 0.112_462_916_018_284_9),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (1.5, 0.966_105_146_475_310_7),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-1.0, -0.842_700_792_949_714_9),
        ] {
            assert!((erf(x) - want).abs() < 1e-15, "erf({x}) = {} vs {want}", erf(x));
        }
        assert!(erf(f64::NAN).is_nan());
        assert_eq!(erf(40.0), 1.0);
    }

    #[test]
    fn references_are_the_pytorch_formulas() {
        let e = Epilogue::<()>::scale_add(0.5);
        assert_eq!(e.reference(2.0, 7.0), 3.0);
        assert_eq!(Epilogue::<()>::linear().with_residual_out(2.0).reference(1.5, 0.25), 2.0);
        assert_eq!(Activation::Relu.reference(-3.0), 0.0);
        assert!(Activation::Relu.reference(f64::NAN).is_nan());
        // gelu(1) = 0.5 (1 + erf(1/√2)) = 0.8413447460685429...; the tanh form is close to it.
        assert!((Activation::Gelu.reference(1.0) - 0.841_344_746_068_542_9).abs() < 1e-15);
        assert!((Activation::GeluTanh.reference(1.0) - 0.841_191_990_608_276_8).abs() < 1e-15);
        assert!((Activation::Silu.reference(1.0) - 0.731_058_578_630_004_9).abs() < 1e-15);
    }

    #[test]
    fn codes_are_the_header_s() {
        assert_eq!(Activation::ScaleAdd(0.25).code(), (sys::GE_ACTIVATION_SCALE_ADD as i32, 0.25));
        let all = [Activation::Identity, Activation::Relu, Activation::Gelu, Activation::GeluTanh, Activation::Silu];
        let codes: Vec<i32> = all.iter().map(|a| a.code().0).collect();
        assert_eq!(codes, [1, 2, 3, 4, 5]);
    }
}
