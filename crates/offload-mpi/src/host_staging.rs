//! The host path: device → host, MPI, host → device, for any plugin and the host backend.

use crate::halo::Part;
use crate::{Element, Result};
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::point_to_point::{Destination, Source};
use mpi::request::{scope, Request};
use mpi::topology::{Communicator, SimpleCommunicator};
use offload::DeviceVec;

/// Copies `sends` out of `vec`, sends and receives them all at once (non-blocking, so no order
/// of calls across ranks can deadlock), and copies what arrived into `receives`. Each copy is
/// ordered after the vector's uses on every stream and done when it returns.
pub(crate) fn exchange<T: Element>(
    world: &SimpleCommunicator,
    vec: &mut DeviceVec<T>,
    sends: &[&Part],
    receives: &[&Part],
) -> Result<()> {
    let mut outgoing = Vec::with_capacity(sends.len());
    for part in sends {
        let mut buffer = zeroed::<T>(part.range.len());
        vec.copy_to_host_at(part.range.start, &mut buffer)?;
        outgoing.push(buffer);
    }
    let mut incoming: Vec<Vec<T>> = receives.iter().map(|p| zeroed(p.range.len())).collect();
    scope(|scope| {
        let mut requests: Vec<Request<'_, [T], _>> = Vec::new();
        for (part, buffer) in receives.iter().zip(&mut incoming) {
            let from = world.process_at_rank(part.peer);
            requests.push(from.immediate_receive_into(scope, &mut buffer[..]));
        }
        for (part, buffer) in sends.iter().zip(&outgoing) {
            let to = world.process_at_rank(part.peer);
            requests.push(to.immediate_send(scope, &buffer[..]));
        }
        for request in requests {
            request.wait();
        }
    });
    for (part, buffer) in receives.iter().zip(&incoming) {
        vec.copy_from_host_at(part.range.start, buffer)?;
    }
    Ok(())
}

/// Replaces every element of `vec` by its sum over the ranks of `world`.
pub(crate) fn all_reduce_sum<T: Element>(
    world: &SimpleCommunicator,
    vec: &mut DeviceVec<T>,
) -> Result<()> {
    let mine = vec.to_vec()?;
    let mut total = zeroed::<T>(mine.len());
    world.all_reduce_into(&mine[..], &mut total[..], SystemOperation::sum());
    vec.copy_from_host(&total)?;
    Ok(())
}

fn zeroed<T: Element>(len: usize) -> Vec<T> {
    // SAFETY: the `DeviceCopy` contract makes all-zero bytes a valid `T`.
    vec![unsafe { std::mem::zeroed() }; len]
}
