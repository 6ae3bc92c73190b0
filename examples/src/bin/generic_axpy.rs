//! The generic axpy in f32, f64, f16 and bf16, and the const-generic 4×4 matrix kernel, on the
//! best device: each checked bit for bit against the CPU loop, with its kernel bandwidth and, on
//! a CUDA GPU, the ratio to a device-to-device memcpy of the same bytes measured in the same run.
//!
//! `cargo run --release -p offload-examples --bin generic_axpy [-- LOG2_N]` (default 2^27
//! elements on a GPU, 2^22 on the host).

use offload::half::{bf16, f16};
use offload::{Device, DeviceCopy, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::{kernels, reference, reference_bandwidth};
use std::ops::{Add, Mul};
use std::time::Duration;

type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let device = offload::default_device()?;
    let log2_n: u32 = match std::env::args().nth(1) {
        Some(arg) => arg.parse()?,
        None if device.is_gpu() => 27,
        None => 22,
    };
    let n = 1usize << log2_n;
    println!("device: {}; n = 2^{log2_n}", device.name());
    axpy::<f32>(&device, n, |v| v)?;
    axpy::<f64>(&device, n, f64::from)?;
    axpy::<f16>(&device, n, f16::from_f32)?;
    axpy::<bf16>(&device, n, bf16::from_f32)?;
    matmul4(&device, n / 16)?;
    Ok(())
}

/// Best kernel time of five launches of `run`.
fn best_of_five(mut run: impl FnMut() -> offload::Result<()>) -> Result<Duration, Failure> {
    run()?; // loads the image
    let mut best = Duration::MAX;
    for _ in 0..5 {
        run()?;
        best = best.min(offload::last_launch().expect("a launch ran").kernel_time);
    }
    Ok(best)
}

fn gbps(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / time.as_secs_f64() / 1e9
}

fn bits<T: DeviceCopy>(v: &[T]) -> &[u8] {
    // SAFETY: the element types here (floats, half floats, arrays of them) have no padding.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), std::mem::size_of_val(v)) }
}

fn axpy<T>(device: &Device, n: usize, from: impl Fn(f32) -> T) -> Result<(), Failure>
where
    T: DeviceCopy + offload::WideElement + offload::math::Arith + Add<Output = T> + Mul<Output = T>,
    kernels::axpy::Instance<T>: kernels::axpy::Declared,
{
    let x: Vec<T> = (0..n).map(|i| from((i % 1000) as f32 * 0.001)).collect();
    let y0: Vec<T> = (0..n).map(|i| from((i % 777) as f32 * 0.01)).collect();
    let a = from(1.5);
    let mut expected = y0.clone();
    reference::axpy(a, &x, &mut expected);
    let mut y = y0.clone();
    kernels::axpy::launch(Launch::on(device), a, &x, &mut y)?;
    if bits(&y) != bits(&expected) {
        return Err(format!("axpy<{}> differs from the CPU loop", name::<T>()).into());
    }
    let best = best_of_five(|| kernels::axpy::launch(Launch::on(device), a, &x, &mut y))?;
    let bytes = 3 * n * std::mem::size_of::<T>();
    let copy = reference_bandwidth::device_to_device(device, n * std::mem::size_of::<T>())?;
    println!(
        "axpy<{:>4}>: kernel {:.3} ms = {:.0} GB/s{}; matches the CPU loop bit for bit",
        name::<T>(),
        best.as_secs_f64() * 1e3,
        gbps(bytes, best),
        copy.map_or(String::new(), |c| format!(
            " = {:.2}x of memcpy ({c:.0} GB/s)",
            gbps(bytes, best) / c
        )),
    );
    if let Some(c) = copy {
        Ratio::print(
            "generic_axpy",
            &format!("axpy<{}>", name::<T>()),
            "device-to-device memcpy",
            Measure::Speed,
            gbps(bytes, best) / c,
            Goal::None,
        );
    }
    Ok(())
}

fn name<T>() -> &'static str {
    std::any::type_name::<T>().rsplit("::").next().unwrap()
}

fn matmul4(device: &Device, batch: usize) -> Result<(), Failure> {
    let m = |seed: usize| -> Vec<[[f32; 4]; 4]> {
        (0..batch)
            .map(|k| {
                std::array::from_fn(|i| {
                    std::array::from_fn(|j| ((k * 7 + i * 5 + j * 3 + seed) % 17) as f32 * 0.25)
                })
            })
            .collect()
    };
    let (a, b) = (m(1), m(2));
    let mut expected = vec![[[0.0f32; 4]; 4]; batch];
    reference::batched_matmul(&a, &b, &mut expected);
    let mut c = vec![[[0.0f32; 4]; 4]; batch];
    let launch = |c: &mut [[[f32; 4]; 4]]| {
        kernels::batched_matmul::launch::<f32, 4>(Launch::on(device), &a, &b, c)
    };
    launch(&mut c)?;
    if bits(&c) != bits(&expected) {
        return Err("batched_matmul<f32, 4> differs from the CPU loop".into());
    }
    let best = best_of_five(|| launch(&mut c))?;
    let bytes = 3 * batch * std::mem::size_of::<[[f32; 4]; 4]>();
    println!(
        "batched_matmul<f32, 4>: {batch} products, kernel {:.3} ms = {:.0} GB/s, {:.0} GFLOP/s; matches the CPU loop bit for bit",
        best.as_secs_f64() * 1e3,
        gbps(bytes, best),
        (batch * 2 * 64) as f64 / best.as_secs_f64() / 1e9
    );
    Ok(())
}
