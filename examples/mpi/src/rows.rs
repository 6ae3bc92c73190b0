//! Which rows of the global grid each rank updates. The grid's first and last rows are fixed
//! boundary values, so the `height - 2` interior rows are dealt out in contiguous blocks, the
//! first `remainder` ranks taking one row more. A rank holds its rows plus one row above and
//! one below (the halos, or the fixed boundary at the grid's edges), so the same `jacobi2d`
//! kernel that sweeps the whole grid sweeps each block: it keeps a block's first and last rows
//! as they are and updates the rows between from the same neighbours as on one rank.

use std::ops::Range;

/// The interior rows (global indices) that `rank` of `ranks` updates. Needs
/// `height - 2 >= ranks`: every rank gets at least one row.
pub fn owned(height: usize, ranks: usize, rank: usize) -> Range<usize> {
    assert!(
        height >= ranks + 2,
        "{height} rows leave {} interior rows for {ranks} ranks",
        height.saturating_sub(2)
    );
    let interior = height - 2;
    let (base, remainder) = (interior / ranks, interior % ranks);
    let start = 1 + rank * base + rank.min(remainder);
    let len = base + usize::from(rank < remainder);
    start..start + len
}

/// The rows a rank holds: its own and one on each side.
pub fn held(owned: &Range<usize>) -> Range<usize> {
    owned.start - 1..owned.end + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interior_rows_are_dealt_out_once_each() {
        for height in [3, 4, 10, 101] {
            for ranks in 1..=(height - 2).min(7) {
                let blocks: Vec<_> = (0..ranks).map(|r| owned(height, ranks, r)).collect();
                assert_eq!(blocks[0].start, 1);
                assert_eq!(blocks[ranks - 1].end, height - 1);
                for pair in blocks.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start);
                    assert!(pair[0].len() >= pair[1].len() && pair[0].len() <= pair[1].len() + 1);
                }
                assert!(blocks.iter().all(|b| !b.is_empty()));
            }
        }
        assert_eq!(owned(10, 3, 0), 1..4);
        assert_eq!(owned(10, 3, 1), 4..7);
        assert_eq!(owned(10, 3, 2), 7..9);
        assert_eq!(held(&owned(10, 3, 2)), 6..10);
    }

    #[test]
    #[should_panic(expected = "leave 2 interior rows for 3 ranks")]
    fn too_many_ranks_is_refused() {
        owned(4, 3, 0);
    }
}
