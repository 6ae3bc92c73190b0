//! Every benchmark in offload and in CUDA C on the same GPU, in the same process, on the same
//! inputs: `parity CUBIN [CSV]`, where CUBIN is `cuda/parity.cu` built by nvcc (`scripts/parity`
//! does it on the GPU machine). Each kernel is timed with device events, launch by launch, the
//! three variants interleaved (offload with its default launch, offload with CUDA C's launch
//! shape, CUDA C); the median of the repetitions is reported, and the outputs of offload and CUDA
//! C are compared. Writes one CSV line per kernel and element type.

use cudarc::driver::{CudaContext, CudaSlice, DeviceRepr, LaunchConfig, PushKernelArg};
use offload::{Device, DeviceCopy, Launch, Stream};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_parity::cases::{self, Sizes};
use offload_parity::kernels::{self, Eos, Value, Weights, P, WINDOW};
use offload_parity::timing::{difference, finish, measure, Cuda, Res, REPS};
use std::fmt::Write as _;

const BLOCK: u32 = 256;

/// One kernel's figures: milliseconds per launch (median), and the largest difference between
/// the offload and CUDA C outputs relative to the largest CUDA C value.
struct Row {
    kernel: &'static str,
    ty: &'static str,
    bytes: f64,
    offload: f64,
    matched: f64,
    cuda: f64,
    diff: f64,
}

fn grid_1d(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u32).div_ceil(BLOCK), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn matched_1d<'a>(gpu: &'a Device, n: usize) -> Launch<'a> {
    Launch::on(gpu)
        .grid((n as u32).div_ceil(BLOCK))
        .block(BLOCK)
}

/// What each benchmark needs: the element type's name and conversions.
trait Elem:
    Value
    + DeviceCopy
    + DeviceRepr
    + cudarc::driver::ValidAsZeroBits
    + From<f32>
    + Into<f64>
    + Default
    + std::fmt::Debug
{
    const NAME: &'static str;
}
impl Elem for f32 {
    const NAME: &'static str = "f32";
}
impl Elem for f64 {
    const NAME: &'static str = "f64";
}

// SAFETY: repr(C) structs of plain floats, laid out as the CUDA C structs of the same fields.
unsafe impl<T: Elem> DeviceRepr for EosArg<T> {}
// SAFETY: as above.
unsafe impl<T: Elem> DeviceRepr for WeightsArg<T> {}

/// `Eos` as a CUDA kernel argument (the foreign trait needs a local type).
#[derive(Clone, Copy)]
#[repr(transparent)]
struct EosArg<T: DeviceCopy>(Eos<T>);
/// `Weights` as a CUDA kernel argument.
#[derive(Clone, Copy)]
#[repr(transparent)]
struct WeightsArg<T: DeviceCopy>(Weights<T>);

/// Downloads `d` into `into` on stream `s` (read once the scope has ended).
fn fetch<'s, T: Elem>(
    s: &Stream<'s>,
    d: offload::DeviceSlice<'s, T>,
    into: &'s mut Vec<T>,
) -> offload::Result<()> {
    into.resize(d.len(), T::default());
    s.download(d, into)
}

