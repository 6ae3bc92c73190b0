include!("shared/no_images.rs");

include!("shared/saxpy.rs");

// A recorded graph uses its `DeviceVec`s again at each replay: they stay borrowed while it
// lives, so freeing one before the graph's last replay does not compile.
fn main() {
    let device = offload::Device::host();
    let x = offload::DeviceVec::from_slice(&device, &[1.0f32; 4]).unwrap();
    let mut y = offload::DeviceVec::<f32>::zeroed(&device, 4).unwrap();
    let _ = offload::scope(|s| {
        let stream = s.stream(&device)?;
        let graph = stream.record_graph(|r| {
            saxpy::enqueue(r, offload::Launch::auto(), 2.0, &x, &mut y)
        })?;
        drop(y);
        graph.launch()
    });
}
