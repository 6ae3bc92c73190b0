//! Streams and device selection, shared by the host-backend and GPU suites.

use super::floats;
use offload::{Device, Error, Launch, PinnedVec};
use offload_examples::kernels::{saxpy, streams::relax};
use offload_examples::reference;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Chunks of one array queued alternately on two streams give the CPU's result, from pageable
/// and from pinned memory.
pub fn two_streams_give_the_cpu_result(device: &Device) {
    let n = 100_003;
    let x = floats(n, 30);
    let y0 = floats(n, 31);
    let mut expected = y0.clone();
    reference::relax(40, &x, &mut expected);
    let mut pageable = y0.clone();
    let mut pinned = PinnedVec::from_slice(&y0).unwrap();
    let pinned_x = PinnedVec::from_slice(&x).unwrap();
    offload::scope(|s| {
        let streams = [s.stream(device)?, s.stream(device)?];
        let chunk = 10_000;
        for (i, (y, x)) in pageable.chunks_mut(chunk).zip(x.chunks(chunk)).enumerate() {
            relax::enqueue(&streams[i % 2], Launch::auto(), 40, x, y)?;
        }
        for (i, (y, x)) in pinned
            .chunks_mut(chunk)
            .zip(pinned_x.chunks(chunk))
            .enumerate()
        {
            relax::enqueue(&streams[i % 2], Launch::auto().block(128), 40, x, y)?;
        }
        Ok(())
    })
    .unwrap();
    assert!(
        bits(&pageable) == bits(&expected),
        "pageable on {}",
        device.name()
    );
    assert!(
        bits(&pinned) == bits(&expected),
        "pinned on {}",
        device.name()
    );
}

/// Device slices of the scope carry data from kernel to kernel without the host: uploaded,
/// written by one kernel and read by the next on one stream, read on a second stream ordered
/// after the first by an event, and downloaded (to pageable and pinned memory).
pub fn device_slices_chain_kernels_on_streams(device: &Device) {
    let n = 300_001;
    let x = floats(n, 50);
    let y0 = floats(n, 51);
    let mut first = vec![0.0f32; n];
    let mut second = PinnedVec::filled(0.0f32, n).unwrap();
    offload::scope(|s| {
        let (a, b) = (s.stream(device)?, s.stream(device)?);
        let dx = a.upload(&x)?;
        let dy = a.upload(&y0)?;
        relax::enqueue(&a, Launch::auto(), 5, dx, dy)?;
        saxpy::enqueue(&a, Launch::auto(), 2.0, dx, dy)?;
        a.download(dy, &mut first)?;
        b.wait(&a.record()?)?;
        let dz = b.alloc_zeroed::<f32>(n)?;
        saxpy::enqueue(&b, Launch::auto(), 1.0, dy, dz)?;
        saxpy::enqueue(&b, Launch::auto().block(64), -1.0, dx, dz)?;
        b.download(dz, &mut second)?;
        Ok(())
    })
    .unwrap();
    let mut expected = y0.clone();
    reference::relax(5, &x, &mut expected);
    reference::saxpy(2.0, &x, &mut expected);
    assert!(
        bits(&first) == bits(&expected),
        "first stream on {}",
        device.name()
    );
    reference::saxpy(-1.0, &x, &mut expected);
    assert!(
        bits(&second) == bits(&expected),
        "second stream on {}",
        device.name()
    );
}

/// One device slice passed as a kernel's read-only `x` and its written `y` is refused before
/// anything is queued: the slice keeps its uploaded values.
pub fn aliased_device_slices_are_refused(device: &Device) {
    let x = floats(1000, 60);
    let mut back = vec![0.0f32; x.len()];
    let outcome = offload::scope(|s| {
        let stream = s.stream(device)?;
        let dx = stream.upload(&x)?;
        let refused = saxpy::enqueue(&stream, Launch::auto(), 2.0, dx, dx);
        stream.download(dx, &mut back)?;
        refused
    });
    match outcome {
        Err(Error::InvalidArgument {
            kernel: "saxpy",
            argument: "x",
            reason,
        }) => assert!(reason.contains("`y`"), "{reason}"),
        other => panic!(
            "expected InvalidArgument on {}, got {other:?}",
            device.name()
        ),
    }
    assert!(
        bits(&back) == bits(&x),
        "nothing written on {}",
        device.name()
    );
}

