//! The bandwidth ceiling benchmarks compare against: a device-to-device memcpy through the CUDA
//! driver directly (not through offload), timed with CUDA events.

use offload::{Device, Platform};

/// Best of several device-to-device copies of `bytes` bytes, in GB/s counting read plus write;
/// `None` when `device` is not an NVIDIA GPU (whichever plugin drives it).
pub fn device_to_device(
    device: &Device,
    bytes: usize,
) -> Result<Option<f64>, Box<dyn std::error::Error>> {
    if device.platform() != Platform::Cuda {
        return Ok(None);
    }
    let ctx = cudarc::driver::CudaContext::new(device.ordinal())?;
    let stream = ctx.new_stream()?;
    let src = stream.alloc_zeros::<u8>(bytes)?;
    let mut dst = stream.alloc_zeros::<u8>(bytes)?;
    stream.memcpy_dtod(&src, &mut dst)?;
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let (start, stop) = (ctx.new_event(timing)?, ctx.new_event(timing)?);
    let mut best_ms = f32::MAX;
    for _ in 0..10 {
        start.record(&stream)?;
        stream.memcpy_dtod(&src, &mut dst)?;
        stop.record(&stream)?;
        stop.synchronize()?;
        best_ms = best_ms.min(start.elapsed_ms(&stop)?);
    }
    Ok(Some(2.0 * bytes as f64 / (best_ms as f64 * 1e-3) / 1e9))
}

/// Best of several host-to-device and device-to-host copies of `bytes` bytes between pinned
/// host memory and the device, straight through the driver (the bus's ceiling), in GB/s each
/// way; `None` when `device` is not an NVIDIA GPU (whichever plugin drives it).
pub fn pinned_host_device(
    device: &Device,
    bytes: usize,
) -> Result<Option<(f64, f64)>, Box<dyn std::error::Error>> {
    if device.platform() != Platform::Cuda {
        return Ok(None);
    }
    let ctx = cudarc::driver::CudaContext::new(device.ordinal())?;
    let stream = ctx.new_stream()?;
    // SAFETY: the pinned buffer is written by the first copy before it is read.
    let mut host = unsafe { ctx.alloc_pinned_with_flags::<u8>(bytes, 0)? };
    let mut dev = stream.alloc_zeros::<u8>(bytes)?;
    stream.memcpy_dtoh(&dev, &mut host)?;
    let timing = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
    let (start, stop) = (ctx.new_event(timing)?, ctx.new_event(timing)?);
    let (mut to_ms, mut from_ms) = (f32::MAX, f32::MAX);
    for _ in 0..5 {
        start.record(&stream)?;
        stream.memcpy_htod(&host, &mut dev)?;
        stop.record(&stream)?;
        stop.synchronize()?;
        to_ms = to_ms.min(start.elapsed_ms(&stop)?);
        start.record(&stream)?;
        stream.memcpy_dtoh(&dev, &mut host)?;
        stop.record(&stream)?;
        stop.synchronize()?;
        from_ms = from_ms.min(start.elapsed_ms(&stop)?);
    }
    let rate = |ms: f32| bytes as f64 / (ms as f64 * 1e-3) / 1e9;
    Ok(Some((rate(to_ms), rate(from_ms))))
}
