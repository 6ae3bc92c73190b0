//! Streams and device selection, shared by the host-backend and GPU suites.

use super::{floats, same_bits};
use offload::trace::thread_counters;
use offload::{Device, DeviceVec, Error, Launch, PinnedVec, Stream};
use offload_examples::kernels::{saxpy, streams::relax};
use offload_examples::reference;
use std::time::Duration;

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
        same_bits(&pageable, &expected),
        "pageable on {}",
        device.name()
    );
    assert!(same_bits(&pinned, &expected), "pinned on {}", device.name());
}

/// The racing program of issue 12 on `streams` streams (1 or 2): a long kernel writes device data
/// on the first, and a kernel reading it is queued at once on the last, with no event between
/// them; once with a scope's device slices, once with `DeviceVec`s borrowed per call. Returns
/// what the reader wrote, each way.
pub fn writer_then_reader(
    device: &Device,
    streams: usize,
    steps: u32,
    x: &[f32],
    y0: &[f32],
) -> offload::Result<(Vec<f32>, Vec<f32>)> {
    let n = x.len();
    let mut from_slices = vec![0.0f32; n];
    let dx = DeviceVec::from_slice(device, x)?;
    let mut dy = DeviceVec::from_slice(device, y0)?;
    let mut dz = DeviceVec::zeroed(device, n)?;
    offload::scope(|s| {
        let queues = (0..streams)
            .map(|_| s.stream(device))
            .collect::<offload::Result<Vec<Stream<'_>>>>()?;
        let (writer, reader) = (&queues[0], &queues[streams - 1]);
        let (sx, sy) = (writer.upload(x)?, writer.upload(y0)?);
        let sz = reader.alloc_zeroed::<f32>(n)?;
        relax::enqueue(writer, Launch::auto(), steps, sx, sy)?;
        saxpy::enqueue(reader, Launch::auto(), 1.0, sy, sz)?;
        reader.download(sz, &mut from_slices)?;
        relax::enqueue(writer, Launch::auto(), steps, &dx, &mut dy)?;
        saxpy::enqueue(reader, Launch::auto(), 1.0, &dy, &mut dz)?;
        Ok(())
    })?;
    Ok((from_slices, dz.to_vec()?))
}

/// The racing program with no event between writer and reader gives the one-stream result (and
/// the CPU's): the reader's stream waits for the writer's kernel by itself.
pub fn a_reader_on_another_stream_waits_for_the_writer(device: &Device) {
    let n = 1 << 20;
    let steps = if device.is_gpu() { 4000 } else { 20 };
    let x = floats(n, 70);
    let y0 = floats(n, 71);
    let mut expected = y0.clone();
    reference::relax(steps, &x, &mut expected);
    let one = writer_then_reader(device, 1, steps, &x, &y0).unwrap();
    let two = writer_then_reader(device, 2, steps, &x, &y0).unwrap();
    assert!(
        same_bits(&one.0, &expected),
        "one stream on {}",
        device.name()
    );
    assert!(
        same_bits(&two.0, &one.0),
        "device slices on two streams on {}",
        device.name()
    );
    assert!(
        same_bits(&two.1, &one.1),
        "DeviceVecs on two streams on {}",
        device.name()
    );
    assert!(same_bits(&one.1, &expected));
}

