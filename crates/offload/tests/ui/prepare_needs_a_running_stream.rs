include!("shared/no_images.rs");

include!("shared/saxpy.rs");

// A launch prepared on the handle that `record_graph` gives its body would outlive the body and
// could add launches to a later recording: `prepare` takes a running stream only.
fn main() {
    let device = offload::Device::host();
    let _ = offload::scope(|s| {
        let stream = s.stream(&device)?;
        let _graph = stream.record_graph(|r| {
            let _prepared = saxpy::prepare(r, offload::Launch::auto())?;
            Ok(())
        })?;
        Ok(())
    });
}