/// Events: a stream waits for another's event, events time the work between them, and
/// synchronizing a stream or an event succeeds once the work is done.
pub fn events_order_and_time_streams(device: &Device) {
    let x = floats(1 << 20, 32);
    let mut first = vec![0.0f32; x.len()];
    let mut second = vec![1.0f32; x.len()];
    let elapsed = offload::scope(|s| {
        let (a, b) = (s.stream(device)?, s.stream(device)?);
        let start = a.record()?;
        relax::enqueue(&a, Launch::auto(), 200, &x, &mut first)?;
        let done = a.record()?;
        b.wait(&done)?;
        saxpy::enqueue(&b, Launch::auto(), 2.0, &x, &mut second)?;
        b.synchronize()?;
        done.synchronize()?;
        done.elapsed_since(&start)
    })
    .unwrap();
    assert!(
        elapsed > std::time::Duration::ZERO,
        "{elapsed:?} on {}",
        device.name()
    );
    let mut expected = vec![0.0f32; x.len()];
    reference::relax(200, &x, &mut expected);
    assert!(bits(&first) == bits(&expected));
    let mut expected = vec![1.0f32; x.len()];
    reference::saxpy(2.0, &x, &mut expected);
    assert!(bits(&second) == bits(&expected));
}

/// A kernel that panics on a stream is an `Err(KernelFailed)` naming it, from the stream's
/// synchronization (the host reports it when queued), and the scope still waits for the rest.
pub fn panic_on_a_stream_is_an_error(device: &Device) {
    let x = floats(999, 33);
    let mut y = floats(1000, 34);
    let mut fine = floats(1000, 35);
    let outcome = offload::scope(|s| {
        let (a, b) = (s.stream(device)?, s.stream(device)?);
        saxpy::enqueue(&b, Launch::auto(), 1.0, &x, &mut fine[..999])?;
        saxpy::enqueue(&a, Launch::auto().grid(4).block(256), 1.0, &x, &mut y)?;
        a.synchronize()
    });
    match outcome {
        Err(Error::KernelFailed {
            kernel: "saxpy", ..
        }) => {}
        other => panic!(
            "expected KernelFailed from saxpy on {}, got {other:?}",
            device.name()
        ),
    }
}

/// Every device at once: one stream on each, each with its share of the data.
pub fn every_device_at_once_gives_the_cpu_result(devices: &[Device]) {
    let n = 200_000;
    let x = floats(n, 36);
    let mut y = floats(n, 37);
    let mut expected = y.clone();
    reference::relax(10, &x, &mut expected);
    let share = n.div_ceil(devices.len());
    offload::scope(|s| {
        for ((device, y), x) in devices.iter().zip(y.chunks_mut(share)).zip(x.chunks(share)) {
            relax::enqueue(&s.stream(device)?, Launch::auto(), 10, x, y)?;
        }
        Ok(())
    })
    .unwrap();
    assert!(bits(&y) == bits(&expected));
}

/// Device indices out of range are errors naming how many there are.
pub fn device_index_out_of_range_is_an_error() {
    let gpus = offload::devices().iter().filter(|d| d.is_gpu()).count();
    for i in 0..gpus {
        assert!(Device::gpu(i).unwrap().is_gpu());
    }
    match Device::gpu(gpus) {
        Err(Error::NoDevice(message)) => assert!(
            message.starts_with(&format!(
                "GPU index {gpus} is out of range: this machine has {gpus} GPU"
            )),
            "{message}"
        ),
        other => panic!("expected NoDevice, got {other:?}"),
    }
    let all = offload::devices().len();
    match Device::by_index(all) {
        Err(Error::NoDevice(message)) => assert!(
            message.contains(&format!("device index {all} is out of range: {all} device")),
            "{message}"
        ),
        other => panic!("expected NoDevice, got {other:?}"),
    }
}