/// One `DeviceVec` serves a loop of launches queued on alternating streams (each call borrows it
/// for that call only); a stream uploads into it; sub-range views pass its halves to kernels on
/// two streams; a plain launch and host copies inside the scope see the streams' results.
pub fn device_vecs_serve_loops_on_streams(device: &Device) {
    let n = 100_001;
    let half = n / 2;
    let x = floats(n, 80);
    let y0 = floats(n, 81);
    let dx = DeviceVec::from_slice(device, &x).unwrap();
    let mut dy = DeviceVec::zeroed(device, n).unwrap();
    let mut dz = DeviceVec::zeroed(device, n).unwrap();
    let mut seen = Vec::new();
    let mut downloaded = vec![0.0f32; n];
    offload::scope(|s| {
        let queues = [s.stream(device)?, s.stream(device)?];
        queues[1].upload_into(&y0, &mut dy)?;
        for i in 0..6 {
            relax::enqueue(&queues[i % 2], Launch::auto(), 50, &dx, &mut dy)?;
        }
        let (a, b) = (&queues[0], &queues[1]);
        saxpy::enqueue(
            a,
            Launch::auto(),
            2.0,
            dx.slice(..half),
            dy.slice_mut(..half),
        )?;
        saxpy::enqueue(
            b,
            Launch::auto(),
            -1.0,
            dx.slice(half..),
            dy.slice_mut(half..),
        )?;
        saxpy::launch(Launch::on(device), 1.0, &dy, &mut dz)?;
        seen = dy.to_vec()?;
        a.download(&dz, &mut downloaded)?;
        Ok(())
    })
    .unwrap();
    let mut expected = y0.clone();
    for _ in 0..6 {
        reference::relax(50, &x, &mut expected);
    }
    reference::saxpy(2.0, &x[..half], &mut expected[..half]);
    reference::saxpy(-1.0, &x[half..], &mut expected[half..]);
    assert!(
        same_bits(&seen, &expected),
        "host read on {}",
        device.name()
    );
    assert!(
        same_bits(&downloaded, &expected),
        "plain launch, then download on {}",
        device.name()
    );
    assert!(same_bits(&dy.to_vec().unwrap(), &expected));
}

/// A `DeviceVec` dropped while a stream still writes it waits for that work first: memory
/// allocated next (which may reuse it) keeps what the host put there.
pub fn freeing_a_device_vec_waits_for_its_streams(device: &Device) {
    let n = 1 << 20;
    let x = floats(n, 90);
    let ones = vec![1.0f32; n];
    let dx = DeviceVec::from_slice(device, &x).unwrap();
    let after = offload::scope(|s| {
        let stream = s.stream(device)?;
        let mut doomed = DeviceVec::<f32>::zeroed(device, n)?;
        let steps = if device.is_gpu() { 4000 } else { 5 };
        relax::enqueue(&stream, Launch::auto(), steps, &dx, &mut doomed)?;
        drop(doomed);
        let next = DeviceVec::from_slice(device, &ones)?;
        stream.synchronize()?;
        next.to_vec()
    })
    .unwrap();
    assert!(same_bits(&after, &ones), "on {}", device.name());
}

