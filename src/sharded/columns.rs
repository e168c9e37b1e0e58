//! How a column-parallel layer splits its work: which output columns (rows of W) each device
//! owns, and in how many row chunks the gathered forward overlaps its all-gather with compute.
//! Host arithmetic only, the same for one device as for eight.

use std::ops::Range;

/// The columns `0..n` split over `devices` shards as evenly as possible: the first `n % devices`
/// shards get one column more. Shards are contiguous and in device order, so shard `g` is rows
/// `range` of W and columns `range` of the output; with fewer columns than devices the last
/// shards are empty.
pub(crate) fn even_columns(n: usize, devices: usize) -> Vec<Range<usize>> {
    let devices = devices.max(1);
    let (base, extra) = (n / devices, n % devices);
    let mut start = 0;
    (0..devices)
        .map(|g| {
            let len = base + usize::from(g < extra);
            let range = start..start + len;
            start += len;
            range
        })
        .collect()
}

/// The columns of shards of the given widths, in order.
pub(crate) fn columns_of_widths(widths: &[usize]) -> Vec<Range<usize>> {
    let mut start = 0;
    widths
        .iter()
        .map(|&w| {
            let range = start..start + w;
            start += w;
            range
        })
        .collect()
}

/// Rows per chunk of the gathered forward. More chunks overlap more of the all-gather with the
/// next chunk's GEMM but run smaller GEMMs; `chunks` is a request (at least 1), and a chunk is
/// never shorter than [`MIN_CHUNK_ROWS`] rows unless the whole batch is.
pub(crate) fn chunk_rows(rows: usize, chunks: usize) -> usize {
    let per = rows.div_ceil(chunks.max(1));
    // Whole 128-row tiles per chunk, so no chunk adds a ragged tile row of its own.
    per.div_ceil(128).saturating_mul(128).max(MIN_CHUNK_ROWS).min(rows.max(1))
}

/// The shortest chunk worth a launch and an NCCL call of its own.
pub(crate) const MIN_CHUNK_ROWS: usize = 512;

/// The row ranges of the chunks of `rows` rows, `per` rows each (the last one shorter).
pub(crate) fn row_chunks(rows: usize, per: usize) -> impl Iterator<Item = Range<usize>> {
    let per = per.max(1);
    (0..rows.div_ceil(per)).map(move |c| c * per..((c + 1) * per).min(rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_columns_cover_everything_once_in_order() {
        for n in [0, 1, 2, 3, 7, 8, 1000, 4096, 4097] {
            for g in 1..=8 {
                let shards = even_columns(n, g);
                assert_eq!(shards.len(), g);
                assert_eq!(shards[0].start, 0);
                assert_eq!(shards[g - 1].end, n);
                for pair in shards.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start, "contiguous");
                    assert!(pair[0].len() >= pair[1].len(), "larger shards first");
                }
                let (min, max) =
                    (shards.iter().map(|s| s.len()).min().unwrap(), shards.iter().map(|s| s.len()).max().unwrap());
                assert!(max - min <= 1, "n {n}, g {g}: as even as possible");
            }
        }
        assert_eq!(even_columns(7, 2), vec![0..4, 4..7]);
        assert_eq!(even_columns(1, 2), vec![0..1, 1..1]);
        assert_eq!(even_columns(4096, 1), vec![0..4096], "one device owns everything");
    }

    #[test]
    fn widths_become_contiguous_columns() {
        assert_eq!(columns_of_widths(&[3, 1, 4]), vec![0..3, 3..4, 4..8]);
        assert_eq!(columns_of_widths(&[]), Vec::<Range<usize>>::new());
    }

    #[test]
    fn chunks_cover_the_rows_in_whole_tiles() {
        assert_eq!(chunk_rows(16384, 4), 4096);
        assert_eq!(chunk_rows(16384, 1), 16384);
        assert_eq!(chunk_rows(1000, 4), 512, "never below MIN_CHUNK_ROWS");
        assert_eq!(chunk_rows(300, 8), 300, "a short batch is one chunk");
        assert_eq!(chunk_rows(0, 4), 1, "no rows: a harmless 1");
        assert_eq!(chunk_rows(10_000, 3), 3456, "⌈10000/3⌉ = 3334, up to whole 128-row tiles");
        for rows in [1, 511, 512, 513, 4095, 16384, 16383] {
            for chunks in 1..=9 {
                let per = chunk_rows(rows, chunks);
                let ranges: Vec<_> = row_chunks(rows, per).collect();
                assert_eq!(ranges.first().map(|r| r.start), Some(0));
                assert_eq!(ranges.last().map(|r| r.end), Some(rows));
                assert!(ranges.windows(2).all(|p| p[0].end == p[1].start));
                assert!(ranges.len() <= chunks.max(1), "rows {rows}, chunks {chunks}: {ranges:?}");
            }
        }
        assert_eq!(row_chunks(0, 4).count(), 0);
    }
}
