//! The fast-math benchmarks in offload and in CUDA C on the same GPU, in the same process, on the
//! same bodies: `fast_math CUBIN [CSV]`, where CUBIN is `cuda/fast_math.cu` built by
//! `nvcc -O3 -use_fast_math` (`scripts/parity` does it on the GPU machine). Each kernel is timed
//! as in the `parity` binary (offload's default launch, offload with CUDA C's launch shape, CUDA
//! C; medians). Beside the times it prints each kernel's registers per thread, local memory
//! (stack) per thread and resident warps per SM at CUDA C's block size, for offload's cubin and
//! nvcc's, and how far both outputs are from an `f64` reference on a sample of bodies.

use cudarc::driver::{CudaFunction, CudaModule, LaunchConfig, PushKernelArg};
use offload::{Device, ImageFormat, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_parity::fast_math::{self, Accel, Body};
use offload_parity::timing::{
    difference, finish, measure, median, time_offload, Cuda, Res, REPS, WARMUP,
};
use std::fmt::Write as _;
use std::sync::Arc;

/// Bodies: 512 blocks of `BLOCK` threads, about four per SM of an H200.
const N: usize = 1 << 17;
const BLOCK: u32 = 256;
const SOFTENING2: f32 = 1e-4;
const KAPPA: f32 = 3.0;
/// Bodies whose outputs are compared with the `f64` reference.
const SAMPLE: usize = 256;

/// Bodies in the unit cube, masses in [0.5, 1.5) (the parity cases' generator).
fn bodies(n: usize) -> Vec<Body> {
    let v = offload_parity::cases::values::<f32>(4 * n, 90, 0.0, 1.0);
    v.chunks(4)
        .map(|c| Body {
            x: c[0],
            y: c[1],
            z: c[2],
            m: 0.5 + c[3],
        })
        .collect()
}

/// The `f64` reference of body `i`: its acceleration and pair energy.
fn reference(bodies: &[Body], i: usize) -> ([f64; 3], f64) {
    let p = bodies[i];
    let (mut a, mut e) = ([0.0f64; 3], 0.0f64);
    for q in bodies {
        let d = [(q.x - p.x) as f64, (q.y - p.y) as f64, (q.z - p.z) as f64];
        let d2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + SOFTENING2 as f64;
        let s = q.m as f64 / (d2 * d2.sqrt());
        for k in 0..3 {
            a[k] += d[k] * s;
        }
        let r = d2.sqrt();
        let phase = KAPPA as f64 * r;
        e += q.m as f64 * (phase.cos() + 0.5 * phase.sin()) / r;
    }
    (a, p.m as f64 * e)
}

/// Largest error of `got[i]` (sampled bodies) against `want`, over the largest |want|.
fn error_to_reference(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    got.iter()
        .zip(want)
        .fold(0.0f64, |m, (g, w)| m.max((g - w).abs()))
        / scale
}

/// Registers and local memory per thread, and resident warps per SM at `BLOCK` threads.
struct Footprint {
    registers: i32,
    local_bytes: i32,
    warps_per_sm: u32,
}

fn footprint(f: &CudaFunction) -> Res<Footprint> {
    let blocks = f.occupancy_max_active_blocks_per_multiprocessor(BLOCK, 0, None)?;
    Ok(Footprint {
        registers: f.num_regs()?,
        local_bytes: f.local_size_bytes()?,
        warps_per_sm: blocks * BLOCK / 32,
    })
}

/// offload's own sm_90 cubin, loaded through the driver to read its kernels' attributes.
fn offload_module(cuda: &Cuda) -> Res<Arc<CudaModule>> {
    let cubin = offload_parity::__OFFLOAD_IMAGES
        .images
        .iter()
        .find(|i| i.format == ImageFormat::Cubin && i.target == "sm_90")
        .ok_or("no sm_90 cubin among offload's images (was ptxas found at build time?)")?;
    Ok(cuda
        .ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(cubin.bytes.to_vec()))?)
}