/// Defines `$name`, which runs every benchmark in element type `$t` (a macro, not a generic
/// function: each launcher accepts only the instances its kernel declares).
macro_rules! benchmarks {
    ($name:ident, $t:ty) => {
        #[allow(clippy::too_many_lines)]
        fn $name(gpu: &Device, cuda: &Cuda, sizes: Sizes, rows: &mut Vec<Row>) -> Res<()> {
            type T = $t;
            let n = sizes.n;
            let t = std::mem::size_of::<T>() as f64;
            let name = |k: &str| format!("{k}_{}", T::NAME);
            let mut push = |kernel, bytes, (offload, matched, cuda): (f64, f64, f64), diff| {
                rows.push(Row {
                    kernel,
                    ty: T::NAME,
                    bytes,
                    offload,
                    matched,
                    cuda,
                    diff,
                });
            };
            let w = cases::weights::<T>();

            // eos: five inputs, two outputs.
            {
                let k = cases::eos_constants::<T>();
                let host: Vec<Vec<T>> = (0..5)
                    .map(|j| cases::values(n, 10 + j, -1.0, 1.0))
                    .collect();
                let c: Vec<CudaSlice<T>> =
                    host.iter().map(|h| cuda.upload(h)).collect::<Res<_>>()?;
                let (mut ce, mut cp) = (cuda.zeros::<T>(n)?, cuda.zeros::<T>(n)?);
                let f = cuda.function(&name("eos"))?;
                let ni = n as i32;
                let (mut ge, mut gp) = (Vec::new(), Vec::new());
                let times = offload::scope(|scope| {
                    let s = scope.stream(gpu)?;
                    let d: Vec<_> = host
                        .iter()
                        .map(|h| s.upload(h))
                        .collect::<offload::Result<_>>()?;
                    let (e, p) = (s.alloc_zeroed::<T>(n)?, s.alloc_zeroed::<T>(n)?);
                    let times = measure(
                        &s,
                        cuda,
                        &mut || {
                            kernels::eos::enqueue(
                                &s,
                                Launch::on(gpu),
                                k,
                                d[0],
                                d[1],
                                d[2],
                                d[3],
                                d[4],
                                e,
                                p,
                            )
                        },
                        &mut || {
                            kernels::eos::enqueue(
                                &s,
                                matched_1d(gpu, n),
                                k,
                                d[0],
                                d[1],
                                d[2],
                                d[3],
                                d[4],
                                e,
                                p,
                            )
                        },
                        &mut |st| {
                            let mut b = st.launch_builder(&f);
                            let karg = EosArg(k);
                            b.arg(&karg)
                                .arg(&c[0])
                                .arg(&c[1])
                                .arg(&c[2])
                                .arg(&c[3])
                                .arg(&c[4]);
                            b.arg(&mut ce).arg(&mut cp).arg(&ni);
                            // SAFETY: the arguments match eos_T's parameters; buffers hold n elements.
                            unsafe { b.launch(grid_1d(n)) }?;
                            Ok(())
                        },
                    );
                    fetch(&s, e, &mut ge)?;
                    fetch(&s, p, &mut gp)?;
                    Ok(times)
                })??;
                let diff = difference(&ge, &cuda.stream.clone_dtoh(&ce)?)
                    .max(difference(&gp, &cuda.stream.clone_dtoh(&cp)?));
                push("eos", 7.0 * n as f64 * t, times, diff);
            }

            // window_sum
            {
                let host = cases::values::<T>(n + WINDOW - 1, 20, -1.0, 1.0);
                let (cx, mut cs) = (cuda.upload(&host)?, cuda.zeros::<T>(n)?);
                let f = cuda.function(&name("window_sum"))?;
                let ni = n as i32;
                let mut got = Vec::new();
                let times = offload::scope(|scope| {
                    let s = scope.stream(gpu)?;
                    let (dx, ds) = (s.upload(&host)?, s.alloc_zeroed::<T>(n)?);
                    let times = measure(
                        &s,
                        cuda,
                        &mut || kernels::window_sum::enqueue(&s, Launch::on(gpu), dx, ds),
                        &mut || kernels::window_sum::enqueue(&s, matched_1d(gpu, n), dx, ds),
                        &mut |st| {
                            let mut b = st.launch_builder(&f);
                            b.arg(&cx).arg(&mut cs).arg(&ni);
                            // SAFETY: matches window_sum_T; x holds n + WINDOW - 1 elements.
                            unsafe { b.launch(grid_1d(n)) }?;
                            Ok(())
                        },
                    );
                    fetch(&s, ds, &mut got)?;
                    Ok(times)
                })??;
                push(
                    "window_sum",
                    2.0 * n as f64 * t,
                    times,
                    difference(&got, &cuda.stream.clone_dtoh(&cs)?),
                );
            }

            // gather and scatter through a locally shuffled permutation
            for gather in [true, false] {
                let index = cases::local_permutation(n, 1024, 30);
                let host = cases::values::<T>(n, 31, -1.0, 1.0);
                let (ci, cx, mut cout) = (
                    cuda.upload(&index)?,
                    cuda.upload(&host)?,
                    cuda.zeros::<T>(n)?,
                );
                let kernel = if gather { "gather" } else { "scatter" };
                let f = cuda.function(&name(kernel))?;
                let ni = n as i32;
                let mut got = Vec::new();
                let times = offload::scope(|scope| {
                    let s = scope.stream(gpu)?;
                    let (di, dx, dout) =
                        (s.upload(&index)?, s.upload(&host)?, s.alloc_zeroed::<T>(n)?);
                    let run = |launch| {
                        if gather {
                            kernels::gather::enqueue(&s, launch, di, dx, dout)
                        } else {
                            // SAFETY: index is a permutation of 0..n.
                            unsafe { kernels::scatter::enqueue(&s, launch, di, dx, dout) }
                        }
                    };
                    let times = measure(
                        &s,
                        cuda,
                        &mut || run(Launch::on(gpu)),
                        &mut || run(matched_1d(gpu, n)),
                        &mut |st| {
                            let mut b = st.launch_builder(&f);
                            b.arg(&ci).arg(&cx).arg(&mut cout).arg(&ni);
                            // SAFETY: matches gather_T / scatter_T; index is a permutation of 0..n.
                            unsafe { b.launch(grid_1d(n)) }?;
                            Ok(())
                        },
                    );
                    fetch(&s, dout, &mut got)?;
                    Ok(times)
                })??;
                let diff = difference(&got, &cuda.stream.clone_dtoh(&cout)?);
                push(kernel, n as f64 * (2.0 * t + 4.0), times, diff);
            }

            // stencils
            {
                let (nx, ny) = sizes.grid2;
                let m = nx as usize * ny as usize;
                let host = cases::values::<T>(m, 40, -1.0, 1.0);
                let (ci, mut cout) = (cuda.upload(&host)?, cuda.zeros::<T>(m)?);
                let f = cuda.function(&name("stencil2d"))?;
                let (nxi, nyi, warg) = (nx as i32, ny as i32, WeightsArg(w));
                let mut got = Vec::new();
                let times = offload::scope(|scope| {
                    let s = scope.stream(gpu)?;
                    let (di, dout) = (s.upload(&host)?, s.alloc_zeroed::<T>(m)?);
                    let times = measure(
                        &s,
                        cuda,
                        &mut || {
                            kernels::stencil2d::enqueue(&s, Launch::on(gpu), nx, ny, w, di, dout)
                        },
                        &mut || {
                            kernels::stencil2d::enqueue(&s, matched_1d(gpu, m), nx, ny, w, di, dout)
                        },
                        &mut |st| {
                            let mut b = st.launch_builder(&f);
                            b.arg(&nxi).arg(&nyi).arg(&warg).arg(&ci).arg(&mut cout);
                            // SAFETY: matches stencil2d_T; both grids hold nx * ny elements.
                            unsafe { b.launch(grid_1d(m)) }?;
                            Ok(())
                        },
                    );
                    fetch(&s, dout, &mut got)?;
                    Ok(times)
                })??;
                push(
                    "stencil2d",
                    2.0 * m as f64 * t,
                    times,
                    difference(&got, &cuda.stream.clone_dtoh(&cout)?),
                );
            }
            for seven in [true, false] {
                let (nx, ny, nz) = sizes.grid3;
                let m = nx as usize * ny as usize * nz as usize;
                let host = cases::values::<T>(m, 50, -1.0, 1.0);
                let (ci, mut cout) = (cuda.upload(&host)?, cuda.zeros::<T>(m)?);
                let kernel = if seven { "stencil7" } else { "stencil27" };
                let f = cuda.function(&name(kernel))?;
                let (nxi, nyi, nzi, warg) = (nx as i32, ny as i32, nz as i32, WeightsArg(w));
                let mut got = Vec::new();
                let times = offload::scope(|scope| {
                    let s = scope.stream(gpu)?;
                    let (di, dout) = (s.upload(&host)?, s.alloc_zeroed::<T>(m)?);
                    let run = |launch| {
                        if seven {
                            kernels::stencil7::enqueue(&s, launch, nx, ny, nz, w, di, dout)
                        } else {
                            kernels::stencil27::enqueue(&s, launch, nx, ny, nz, w, di, dout)
                        }
                    };
                    let times = measure(
                        &s,
                        cuda,
                        &mut || run(Launch::on(gpu)),
                        &mut || run(matched_1d(gpu, m)),
                        &mut |st| {
                            let mut b = st.launch_builder(&f);
                            b.arg(&nxi)
                                .arg(&nyi)
                                .arg(&nzi)
                                .arg(&warg)
                                .arg(&ci)
                                .arg(&mut cout);
                            // SAFETY: matches stencil7_T / stencil27_T; both grids hold m elements.
                            unsafe { b.launch(grid_1d(m)) }?;
                            Ok(())
                        },
                    );
                    fetch(&s, dout, &mut got)?;
                    Ok(times)
                })??;
                push(
                    kernel,
                    2.0 * m as f64 * t,
                    times,
                    difference(&got, &cuda.stream.clone_dtoh(&cout)?),
                );
            }

            // corners: cells from their 8 corner nodes
            {
                let (nx, ny, nz) = sizes.grid3;
                let cells = nx as usize * ny as usize * nz as usize;
                let nodes = (nx as usize + 1) * (ny as usize + 1) * (nz as usize + 1);
                let host = cases::values::<T>(nodes, 60, -1.0, 1.0);
                let (ci, mut cout) = (cuda.upload(&host)?, cuda.zeros::<T>(cells)?);
                let f = cuda.function(&name("corners"))?;
                let (nxi, nyi, nzi) = (nx as i32, ny as i32, nz as i32);
                let mut got = Vec::new();
                let times = offload::scope(|scope| {
                    let s = scope.stream(gpu)?;
                    let (di, dout) = (s.upload(&host)?, s.alloc_zeroed::<T>(cells)?);
                    let times = measure(
                        &s,
                        cuda,
                        &mut || {
                            kernels::corners::enqueue(&s, Launch::on(gpu), nx, ny, nz, di, dout)
                        },
                        &mut || {
                            kernels::corners::enqueue(
                                &s,
                                matched_1d(gpu, cells),
                                nx,
                                ny,
                                nz,
                                di,
                                dout,
                            )
                        },
                        &mut |st| {
                            let mut b = st.launch_builder(&f);
                            b.arg(&nxi).arg(&nyi).arg(&nzi).arg(&ci).arg(&mut cout);
                            // SAFETY: matches corners_T; node and cell grids as sized above.
                            unsafe { b.launch(grid_1d(cells)) }?;
                            Ok(())
                        },
                    );
                    fetch(&s, dout, &mut got)?;
                    Ok(times)
                })??;
                push(
                    "corners",
                    (nodes + cells) as f64 * t,
                    times,
                    difference(&got, &cuda.stream.clone_dtoh(&cout)?),
                );
            }

            // contract: one block of P×P×P threads per element
            {
                let points = sizes.elements * P * P * P;
                let dh = cases::values::<T>(P * P, 70, -1.0, 1.0);
                let uh = cases::values::<T>(points, 71, -1.0, 1.0);
                let (cd, cu, mut cw) = (
                    cuda.upload(&dh)?,
                    cuda.upload(&uh)?,
                    cuda.zeros::<T>(points)?,
                );
                let f = cuda.function(&name("contract"))?;
                let p = P as u32;
                let mut got = Vec::new();
                let times = offload::scope(|scope| {
                    let s = scope.stream(gpu)?;
                    let (dd, du, dw) =
                        (s.upload(&dh)?, s.upload(&uh)?, s.alloc_zeroed::<T>(points)?);
                    let block = Launch::on(gpu).block((p, p, p));
                    let times = measure(
                        &s,
                        cuda,
                        &mut || kernels::contract::enqueue(&s, block, dd, du, dw),
                        &mut || {
                            kernels::contract::enqueue(
                                &s,
                                block.grid(sizes.elements as u32),
                                dd,
                                du,
                                dw,
                            )
                        },
                        &mut |st| {
                            let mut b = st.launch_builder(&f);
                            b.arg(&cd).arg(&cu).arg(&mut cw);
                            let cfg = LaunchConfig {
                                grid_dim: (sizes.elements as u32, 1, 1),
                                block_dim: (p, p, p),
                                shared_mem_bytes: 0,
                            };
                            // SAFETY: matches contract_T; u and w hold elements × P³ values.
                            unsafe { b.launch(cfg) }?;
                            Ok(())
                        },
                    );
                    fetch(&s, dw, &mut got)?;
                    Ok(times)
                })??;
                push(
                    "contract",
                    2.0 * points as f64 * t,
                    times,
                    difference(&got, &cuda.stream.clone_dtoh(&cw)?),
                );
            }

            // assemble: shared-memory tiles of BLOCK nodes
            {
                let kh = cases::values::<T>(n - 1, 80, 0.5, 1.5);
                let uh = cases::values::<T>(n, 81, -1.0, 1.0);
                let (ck, cu, mut cr) = (cuda.upload(&kh)?, cuda.upload(&uh)?, cuda.zeros::<T>(n)?);
                let f = cuda.function(&name("assemble"))?;
                let ni = n as i32;
                let shared = (BLOCK + 1) * std::mem::size_of::<T>() as u32;
                let mut got = Vec::new();
                let times = offload::scope(|scope| {
                    let s = scope.stream(gpu)?;
                    let (dk, du, dr) = (s.upload(&kh)?, s.upload(&uh)?, s.alloc_zeroed::<T>(n)?);
                    let times = measure(
                        &s,
                        cuda,
                        &mut || {
                            kernels::assemble::enqueue(
                                &s,
                                Launch::on(gpu).dynamic_shared(shared),
                                dk,
                                du,
                                dr,
                            )
                        },
                        &mut || {
                            kernels::assemble::enqueue(
                                &s,
                                matched_1d(gpu, n).dynamic_shared(shared),
                                dk,
                                du,
                                dr,
                            )
                        },
                        &mut |st| {
                            let mut b = st.launch_builder(&f);
                            b.arg(&ck).arg(&cu).arg(&mut cr).arg(&ni);
                            let cfg = LaunchConfig {
                                shared_mem_bytes: shared,
                                ..grid_1d(n)
                            };
                            // SAFETY: matches assemble_T; k holds n - 1 values, u and r n.
                            unsafe { b.launch(cfg) }?;
                            Ok(())
                        },
                    );
                    fetch(&s, dr, &mut got)?;
                    Ok(times)
                })??;
                push(
                    "assemble",
                    3.0 * n as f64 * t,
                    times,
                    difference(&got, &cuda.stream.clone_dtoh(&cr)?),
                );
            }
            Ok(())
        }
    };
}

