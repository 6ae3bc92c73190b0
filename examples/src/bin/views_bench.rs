//! What the safe views cost, on the default device: `reverse_tiles` (per-block tiles and
//! `shared_atomic!`, no `unsafe`) against `reverse_chunks` (plain `shared!` memory, `unsafe`
//! reads and writes) over the same data with the same launch, and `reverse_tiles_plain_shared`
//! (tiles, plain shared memory) to tell the two costs apart; all checked against the CPU, and a
//! device-to-device memcpy of the same bytes measured in the same run.
//!
//! Times are the kernel's alone (events around it, `kernel_timing`), the best of several launches.

use offload::{Device, Launch};
use offload_bench_report::{Goal, Measure, Ratio};
use offload_examples::kernel_timing::best_kernel_time;
use offload_examples::kernels::{block, views};
use offload_examples::{reference, reference_bandwidth};
use std::time::Duration;

const REPEATS: usize = 7;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device: Device = offload::default_device()?;
    println!("device: {}", device.name());
    let n = if device.is_gpu() {
        1usize << 26
    } else {
        1 << 20
    };
    let block = 256u32;
    let limits = device.limits();
    let blocks = limits.multiprocessors * (limits.threads_per_multiprocessor / block).max(1);
    let x: Vec<f32> = (0..n).map(|i| (i % 4099) as f32).collect();
    let mut want = vec![0.0f32; n];
    reference::reverse_chunks(block as usize, &x, &mut want);
    let shape = || Launch::on(&device).grid(blocks).block(block);

    let mut out = vec![0.0f32; n];
    let plain = best_kernel_time(REPEATS, || {
        block::reverse_chunks::launch(shape(), &x, &mut out)
    })?;
    let plain_ok = out == want;
    let mut out = vec![0.0f32; n];
    let safe = best_kernel_time(REPEATS, || {
        views::reverse_tiles::launch(shape(), block, &x, &mut out)
    })?;
    let safe_ok = out == want;
    let mut out = vec![0.0f32; n];
    let tiles_plain = best_kernel_time(REPEATS, || {
        views::reverse_tiles_plain_shared::launch(shape(), block, &x, &mut out)
    })?;
    let tiles_plain_ok = out == want;

    let gbps = |t: Duration| (2 * n * 4) as f64 / t.as_secs_f64() / 1e9;
    let check = |ok: bool| if ok { "ok" } else { "MISMATCH" };
    println!(
        "reverse {n} f32 in chunks of {block} ({blocks} blocks of {block}), read + write:\n  \
         reverse_chunks (shared!, unsafe):            {:.3} ms, {:.0} GB/s, {}\n  \
         reverse_tiles (#[tile], shared_atomic!, safe): {:.3} ms, {:.0} GB/s, {}\n  \
         reverse_tiles_plain_shared (#[tile], shared!): {:.3} ms, {:.0} GB/s, {}\n  \
         safe / unsafe = {:.3} (tiles alone: {:.3}, atomics alone: {:.3})",
        plain.as_secs_f64() * 1e3,
        gbps(plain),
        check(plain_ok),
        safe.as_secs_f64() * 1e3,
        gbps(safe),
        check(safe_ok),
        tiles_plain.as_secs_f64() * 1e3,
        gbps(tiles_plain),
        check(tiles_plain_ok),
        gbps(safe) / gbps(plain),
        gbps(tiles_plain) / gbps(plain),
        gbps(safe) / gbps(tiles_plain)
    );
    if let Some(memcpy) = reference_bandwidth::device_to_device(&device, n * 4)? {
        println!(
            "device-to-device memcpy of the same bytes: {memcpy:.0} GB/s; unsafe / memcpy = {:.2}, \
             safe / memcpy = {:.2}",
            gbps(plain) / memcpy,
            gbps(safe) / memcpy
        );
        for (what, time) in [
            ("reverse_chunks (unsafe)", plain),
            ("reverse_tiles (safe)", safe),
        ] {
            Ratio::print(
                "views_bench",
                what,
                "device-to-device memcpy",
                Measure::Speed,
                gbps(time) / memcpy,
                Goal::None,
            );
        }
    }
    if !(plain_ok && safe_ok && tiles_plain_ok) {
        return Err("a reversal does not match the CPU".into());
    }
    Ok(())
}
