//! An epilogue form as the examples and benches name it on their command lines and in their
//! environment variables: `seed` (the seed's `v·s + v`), `identity`, `relu`, `gelu`, `gelu_tanh`,
//! `silu`, each optionally followed by `+residual` (`+ C`, `C` a fresh M × N matrix, β = 1), and
//! `residual` alone (`identity+residual`).

use crate::epilogue::{Activation, Epilogue};

/// `β` of the residual forms: `f(v) + C`, PyTorch's `y + residual`.
pub const RESIDUAL_BETA: f32 = 1.0;

/// An epilogue form of a run: `f`, and whether `+ β·C` follows (C a matrix of its own).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Form {
    /// `f`.
    pub activation: Activation,
    /// Whether `+ RESIDUAL_BETA · C` follows, `C` an M × N matrix.
    pub residual: bool,
}

impl Form {
    /// What [`Form::parse`] accepts, in words (for usage texts and errors).
    pub const NAMES: &'static str =
        "seed, identity, relu, gelu, gelu_tanh, silu, residual (= identity+residual), or any of them +residual";

    /// The seed's `v·s + v` with scale `s`, no residual: what the benches and examples ran
    /// before they had forms.
    pub fn seed(scale: f32) -> Self {
        Self { activation: Activation::ScaleAdd(scale), residual: false }
    }

    /// The form `name` names (`gelu`, `relu+residual`, ...); `scale` is the seed's `s`.
    /// `None` for anything else.
    pub fn parse(name: &str, scale: f32) -> Option<Self> {
        let name = name.trim();
        let (base, residual) = match name.strip_suffix("+residual") {
            Some(base) => (base.trim(), true),
            None if name == "residual" => ("identity", true),
            None => (name, false),
        };
        let activation = match base {
            "seed" => Activation::ScaleAdd(scale),
            "identity" => Activation::Identity,
            "relu" => Activation::Relu,
            "gelu" => Activation::Gelu,
            "gelu_tanh" => Activation::GeluTanh,
            "silu" => Activation::Silu,
            _ => return None,
        };
        Some(Self { activation, residual })
    }

    /// Whether this is the seed form: `v·s + v` without a residual.
    pub fn is_seed(self) -> bool {
        matches!(self.activation, Activation::ScaleAdd(_)) && !self.residual
    }

    /// The name [`Form::parse`] reads back (`gelu+residual`; `residual` for identity + C).
    pub fn name(self) -> String {
        let base = match self.activation {
            Activation::ScaleAdd(_) => "seed",
            Activation::Identity if self.residual => return "residual".into(),
            Activation::Identity => "identity",
            Activation::Relu => "relu",
            Activation::Gelu => "gelu",
            Activation::GeluTanh => "gelu_tanh",
            Activation::Silu => "silu",
        };
        if self.residual {
            format!("{base}+residual")
        } else {
            base.into()
        }
    }

    /// The PyTorch expression it computes, with `y = F.linear(x, w, b)` and `C` the residual.
    pub fn pytorch(self) -> String {
        let f = match self.activation {
            Activation::ScaleAdd(s) => format!("y * {s} + y.clone()"),
            Activation::Identity => "y".into(),
            Activation::Relu => "torch.relu(y)".into(),
            Activation::Gelu => "F.gelu(y)".into(),
            Activation::GeluTanh => "F.gelu(y, approximate=\"tanh\")".into(),
            Activation::Silu => "F.silu(y)".into(),
        };
        if self.residual {
            format!("{f} + C")
        } else {
            f
        }
    }

    /// The epilogue of a call, `c` its residual source `C` (ignored without a residual).
    ///
    /// # Panics
    /// When the form has a residual and `c` is `None`.
    pub fn epilogue<M>(self, c: Option<M>) -> Epilogue<M> {
        let e = Epilogue::activation(self.activation);
        match (self.residual, c) {
            (false, _) => e,
            (true, Some(c)) => e.with_residual(c, RESIDUAL_BETA),
            (true, None) => panic!("the form {} needs its residual matrix C", self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in [
            "seed",
            "identity",
            "relu",
            "gelu",
            "gelu_tanh",
            "silu",
            "residual",
            "seed+residual",
            "relu+residual",
            "gelu+residual",
            "gelu_tanh+residual",
            "silu+residual",
        ] {
            let form = Form::parse(name, 0.5).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(form.name(), name);
        }
        assert_eq!(Form::parse("identity+residual", 0.5), Form::parse("residual", 0.5));
        assert_eq!(Form::parse("seed", 0.25), Some(Form::seed(0.25)));
        assert!(Form::seed(0.5).is_seed());
        assert!(!Form::parse("seed+residual", 0.5).unwrap().is_seed());
        for bad in ["", "tanh", "residual+residual", "gelu+", "+residual", "Gelu"] {
            assert_eq!(Form::parse(bad, 0.5), None, "{bad:?}");
        }
    }

    #[test]
    fn epilogues_and_references_follow_the_form() {
        let e = Form::parse("relu+residual", 0.5).unwrap().epilogue(Some(()));
        assert_eq!(e.activation, Activation::Relu);
        assert_eq!(e.residual.map(|r| r.beta), Some(RESIDUAL_BETA));
        assert_eq!(e.reference(-2.0, 3.0), 3.0);
        assert!(Form::parse("gelu", 0.5).unwrap().epilogue(Some(())).residual.is_none());
        assert!(Form::parse("gelu", 0.5).unwrap().epilogue(None::<()>).residual.is_none());
        assert_eq!(Form::parse("gelu_tanh+residual", 0.5).unwrap().pytorch(), "F.gelu(y, approximate=\"tanh\") + C");
    }
}
