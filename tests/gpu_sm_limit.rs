//! `FusedGemm::with_sm_limit`: a persistent kernel launches no more CTAs than the limit, Auto
//! still finds a kernel at every limit (the cluster kernels drop out below 2 SMs), and the
//! results keep every check of the harness (f64 bound, cuBLAS, poisoned output untouched
//! outside the view), with and without stream-K and a workspace.

mod common;

use std::num::NonZeroU32;

use common::Case;
use gemm_epilogue::Family;

#[test]
fn a_limited_handle_stays_within_its_sms() {
    let Some(mut g) = common::gpu() else { return };
    let mut rng = common::rng("a_limited_handle_stays_within_its_sms");
    let full = g.gemm.clone();
    let sms = full.device().sm_count;
    // A large one (many waves, stream-K's partial tail), one below a wave, an odd K (repack).
    let cases = [
        Case::new(4096, 2048, 512).workspace(true),
        Case::new(700, 900, 256),
        Case::new(1030, 770, 131).workspace(true).prepared_w(true),
    ];
    for limit in [1, 2, 7, 64, sms - 8, sms, 4 * sms] {
        g.gemm = full.with_sm_limit(NonZeroU32::new(limit));
        assert_eq!(g.gemm.sm_limit(), NonZeroU32::new(limit));
        for case in &cases {
            let plan = common::check(&g, case, &mut rng).expect("ran");
            if plan.kernel.family() == Family::TmaWgmma {
                assert!(plan.grid <= limit.min(sms), "limit {limit}: {plan:?} for {case:?}");
            }
            if limit < 2 {
                assert_eq!(plan.cluster, 1, "limit {limit}: a 2-CTA cluster needs 2 SMs: {plan:?}");
            }
        }
    }
}
