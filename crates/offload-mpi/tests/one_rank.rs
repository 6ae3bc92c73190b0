//! offload-mpi in one process (MPI's singleton start, without mpirun): the checks of its
//! arguments, and what involves no other rank. Several ranks: `scripts/mpi-check`, which runs
//! the MPI examples on 4 ranks against 1.

use offload::{Device, DeviceVec};
use offload_mpi::{Comm, Error, Halo, Transport};

#[test]
fn one_rank_checks_its_arguments_and_sums_to_itself() {
    let universe = mpi::initialize().expect("MPI is initialised once");
    let world = universe.world();
    let device = Device::host();
    let comm = Comm::new(&world, &device).unwrap();
    assert_eq!((comm.rank(), comm.size()), (0, 1));
    assert_eq!(comm.all_reduce_transport(), Transport::HostStaging);
    assert_eq!(comm.transport(0), Transport::HostStaging);
    let mut v = DeviceVec::from_slice(&device, &[1.0f64, 2.0, 3.0]).unwrap();
    let refusals = offload::scope(|s| {
        let stream = s.stream(&device)?;
        let mut refusals = Vec::new();
        let halos = [
            Halo::new().send(1, 0..1),
            Halo::new().receive(-1, 0..1),
            Halo::new().receive(0, 0..1),
            Halo::new().send(0, 2..4),
        ];
        for halo in &halos {
            refusals.push(comm.exchange(&stream, &mut v, halo).unwrap_err());
        }
        // Nothing to exchange: done at once. The sum over one rank is the vector itself.
        comm.exchange(&stream, &mut v, &Halo::new()).unwrap();
        comm.all_reduce_sum(&stream, &mut v).unwrap();
        Ok(refusals)
    })
    .unwrap();
    let messages: Vec<String> = refusals.iter().map(|e| e.to_string()).collect();
    assert!(refusals
        .iter()
        .all(|e| matches!(e, Error::InvalidArgument { .. })));
    assert!(messages[0].contains("peer 1 is not another rank of the 1 (this is rank 0)"));
    assert!(messages[1].contains("peer -1"));
    assert!(messages[2].contains("peer 0"));
    assert!(messages[3].contains("part 2..4 is not within the vector's 3 elements"));
    assert_eq!(v.to_vec().unwrap(), [1.0, 2.0, 3.0]);
}