/// Stream copies into host data that is not device data are refused, naming the argument.
pub fn stream_copies_need_device_data(device: &Device) {
    let x = floats(10, 91);
    let mut host = vec![0.0f32; 10];
    let mut back = vec![0.0f32; 10];
    let mut short = DeviceVec::<f32>::zeroed(device, 9).unwrap();
    offload::scope(|s| {
        let stream = s.stream(device)?;
        match stream.download(&x, &mut back) {
            Err(Error::InvalidArgument { argument, .. }) => assert_eq!(argument, "src"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
        match stream.upload_into(&x, &mut host) {
            Err(Error::InvalidArgument { argument, .. }) => assert_eq!(argument, "dst"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
        match stream.upload_into(&x, &mut short) {
            Err(Error::LengthMismatch {
                expected, found, ..
            }) => {
                assert_eq!((expected, found), (9, 10))
            }
            other => panic!("expected LengthMismatch, got {other:?}"),
        }
        Ok(())
    })
    .unwrap();
    assert!(
        host.iter().chain(&back).all(|&v| v == 0.0),
        "nothing written"
    );
}

/// With device timing on, a plain launch reports its kernel's time measured by events, no more
/// than the host-measured time around it; with it off (and no `OFFLOAD_INFO`), none.
pub fn plain_launches_report_device_time(device: &Device) {
    let x = floats(1 << 16, 92);
    let mut y = floats(1 << 16, 93);
    offload::measure_device_time(true);
    let timed = saxpy::launch(Launch::on(device), 2.0, &x, &mut y).map(|()| offload::last_launch());
    offload::measure_device_time(false);
    let report = timed.unwrap().expect("a report");
    let device_time = report.device_time.expect("device time");
    assert!(
        device_time > Duration::ZERO && device_time <= report.kernel_time,
        "{device_time:?} vs {:?} on {}",
        report.kernel_time,
        device.name()
    );
    saxpy::launch(Launch::on(device), 2.0, &x, &mut y).unwrap();
    if !offload::trace::enabled() {
        assert_eq!(offload::last_launch().unwrap().device_time, None);
    }
}

/// GPU only: with the trace on, stream uploads, downloads, queued launches and their copies are
/// counted (and printed), and host data a stream sends again unchanged is reported as
/// redundant.
pub fn stream_work_is_traced(device: &Device) {
    offload::trace::enable();
    let n = 4096;
    let x = floats(n, 94);
    let mut ys = vec![vec![0.0f32; n]; 3];
    let mut back = vec![0.0f32; n];
    let before = thread_counters();
    offload::scope(|s| {
        let stream = s.stream(device)?;
        let dx = stream.upload(&x)?;
        stream.download(dx, &mut back)?;
        for y in ys.iter_mut() {
            saxpy::enqueue(&stream, Launch::auto(), 1.0, &x, y)?;
        }
        Ok(())
    })
    .unwrap();
    let counted = thread_counters() - before;
    assert_eq!(
        counted.copies_to_device, 7,
        "upload, then x and y per launch"
    );
    assert_eq!(counted.copies_from_device, 4, "download, then y per launch");
    assert_eq!(counted.launches, 3);
    assert_eq!(counted.redundant_copies, 3, "x sent again by each launch");
    assert!(same_bits(&back, &x));
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
        same_bits(&first, &expected),
        "first stream on {}",
        device.name()
    );
    reference::saxpy(-1.0, &x, &mut expected);
    assert!(
        same_bits(&second, &expected),
        "second stream on {}",
        device.name()
    );
}

/// Launches prepared once (`saxpy::prepare`) give the generic `enqueue`'s results, host data
/// (copied in and back) and device slices alike, on two streams whose device data they order;
/// sizes that differ get their own default grids; bad arguments are refused with the generic
/// path's errors and queue nothing.
pub fn prepared_launches_give_the_enqueue_result(device: &Device) {
    let n = 100_003;
    let x = floats(n, 70);
    let y0 = floats(n, 71);
    let (mut host_y, mut short_y) = (y0.clone(), y0[..1000].to_vec());
    let (mut chained, mut refused, mut small) = (vec![0.0f32; n], y0.clone(), vec![9.0f32; 10]);
    offload::scope(|s| {
        let (a, b) = (s.stream(device)?, s.stream(device)?);
        let mut on_a = saxpy::prepare(&a, Launch::auto())?;
        let mut on_b = saxpy::prepare(&b, Launch::on(device).block(128))?;
        on_a.enqueue(2.0, &x, &mut host_y)?;
        on_a.enqueue(2.0, &x[..1000], &mut short_y)?;
        let (dx, dy) = (a.upload(&x)?, a.upload(&y0)?);
        for _ in 0..3 {
            on_a.enqueue(0.5, dx, dy)?;
            on_b.enqueue(-0.25, dx, dy)?;
        }
        b.download(dy, &mut chained)?;
        match on_a.enqueue(1.0, dy, dy) {
            Err(Error::InvalidArgument { argument, .. }) => assert_eq!(argument, "x"),
            other => panic!("expected InvalidArgument for aliased slices, got {other:?}"),
        }
        // Zeroed on b, written on a: a waits for b.
        let dsmall = b.alloc_zeroed::<f32>(10)?;
        on_a.enqueue(1.0, dx.slice(0..10)?, dsmall)?;
        a.download(dsmall, &mut small)?;
        b.download(dy, &mut refused)?;
        Ok(())
    })
    .unwrap();
    let mut expected = y0.clone();
    reference::saxpy(2.0, &x, &mut expected);
    assert!(
        same_bits(&host_y, &expected),
        "host data on {}",
        device.name()
    );
    assert!(
        same_bits(&short_y, &expected[..1000]),
        "1000 elements on {}",
        device.name()
    );
    let mut expected = y0.clone();
    for _ in 0..3 {
        reference::saxpy(0.5, &x, &mut expected);
        reference::saxpy(-0.25, &x, &mut expected);
    }
    assert!(
        same_bits(&chained, &expected),
        "device slices on two streams on {}",
        device.name()
    );
    assert!(
        same_bits(&refused, &expected),
        "the refused launch queued nothing on {}",
        device.name()
    );
    assert!(
        same_bits(&small, &x[..10]),
        "10 elements on {}",
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
    assert!(same_bits(&back, &x), "nothing written on {}", device.name());
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
    assert!(same_bits(&first, &expected));
    let mut expected = vec![1.0f32; x.len()];
    reference::saxpy(2.0, &x, &mut expected);
    assert!(same_bits(&second, &expected));
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
    assert!(same_bits(&y, &expected));
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
