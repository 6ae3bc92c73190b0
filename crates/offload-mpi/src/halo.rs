//! [`Halo`]: which parts of a vector a rank sends to which peers, and which parts it fills
//! with what peers send.

use crate::{Error, Result};
use mpi::Rank;
use std::ops::Range;

/// One message of a [`Halo`]: the elements `range` of the vector, to or from `peer`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// The other rank (of the communicator the [`crate::Comm`] was made from).
    pub peer: Rank,
    /// Element indices in the vector.
    pub range: Range<usize>,
}

/// The messages of one exchange, seen from one rank: parts of its vector to send, and parts to
/// overwrite with what peers send. The `k`-th part this rank sends to a peer meets the `k`-th
/// part that peer receives from this rank, and must have its length.
///
/// ```
/// use offload_mpi::Halo;
/// // A block of rows (8 columns, 6 rows: halo, 4 own rows, halo) between ranks 0 and 2.
/// let (w, rows) = (8, 6);
/// let halo = Halo::new()
///     .send(0, w..2 * w)                          // first own row up
///     .receive(0, 0..w)                           // top halo from above
///     .send(2, (rows - 2) * w..(rows - 1) * w)    // last own row down
///     .receive(2, (rows - 1) * w..rows * w);      // bottom halo from below
/// assert_eq!(halo.sends().len(), 2);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Halo {
    sends: Vec<Part>,
    receives: Vec<Part>,
}

impl Halo {
    /// No messages.
    pub fn new() -> Self {
        Halo::default()
    }

    /// Adds a message: elements `range` to `peer`.
    pub fn send(mut self, peer: Rank, range: Range<usize>) -> Self {
        self.sends.push(Part { peer, range });
        self
    }

    /// Adds a message: elements `range` overwritten with what `peer` sends.
    pub fn receive(mut self, peer: Rank, range: Range<usize>) -> Self {
        self.receives.push(Part { peer, range });
        self
    }

    /// The parts sent, in order.
    pub fn sends(&self) -> &[Part] {
        &self.sends
    }

    /// The parts received, in order.
    pub fn receives(&self) -> &[Part] {
        &self.receives
    }

    /// `Err(InvalidArgument)` unless every part lies within `len` elements, names a rank of
    /// `size` other than `rank`, and no received part overlaps another part (it would be
    /// written while read or written again).
    pub(crate) fn check(&self, len: usize, rank: Rank, size: Rank) -> Result<()> {
        let invalid = |reason: String| Error::InvalidArgument {
            what: "offload_mpi::Comm::exchange",
            reason,
        };
        for part in self.sends.iter().chain(&self.receives) {
            let Part { peer, range } = part;
            if range.start > range.end || range.end > len {
                return Err(invalid(format!(
                    "part {range:?} is not within the vector's {len} elements"
                )));
            }
            if *peer < 0 || *peer >= size || *peer == rank {
                return Err(invalid(format!(
                    "peer {peer} is not another rank of the {size} (this is rank {rank})"
                )));
            }
        }
        for (i, received) in self.receives.iter().enumerate() {
            let mut others = self.sends.iter().chain(self.receives.iter().skip(i + 1));
            if let Some(other) = others.find(|o| overlap(&o.range, &received.range)) {
                return Err(invalid(format!(
                    "received part {:?} overlaps part {:?}",
                    received.range, other.range
                )));
            }
        }
        Ok(())
    }
}

fn overlap(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end && !a.is_empty() && !b.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_checked_against_the_vector_and_the_ranks() {
        let rows = Halo::new().send(1, 4..8).receive(1, 0..4);
        assert!(rows.check(8, 0, 2).is_ok());
        let refused = |halo: Halo, len| halo.check(len, 0, 2).unwrap_err().to_string();
        assert!(refused(rows.clone(), 7).contains("not within the vector's 7 elements"));
        assert!(refused(Halo::new().send(2, 0..1), 8).contains("peer 2 is not another rank"));
        assert!(refused(Halo::new().receive(0, 0..1), 8).contains("peer 0"));
        assert!(refused(rows.receive(1, 7..9), 9).contains("received part 7..9 overlaps part 4..8"));
        let twice = Halo::new().receive(1, 0..4).receive(1, 3..5);
        assert!(refused(twice, 8).contains("overlaps"));
        // Sends may overlap each other, and empty parts overlap nothing.
        assert!(Halo::new()
            .send(1, 0..4)
            .send(1, 2..6)
            .receive(1, 4..4)
            .check(8, 0, 2)
            .is_ok());
    }
}
