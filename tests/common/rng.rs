//! The seeded PRNG: one process-wide seed, one generator per test.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// The inputs' random generator (SplitMix64, in the crate so tests, benches and the example share it).
pub use gemm_epilogue::testbed::reference::SplitMix64 as Rng;

static SEED: OnceLock<u64> = OnceLock::new();

/// The process-wide seed: `GEMM_EPILOGUE_SEED` if set, else from the clock.
pub fn seed() -> u64 {
    *SEED.get_or_init(|| match std::env::var("GEMM_EPILOGUE_SEED") {
        Ok(s) => {
            let s = s.trim();
            let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse::<u64>(),
            };
            parsed.unwrap_or_else(|_| panic!("GEMM_EPILOGUE_SEED={s:?} is not a u64 (decimal or 0x hex)"))
        }
        Err(_) => {
            let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
            (t.as_nanos() as u64) ^ ((std::process::id() as u64) << 32)
        }
    })
}

/// A generator for one test: the process seed mixed with the test name (so tests do not depend on
/// their order). Prints the seed so a failure can be reproduced.
pub fn rng(test: &str) -> Rng {
    let s = seed();
    println!("seed: GEMM_EPILOGUE_SEED={s:#x} (test {test})");
    // FNV-1a of the name.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in test.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    Rng::new(s ^ h)
}
