//! A released device refuses every later launch with `Err(Released)`, plain or on a stream, through
//! every clone of its handle, and leaves the caller's data alone. Its own binary: releasing is for the whole process.

mod common;

use offload::{Device, Error, Launch};
use offload_examples::kernels;

fn refuses_launches_after_release(device: &Device) {
    let x = common::floats(2000, 1);
    let y0 = common::floats(2000, 2);
    let mut y = y0.clone();
    kernels::saxpy::launch(Launch::on(device), 2.0, &x, &mut y).unwrap();
    let clone = device.clone();
    // Released while a launch prepared before is in hand: that launch is refused too.
    let mut after = y0.clone();
    let prepared_then_released = offload::scope(|s| {
        let stream = s.stream(device)?;
        let mut prepared = kernels::saxpy::prepare(&stream, Launch::auto())?;
        prepared.enqueue(2.0, &x, &mut y)?;
        stream.synchronize()?;
        device.release()?;
        prepared.enqueue(2.0, &x, &mut after)
    });
    assert!(
        after == y0,
        "a refused prepared launch leaves the output alone"
    );
    assert!(
        matches!(prepared_then_released, Err(Error::Released { .. })),
        "a launch prepared before release on {}: {prepared_then_released:?}",
        device.name()
    );
    for handle in [device, &clone] {
        let mut y = y0.clone();
        match kernels::saxpy::launch(Launch::on(handle), 2.0, &x, &mut y) {
            Err(Error::Released { device: name }) => assert_eq!(name, device.name()),
            other => panic!("expected Released from {}, got {other:?}", device.name()),
        }
        assert!(y == y0, "a refused launch leaves the output alone");
        let queued = offload::scope(|s| {
            let stream = s.stream(handle)?;
            kernels::saxpy::enqueue(&stream, Launch::auto(), 2.0, &x, &mut y)
        });
        assert!(
            matches!(queued, Err(Error::Released { .. })),
            "a stream launch on {} after release: {queued:?}",
            device.name()
        );
        assert!(y == y0, "a refused stream launch leaves the output alone");
    }
}

/// Both devices in one test, in order: the host last, since the GPU's kernels need no host.
#[test]
fn a_released_device_refuses_launches() {
    if let Some(gpu) = common::gpu::gpu("a_released_device_refuses_launches (GPU)") {
        refuses_launches_after_release(&gpu);
        if let Some(info) = gpu.memory_info() {
            match info {
                Err(Error::Released { .. }) => {}
                other => panic!("memory_info after release: {other:?}"),
            }
        }
    }
    refuses_launches_after_release(&Device::host());
}
