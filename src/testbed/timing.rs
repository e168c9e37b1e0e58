//! Interleaved CUDA-event timing of several variants of one computation on one stream: what the
//! benchmarks and the main-job example report. The H200 drifts with power and temperature, so
//! variants are timed interleaved, in an order where each variant follows every other one equally
//! often (a Williams design: what ran just before, and so the card's power state, is balanced),
//! and compared by their medians.

use std::sync::Arc;

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

use super::Result;

/// Per-variant medians of one [`interleaved`] measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Median milliseconds per call of each variant, in the order given (`None`: not timed).
    pub median_ms: Vec<Option<f64>>,
    /// Calls per sample (a sample lasts at least about `sample_ms`: 0.5 ms for [`interleaved`]).
    pub batch: u64,
    /// Samples per variant.
    pub rounds: usize,
}

/// Times `variants` (indices `0..variants`; `skip(i)` leaves one out) on `stream`: 3 warm-up
/// calls of each, `warm_up_ms` more of all of them in turn, then `rounds` rounds of one sample
/// per variant in the order of [`round_order`], each sample `batch` back-to-back `launch(i)`
/// calls between two events. All events are recorded up front and read after one synchronisation, so no host gap
/// separates the variants.
pub fn interleaved(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    variants: usize,
    skip: impl Fn(usize) -> bool,
    rounds: usize,
    warm_up_ms: f64,
    launch: impl FnMut(usize) -> Result<()>,
) -> Result<Timing> {
    interleaved_samples(ctx, stream, variants, skip, rounds, warm_up_ms, 0.5, launch)
}

/// [`interleaved`] with samples of at least `sample_ms` each (at most 100 000 calls).
///
/// Why the length matters on a power-capped card: with samples of one or two calls, each variant
/// starts at the clock its predecessor left, so a kernel that draws more power than its
/// neighbours borrows their headroom and one that draws less pays for them. Samples of ~100 ms
/// or more run each variant in its own steady state: what a program that calls only it sees.
#[allow(clippy::too_many_arguments)]
pub fn interleaved_samples(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    variants: usize,
    skip: impl Fn(usize) -> bool,
    rounds: usize,
    warm_up_ms: f64,
    sample_ms: f64,
    mut launch: impl FnMut(usize) -> Result<()>,
) -> Result<Timing> {
    let timed: Vec<usize> = (0..variants).filter(|&i| !skip(i)).collect();
    let event = || -> Result<CudaEvent> { Ok(ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?) };
    for _ in 0..3 {
        for &i in &timed {
            launch(i)?;
        }
    }
    stream.synchronize()?;
    let mut fastest = f64::INFINITY;
    for &i in &timed {
        let (a, e) = (event()?, event()?);
        a.record(stream)?;
        for _ in 0..3 {
            launch(i)?;
        }
        e.record(stream)?;
        fastest = fastest.min(a.elapsed_ms(&e)? as f64 / 3.0);
    }
    let round_ms = fastest * timed.len().max(1) as f64;
    for _ in 0..((warm_up_ms / round_ms.max(1e-3)).ceil() as usize).min(10_000) {
        for &i in &timed {
            launch(i)?;
        }
    }
    stream.synchronize()?;
    let batch = batch_for_sample(fastest, sample_ms);
    let mut recorded = Vec::with_capacity(rounds * timed.len());
    for r in 0..rounds {
        for j in round_order(timed.len(), r) {
            let i = timed[j];
            let (a, e) = (event()?, event()?);
            a.record(stream)?;
            for _ in 0..batch {
                launch(i)?;
            }
            e.record(stream)?;
            recorded.push((i, a, e));
        }
    }
    stream.synchronize()?;
    let mut samples = vec![Vec::new(); variants];
    for (i, a, e) in &recorded {
        samples[*i].push(a.elapsed_ms(e)? as f64 / batch as f64);
    }
    Ok(Timing { median_ms: samples.iter_mut().map(|s| median(s)).collect(), batch, rounds })
}

/// The order of the `n` variants in round `r`: row `r` of a Williams design, the Latin square whose
/// first row is 0, 1, n−1, 2, n−2, … and whose row r adds r (mod n); for odd n the rows of the
/// second n rounds are reversed. Over n (even n) or 2n (odd n) rounds every variant runs once per
/// round and directly after each other variant equally often within rounds. A plain rotation
/// (A B C D, B C D A, …) would run A after D in most rounds.
pub fn round_order(n: usize, r: usize) -> Vec<usize> {
    let first = (0..n).map(|j| {
        if j == 0 {
            0
        } else if j % 2 == 1 {
            j.div_ceil(2)
        } else {
            n - j / 2
        }
    });
    let mut row: Vec<usize> = first.map(|b| (b + r) % n.max(1)).collect();
    if n % 2 == 1 && (r / n) % 2 == 1 {
        row.reverse();
    }
    row
}

/// Calls per sample for a call of `ms`: at least ~0.5 ms of work, well above the events'
/// ~0.5 µs resolution; 1 to 500.
pub fn batch_for(ms: f64) -> u64 {
    (0.5 / ms.max(1e-6)).ceil().clamp(1.0, 500.0) as u64
}

/// Calls per sample for a call of `ms` and samples of at least `sample_ms`: [`batch_for`] for
/// samples up to 0.5 ms, else enough calls to fill `sample_ms`; 1 to 100 000.
pub fn batch_for_sample(ms: f64, sample_ms: f64) -> u64 {
    if sample_ms <= 0.5 {
        batch_for(ms)
    } else {
        (sample_ms / ms.max(1e-6)).ceil().clamp(1.0, 100_000.0) as u64
    }
}

/// The median (mean of the middle two for an even count); `None` for no samples. Sorts `v`.
pub fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some(0.5 * (v[n / 2 - 1] + v[n / 2])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_batches() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(batch_for(1.6), 1);
        assert_eq!(batch_for(0.04), 13);
        assert_eq!(batch_for(0.0), 500);
        // Sustained samples: enough calls to fill the sample, capped.
        assert_eq!(batch_for_sample(1.5, 200.0), 134);
        assert_eq!(batch_for_sample(1.5, 0.5), batch_for(1.5));
        assert_eq!(batch_for_sample(1e-9, 200.0), 100_000);
        assert_eq!(batch_for_sample(500.0, 200.0), 1);
    }

    #[test]
    fn round_orders_balance_predecessors() {
        assert_eq!(round_order(4, 0), [0, 1, 3, 2]);
        assert_eq!(round_order(1, 5), [0]);
        assert!(round_order(0, 3).is_empty());
        for n in 2..=7 {
            let rounds = if n % 2 == 0 { n } else { 2 * n };
            let mut follows = vec![vec![0; n]; n];
            for r in 0..rounds {
                let row = round_order(n, r);
                let mut sorted = row.clone();
                sorted.sort();
                assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n = {n}, round {r}: {row:?}");
                for w in row.windows(2) {
                    follows[w[1]][w[0]] += 1;
                }
            }
            let per_pair = if n % 2 == 0 { 1 } else { 2 };
            for (b, row) in follows.iter().enumerate() {
                for (a, &count) in row.iter().enumerate() {
                    assert_eq!(count, if a == b { 0 } else { per_pair }, "n = {n}: {b} after {a}");
                }
            }
        }
    }
}