struct Row {
    kernel: &'static str,
    offload: f64,
    matched: f64,
    cuda: f64,
    diff: f64,
    offload_error: f64,
    cuda_error: f64,
    offload_footprint: Footprint,
    cuda_footprint: Footprint,
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let cubin = args.next().ok_or("usage: fast_math CUBIN [CSV]")?;
    let csv = args.next();
    let gpu = Device::gpu(0)?;
    let ctx = cudarc::driver::CudaContext::new(gpu.ordinal())?;
    let stream = ctx.new_stream()?;
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_file(&cubin))?;
    let cuda = Cuda {
        ctx,
        stream,
        module,
    };
    let ours = offload_module(&cuda)?;

    let host = bodies(N);
    let flat: Vec<f32> = host.iter().flat_map(|b| [b.x, b.y, b.z, b.m]).collect();
    let sample: Vec<usize> = (0..SAMPLE).map(|k| k * (N / SAMPLE)).collect();
    let want: Vec<([f64; 3], f64)> = sample.iter().map(|&i| reference(&host, i)).collect();
    let want_accel: Vec<f64> = want.iter().flat_map(|(a, _)| *a).collect();
    let want_energy: Vec<f64> = want.iter().map(|(_, e)| *e).collect();
    let cb = cuda.upload(&flat)?;
    let ni = N as i32;
    let grid = LaunchConfig {
        grid_dim: ((N as u32).div_ceil(BLOCK), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    };
    let matched = || {
        Launch::on(&gpu)
            .grid((N as u32).div_ceil(BLOCK))
            .block(BLOCK)
    };
    let mut rows = Vec::new();

    // n-body forces
    {
        let f = cuda.function("nbody_forces")?;
        let mut ca = cuda.zeros::<f32>(4 * N)?;
        let mut got = Vec::new();
        let times = offload::scope(|scope| {
            let s = scope.stream(&gpu)?;
            let (db, da) = (s.upload(&host)?, s.alloc_zeroed::<Accel>(N)?);
            let times = measure(
                &s,
                &cuda,
                &mut || fast_math::nbody_forces::enqueue(&s, Launch::on(&gpu), SOFTENING2, db, da),
                &mut || fast_math::nbody_forces::enqueue(&s, matched(), SOFTENING2, db, da),
                &mut |st| {
                    let mut b = st.launch_builder(&f);
                    b.arg(&SOFTENING2).arg(&cb).arg(&mut ca).arg(&ni);
                    // SAFETY: matches nbody_forces: 4N floats of bodies, 4N of accelerations.
                    unsafe { b.launch(grid) }?;
                    Ok(())
                },
            );
            got.resize(N, Accel::default());
            s.download(da, &mut got)?;
            Ok(times)
        })??;
        let theirs = cuda.stream.clone_dtoh(&ca)?;
        let ours_flat: Vec<f32> = got.iter().flat_map(|a| [a.x, a.y, a.z, a.w]).collect();
        let pick = |v: &[f32]| -> Vec<f64> {
            sample
                .iter()
                .flat_map(|&i| (0..3).map(move |k| v[4 * i + k] as f64))
                .collect()
        };
        rows.push(Row {
            kernel: "nbody_forces",
            offload: times.0,
            matched: times.1,
            cuda: times.2,
            diff: difference(&ours_flat, &theirs),
            offload_error: error_to_reference(&pick(&ours_flat), &want_accel),
            cuda_error: error_to_reference(&pick(&theirs), &want_accel),
            offload_footprint: footprint(&ours.load_function("nbody_forces")?)?,
            cuda_footprint: footprint(&f)?,
        });
    }

    // pair energy
    {
        let f = cuda.function("pair_energy")?;
        let mut ce = cuda.zeros::<f32>(N)?;
        let mut got = Vec::new();
        let times = offload::scope(|scope| {
            let s = scope.stream(&gpu)?;
            let (db, de) = (s.upload(&host)?, s.alloc_zeroed::<f32>(N)?);
            let run =
                |launch| fast_math::pair_energy::enqueue(&s, launch, SOFTENING2, KAPPA, db, de);
            let times = measure(
                &s,
                &cuda,
                &mut || run(Launch::on(&gpu)),
                &mut || run(matched()),
                &mut |st| {
                    let mut b = st.launch_builder(&f);
                    b.arg(&SOFTENING2)
                        .arg(&KAPPA)
                        .arg(&cb)
                        .arg(&mut ce)
                        .arg(&ni);
                    // SAFETY: matches pair_energy: 4N floats of bodies, N energies.
                    unsafe { b.launch(grid) }?;
                    Ok(())
                },
            );
            got.resize(N, 0.0);
            s.download(de, &mut got)?;
            Ok(times)
        })??;
        let theirs = cuda.stream.clone_dtoh(&ce)?;
        let pick = |v: &[f32]| -> Vec<f64> { sample.iter().map(|&i| v[i] as f64).collect() };
        rows.push(Row {
            kernel: "pair_energy",
            offload: times.0,
            matched: times.1,
            cuda: times.2,
            diff: difference(&got, &theirs),
            offload_error: error_to_reference(&pick(&got), &want_energy),
            cuda_error: error_to_reference(&pick(&theirs), &want_energy),
            offload_footprint: footprint(&ours.load_function("pair_energy")?)?,
            cuda_footprint: footprint(&f)?,
        });
    }
    // The same energy with exact math (libm's sine and cosine, IEEE square root and division):
    // its time, registers, stack and occupancy beside the fast kernel's.
    let exact = footprint(&ours.load_function("pair_energy_exact")?)?;
    let exact_ms = offload::scope(|scope| {
        let s = scope.stream(&gpu)?;
        let (db, de) = (s.upload(&host)?, s.alloc_zeroed::<f32>(N)?);
        let mut launch =
            || fast_math::pair_energy_exact::enqueue(&s, matched(), SOFTENING2, KAPPA, db, de);
        let times: Res<Vec<f64>> = (0..WARMUP + REPS)
            .map(|_| time_offload(&s, &mut launch))
            .collect();
        Ok(times.map(|t| median(t[WARMUP..].to_vec())))
    })??;

    println!(
        "{}, {N} bodies, medians of {REPS} launches timed with device events",
        gpu.name()
    );
    println!(
        "{:<13} {:>9} {:>9} {:>9} {:>7} {:>7} {:>13} {:>13} {:>9} {:>9} {:>9}",
        "kernel",
        "offload",
        "matched",
        "cuda",
        "off/cu",
        "mat/cu",
        "regs off/cu",
        "warps/SM o/c",
        "err off",
        "err cu",
        "off-cu"
    );
    let mut text = String::from(
        "kernel,offload_ms,matched_ms,cuda_ms,offload_regs,cuda_regs,offload_local_bytes,\
         cuda_local_bytes,offload_warps_per_sm,cuda_warps_per_sm,offload_error,cuda_error,max_rel_diff\n",
    );
    let mut mismatches = 0;
    for r in &rows {
        let (o, c) = (&r.offload_footprint, &r.cuda_footprint);
        println!(
            "{:<13} {:>9.4} {:>9.4} {:>9.4} {:>7.3} {:>7.3} {:>6}/{:<6} {:>6}/{:<6} {:>9.2e} {:>9.2e} {:>9.2e}",
            r.kernel,
            r.offload,
            r.matched,
            r.cuda,
            r.offload / r.cuda,
            r.matched / r.cuda,
            o.registers,
            c.registers,
            o.warps_per_sm,
            c.warps_per_sm,
            r.offload_error,
            r.cuda_error,
            r.diff
        );
        if o.local_bytes + c.local_bytes > 0 {
            println!(
                "{:<13} local memory per thread: offload {} B, CUDA C {} B",
                "", o.local_bytes, c.local_bytes
            );
        }
        Ratio::print(
            "fast_math",
            r.kernel,
            "nvcc -O3 -use_fast_math CUDA C",
            Measure::Time,
            r.offload / r.cuda,
            Goal::AtMost(1.0),
        );
        let _ = writeln!(
            text,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.kernel,
            r.offload,
            r.matched,
            r.cuda,
            o.registers,
            c.registers,
            o.local_bytes,
            c.local_bytes,
            o.warps_per_sm,
            c.warps_per_sm,
            r.offload_error,
            r.cuda_error,
            r.diff
        );
        // Both sides use the same approximate instructions; what differs is the order of
        // roundings (FMA contraction): far below either side's error to the reference.
        if r.diff.is_nan() || r.diff > 1e-4 {
            eprintln!(
                "MISMATCH: {} differs from CUDA C by {:e} (tolerance 1e-4)",
                r.kernel, r.diff
            );
            mismatches += 1;
        }
    }
    println!(
        "pair_energy_exact (offload, no fast_math, CUDA C's launch shape): {exact_ms:.4} ms, {} \
         registers, {} B local memory, {} warps/SM",
        exact.registers, exact.local_bytes, exact.warps_per_sm
    );
    finish(csv, &text, mismatches)
}
