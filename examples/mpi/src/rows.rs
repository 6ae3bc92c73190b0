//! Which rows of the global grid each rank updates. The grid's first and last rows are fixed
//! boundary values, so the `height - 2` interior rows are dealt out in contiguous blocks, the
//! first `remainder` ranks taking one row more. A rank holds its rows plus one row above and
//! one below (the halos, or the fixed boundary at the grid's edges), and updates the rows
//! between from the same neighbours, with the same arithmetic, as on one rank.
//!
//! Before each sweep a rank sends its first and last own rows to the ranks above and below and
//! receives its halo rows from them ([`row_halo`]).

use mpi::Rank;
use offload_mpi::Halo;
use std::ops::Range;

/// `items` dealt out to `parts` in contiguous ranges, the first `items % parts` one longer:
/// the range of `part`.
pub fn split(items: usize, parts: usize, part: usize) -> Range<usize> {
    let (base, remainder) = (items / parts, items % parts);
    let start = part * base + part.min(remainder);
    start..start + base + usize::from(part < remainder)
}

/// The interior rows (global indices) that `rank` of `ranks` updates. Needs
/// `height - 2 >= ranks`: every rank gets at least one row.
pub fn owned(height: usize, ranks: usize, rank: usize) -> Range<usize> {
    assert!(
        height >= ranks + 2,
        "{height} rows leave {} interior rows for {ranks} ranks",
        height.saturating_sub(2)
    );
    let interior = split(height - 2, ranks, rank);
    interior.start + 1..interior.end + 1
}

/// The rows a rank holds: its own and one on each side.
pub fn held(owned: &Range<usize>) -> Range<usize> {
    owned.start - 1..owned.end + 1
}

/// A rank's neighbours: the ranks holding the rows just above and below its block (`None` at
/// the grid's top and bottom edges).
#[derive(Clone, Copy, Debug)]
pub struct Neighbours {
    pub up: Option<Rank>,
    pub down: Option<Rank>,
}

impl Neighbours {
    pub fn of(rank: Rank, ranks: Rank) -> Self {
        Neighbours {
            up: (rank > 0).then(|| rank - 1),
            down: (rank + 1 < ranks).then_some(rank + 1),
        }
    }
}

/// The exchange of a block of `rows` rows (halos included) of `width` columns: the first and
/// last own rows to the neighbours, the halo rows from them.
pub fn row_halo(width: usize, rows: usize, neighbours: Neighbours) -> Halo {
    let row = |r: usize| r * width..(r + 1) * width;
    let mut halo = Halo::new();
    if let Some(up) = neighbours.up {
        halo = halo.send(up, row(1)).receive(up, row(0));
    }
    if let Some(down) = neighbours.down {
        halo = halo.send(down, row(rows - 2)).receive(down, row(rows - 1));
    }
    halo
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
    fn blocks_exchange_their_edge_rows_with_their_neighbours() {
        let middle = row_halo(4, 5, Neighbours::of(1, 3));
        assert_eq!(
            middle,
            Halo::new()
                .send(0, 4..8)
                .receive(0, 0..4)
                .send(2, 12..16)
                .receive(2, 16..20)
        );
        assert_eq!(row_halo(4, 5, Neighbours::of(0, 1)), Halo::new());
        assert_eq!(split(10, 4, 0), 0..3);
        assert_eq!(split(10, 4, 3), 8..10);
    }

    #[test]
    #[should_panic(expected = "leave 2 interior rows for 3 ranks")]
    fn too_many_ranks_is_refused() {
        owned(4, 3, 0);
    }
}