benchmarks!(run_f32, f32);
benchmarks!(run_f64, f64);

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let cubin = args.next().ok_or("usage: parity CUBIN [CSV]")?;
    let csv = args.next();
    let gpu = Device::gpu(0)?;
    let ctx = CudaContext::new(gpu.ordinal())?;
    let stream = ctx.new_stream()?;
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_file(&cubin))?;
    let cuda = Cuda {
        ctx,
        stream,
        module,
    };
    let sizes = Sizes::GPU;
    let mut rows = Vec::new();
    run_f32(&gpu, &cuda, sizes, &mut rows)?;
    run_f64(&gpu, &cuda, sizes, &mut rows)?;

    println!(
        "{}, medians of {REPS} launches timed with device events",
        gpu.name()
    );
    println!(
        "{:<11} {:>4} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>9}",
        "kernel", "type", "offload", "matched", "cuda", "off/cu", "mat/cu", "GB/s", "max diff"
    );
    let mut text = String::from("kernel,type,bytes,offload_ms,matched_ms,cuda_ms,max_rel_diff\n");
    let mut mismatches = 0;
    for r in &rows {
        println!(
            "{:<11} {:>4} {:>9.4} {:>9.4} {:>9.4} {:>8.3} {:>8.3} {:>8.0} {:>9.2e}",
            r.kernel,
            r.ty,
            r.offload,
            r.matched,
            r.cuda,
            r.offload / r.cuda,
            r.matched / r.cuda,
            r.bytes / (r.offload * 1e-3) / 1e9,
            r.diff
        );
        Ratio::print(
            "parity",
            &format!("{} {}", r.kernel, r.ty),
            "nvcc -O3 CUDA C",
            Measure::Time,
            r.offload / r.cuda,
            Goal::AtMost(1.0),
        );
        let _ = writeln!(
            text,
            "{},{},{},{},{},{},{}",
            r.kernel, r.ty, r.bytes, r.offload, r.matched, r.cuda, r.diff
        );
        let tolerance = if r.ty == "f32" { 1e-5 } else { 1e-12 };
        if r.diff.is_nan() || r.diff > tolerance {
            eprintln!(
                "MISMATCH: {} {} differs from CUDA C by {:e} (tolerance {tolerance:e})",
                r.kernel, r.ty, r.diff
            );
            mismatches += 1;
        }
    }
    finish(csv, &text, mismatches)
}
