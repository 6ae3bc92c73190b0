//! Recorded launches (`Stream::record_graph`, `Graph::launch`), shared by the host-backend and
//! GPU suites: replays give the result of the same launches queued one by one, host data and
//! work on the recording stream itself are refused while recording, a replay is ordered across
//! streams, and a panic in a replay is reported.

use super::{floats, same_bits};
use offload::{Device, DeviceVec, Error, Launch};
use offload_examples::kernels::{saxpy, streams::relax};
use offload_examples::reference;

/// Three launches recorded once and replayed four times on device slices give the CPU's result
/// of twelve steps; recording runs nothing.
pub fn replays_give_the_launches_result(device: &Device) {
    let n = 100_003;
    let x = floats(n, 70);
    let y0 = floats(n, 71);
    let (mut after_recording, mut replayed) = (vec![0.0f32; n], vec![0.0f32; n]);
    let recorded = offload::scope(|s| {
        let stream = s.stream(device)?;
        let (dx, dy) = (stream.upload(&x)?, stream.upload(&y0)?);
        let graph = stream.record_graph(|s| {
            saxpy::enqueue(s, Launch::auto(), 2.0, dx, dy)?;
            relax::enqueue(s, Launch::auto().block(128), 3, dx, dy)?;
            saxpy::enqueue(s, Launch::auto().grid(7), -0.5, dx, dy)
        })?;
        stream.download(dy, &mut after_recording)?;
        stream.synchronize()?;
        for _ in 0..4 {
            graph.launch()?;
        }
        stream.download(dy, &mut replayed)?;
        Ok(graph.len())
    })
    .unwrap();
    assert_eq!(recorded, 3);
    assert!(
        same_bits(&after_recording, &y0),
        "recording ran a launch on {}",
        device.name()
    );
    let mut expected = y0.clone();
    for _ in 0..4 {
        reference::saxpy(2.0, &x, &mut expected);
        reference::relax(3, &x, &mut expected);
        reference::saxpy(-0.5, &x, &mut expected);
    }
    assert!(
        same_bits(&replayed, &expected),
        "replays on {}",
        device.name()
    );
}

/// A host slice in a recorded launch is refused naming the remedy, as are an upload and a launch
/// on the recording stream itself (its `DeviceVec` borrowed for the call only, which a graph
/// would outlive); the stream records and runs normally afterwards.
pub fn host_data_and_copies_are_refused_while_recording(device: &Device) {
    let x = floats(1000, 72);
    let mut y = floats(1000, 73);
    let mut back = vec![0.0f32; x.len()];
    let vx = DeviceVec::from_slice(device, &x).unwrap();
    offload::scope(|s| {
        let stream = s.stream(device)?;
        let dx = stream.upload(&x)?;
        let dy = stream.alloc_zeroed::<f32>(x.len())?;
        match stream.record_graph(|s| saxpy::enqueue(s, Launch::auto(), 1.0, &x, dy)) {
            Err(Error::InvalidArgument {
                kernel: "saxpy",
                argument: "x",
                reason,
            }) => assert!(reason.contains("upload it first"), "{reason}"),
            other => panic!("expected InvalidArgument, got {:?}", other.map(|g| g.len())),
        }
        match stream.record_graph(|_| stream.upload(&x).map(drop)) {
            Err(Error::InvalidLaunch { reason, .. }) => {
                assert!(reason.contains("only kernel launches"), "{reason}")
            }
            other => panic!("expected InvalidLaunch, got {:?}", other.map(|g| g.len())),
        }
        match stream.record_graph(|_| saxpy::enqueue(&stream, Launch::auto(), 1.0, &vx, dy)) {
            Err(Error::InvalidLaunch {
                kernel: "saxpy",
                reason,
                ..
            }) => assert!(
                reason.contains("the handle that record_graph gives"),
                "{reason}"
            ),
            other => panic!("expected InvalidLaunch, got {:?}", other.map(|g| g.len())),
        }
        let graph = stream.record_graph(|s| saxpy::enqueue(s, Launch::auto(), 1.0, dx, dy))?;
        graph.launch()?;
        saxpy::enqueue(&stream, Launch::auto(), 1.0, dx, &mut y[..])?;
        stream.download(dy, &mut back)
    })
    .unwrap();
    assert!(same_bits(&back, &x), "on {}", device.name());
}

/// A graph recorded on `DeviceVec`s and replayed on one stream, then a kernel on another stream
/// reading what the replays wrote, with no event between them: the reader waits for the replays
/// by itself (as `streams::a_reader_on_another_stream_waits_for_the_writer` for launches).
pub fn a_replay_is_ordered_across_streams(device: &Device) {
    let n = 1 << 20;
    let steps = if device.is_gpu() { 1000 } else { 5 };
    let x = floats(n, 76);
    let y0 = floats(n, 77);
    let dx = DeviceVec::from_slice(device, &x).unwrap();
    let mut dy = DeviceVec::from_slice(device, &y0).unwrap();
    let mut dz = DeviceVec::zeroed(device, n).unwrap();
    offload::scope(|s| {
        let (writer, reader) = (s.stream(device)?, s.stream(device)?);
        let graph =
            writer.record_graph(|w| relax::enqueue(w, Launch::auto(), steps, &dx, &mut dy))?;
        for _ in 0..4 {
            graph.launch()?;
        }
        drop(graph);
        saxpy::enqueue(&reader, Launch::auto(), 1.0, &dy, &mut dz)
    })
    .unwrap();
    let mut expected = y0.clone();
    for _ in 0..4 {
        reference::relax(steps, &x, &mut expected);
    }
    assert!(
        same_bits(&dz.to_vec().unwrap(), &expected),
        "on {}",
        device.name()
    );
}

/// A recorded launch that panics (a thread indexes past `x`) fails the stream's synchronization
/// after a replay, naming the kernel.
pub fn a_panic_in_a_replay_is_an_error(device: &Device) {
    let x = floats(999, 74);
    let y = floats(1000, 75);
    let outcome = offload::scope(|s| {
        let stream = s.stream(device)?;
        let (dx, dy) = (stream.upload(&x)?, stream.upload(&y)?);
        let graph = stream
            .record_graph(|s| saxpy::enqueue(s, Launch::auto().grid(4).block(256), 1.0, dx, dy))?;
        stream.synchronize()?;
        graph.launch()?;
        stream.synchronize()
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
