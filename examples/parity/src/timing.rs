//! Timing offload and CUDA C launches against each other: device events around each launch,
//! the variants interleaved, the median reported; and how far two outputs differ.

use crate::kernels::Value;
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr};
use offload::Stream;
use std::error::Error;
use std::sync::Arc;

/// The benchmarks' result type.
pub type Res<T> = Result<T, Box<dyn Error>>;

/// Launches run before the timed ones.
pub const WARMUP: usize = 3;
/// Timed launches per variant (the median is reported).
pub const REPS: usize = 15;

/// The CUDA C side: context, stream, module.
pub struct Cuda {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub module: Arc<cudarc::driver::CudaModule>,
}

impl Cuda {
    /// The nvcc-built kernel `name`.
    pub fn function(&self, name: &str) -> Res<CudaFunction> {
        Ok(self.module.load_function(name)?)
    }
    /// A device copy of `data`.
    pub fn upload<T: DeviceRepr>(&self, data: &[T]) -> Res<CudaSlice<T>> {
        Ok(self.stream.clone_htod(data)?)
    }
    /// `n` zeros on the device.
    pub fn zeros<T: DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        n: usize,
    ) -> Res<CudaSlice<T>> {
        Ok(self.stream.alloc_zeros(n)?)
    }
    /// Device time of `launch`, in ms.
    pub fn time(&self, launch: &mut dyn FnMut(&CudaStream) -> Res<()>) -> Res<f64> {
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let (a, b) = (self.ctx.new_event(flags)?, self.ctx.new_event(flags)?);
        a.record(&self.stream)?;
        launch(&self.stream)?;
        b.record(&self.stream)?;
        b.synchronize()?;
        Ok(a.elapsed_ms(&b)? as f64)
    }
}

/// Device time of an offload launch queued on `stream`, in ms.
pub fn time_offload(
    stream: &Stream<'_>,
    launch: &mut dyn FnMut() -> offload::Result<()>,
) -> Res<f64> {
    let a = stream.record()?;
    launch()?;
    let b = stream.record()?;
    Ok(b.elapsed_since(&a)?.as_secs_f64() * 1e3)
}

/// The median of `v`.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the three variants interleaved and returns their medians.
pub fn measure(
    stream: &Stream<'_>,
    cuda: &Cuda,
    offload_default: &mut dyn FnMut() -> offload::Result<()>,
    offload_matched: &mut dyn FnMut() -> offload::Result<()>,
    cuda_launch: &mut dyn FnMut(&CudaStream) -> Res<()>,
) -> Res<(f64, f64, f64)> {
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..WARMUP + REPS {
        let ta = time_offload(stream, offload_default)?;
        let tb = time_offload(stream, offload_matched)?;
        let tc = cuda.time(cuda_launch)?;
        if rep >= WARMUP {
            a.push(ta);
            b.push(tb);
            c.push(tc);
        }
    }
    Ok((median(a), median(b), median(c)))
}

/// Largest |offload - cuda| over the largest |cuda|.
pub fn difference<T: Value + Into<f64>>(offload: &[T], cuda: &[T]) -> f64 {
    assert_eq!(offload.len(), cuda.len());
    let scale = cuda
        .iter()
        .map(|&v| v.into().abs())
        .fold(0.0, f64::max)
        .max(1e-300);
    let worst = offload
        .iter()
        .zip(cuda)
        .map(|(&a, &b)| {
            let (a, b): (f64, f64) = (a.into(), b.into());
            if a.is_nan() && b.is_nan() {
                0.0
            } else {
                (a - b).abs()
            }
        })
        .fold(0.0, f64::max);
    worst / scale
}

/// The end of a benchmark run: the CSV `text` written to `csv` when given, and an error when
/// `mismatches` kernels' outputs differed from CUDA C's.
pub fn finish(csv: Option<String>, text: &str, mismatches: usize) -> Res<()> {
    if let Some(path) = csv {
        std::fs::write(&path, text)?;
        println!("wrote {path}");
    }
    if mismatches > 0 {
        return Err(format!("{mismatches} kernels differ from CUDA C").into());
    }
    Ok(())
}
