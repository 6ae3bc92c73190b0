include!("shared/no_images.rs");

#[offload::kernel]
pub fn sum(x: &[f64], #[reduce(sum)] total: &mut f64) {
    offload::for_each_mine_wide(x, |_, x| *total += x);
}

// On a stream a reduction goes to device memory: a host value is refused.
fn main() {
    let device = offload::Device::host();
    let x = offload::DeviceVec::from_slice(&device, &[1.0f64; 8]).unwrap();
    let mut total = 0.0f64;
    let _ = offload::scope(|s| {
        let stream = s.stream(&device)?;
        sum::enqueue(&stream, offload::Launch::auto(), &x, &mut total)
    });
}
