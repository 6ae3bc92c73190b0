//! The halo exchange between neighbouring ranks' blocks, through the host: a rank's first and
//! last own rows are copied from its device, sent to the ranks above and below over MPI, and the
//! rows received are copied into its halo rows on the device.
//!
//! Each direction is one shift (everyone sends up and receives from below, then the reverse), so
//! every blocking send meets a receive posted by a neighbour doing the same step: no cycle, no
//! deadlock, whatever the number of ranks.

use mpi::point_to_point::{send_receive_into, Destination, Source};
use mpi::topology::{Communicator, Rank, SimpleCommunicator};
use offload::DeviceVec;

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

/// One row's host buffers each way.
pub struct Halo<'c> {
    comm: &'c SimpleCommunicator,
    neighbours: Neighbours,
    width: usize,
    send: Vec<f32>,
    receive: Vec<f32>,
}

impl<'c> Halo<'c> {
    pub fn new(comm: &'c SimpleCommunicator, neighbours: Neighbours, width: usize) -> Self {
        Halo {
            comm,
            neighbours,
            width,
            send: vec![0.0; width],
            receive: vec![0.0; width],
        }
    }

    /// Refreshes the halo rows (the first and last) of `block`, a row-major block of `width`
    /// columns, from the neighbours' own rows.
    pub fn exchange(&mut self, block: &mut DeviceVec<f32>) -> offload::Result<()> {
        let (w, rows) = (self.width, block.len() / self.width);
        let Neighbours { up, down } = self.neighbours;
        // Up: the first own row to the rank above; the bottom halo from the rank below.
        self.shift(block, up, w, down, (rows - 1) * w)?;
        // Down: the last own row to the rank below; the top halo from the rank above.
        self.shift(block, down, (rows - 2) * w, up, 0)
    }

    /// Sends the row at element `send_at` of `block` to `to` while receiving the row at
    /// `receive_at` from `from`.
    fn shift(
        &mut self,
        block: &mut DeviceVec<f32>,
        to: Option<Rank>,
        send_at: usize,
        from: Option<Rank>,
        receive_at: usize,
    ) -> offload::Result<()> {
        if to.is_some() {
            block.copy_to_host_at(send_at, &mut self.send)?;
        }
        match (to, from) {
            (Some(to), Some(from)) => {
                send_receive_into(
                    &self.send[..],
                    &self.comm.process_at_rank(to),
                    &mut self.receive[..],
                    &self.comm.process_at_rank(from),
                );
            }
            (Some(to), None) => self.comm.process_at_rank(to).send(&self.send[..]),
            (None, Some(from)) => {
                self.comm
                    .process_at_rank(from)
                    .receive_into(&mut self.receive[..]);
            }
            (None, None) => {}
        }
        if from.is_some() {
            block.copy_from_host_at(receive_at, &self.receive)?;
        }
        Ok(())
    }
}
