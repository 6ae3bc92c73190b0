//! Warp operations against a CPU model of a warp (of the device's width), shared by the
//! host-backend and GPU suites.

use super::ints;
use offload::{BackendKind, Device, Dim3, Error, Launch};
use offload_examples::kernels::warps::{warp_operations, WarpResults};

/// `op` over the live lanes as `offload::warp_reduce` combines them: a butterfly for a full warp
/// of `warp` lanes (lane 0's result), else in increasing lane order.
fn reduce<T: Copy>(values: &[Option<T>], warp: usize, op: impl Fn(T, T) -> T) -> T {
    if values.len() == warp && values.iter().all(Option::is_some) {
        let mut lanes: Vec<T> = values.iter().map(|v| v.unwrap()).collect();
        let mut offset = warp / 2;
        while offset > 0 {
            lanes = (0..warp).map(|l| op(lanes[l], lanes[l ^ offset])).collect();
            offset /= 2;
        }
        lanes[0]
    } else {
        values.iter().flatten().copied().reduce(op).unwrap()
    }
}

/// The value lane `source` holds, when `source` is live; `own` when the shuffle keeps the
/// caller's value (`None` for a source that does not take part: unspecified).
fn shuffled<T: Copy>(values: &[Option<T>], source: Option<usize>, own: T) -> Option<T> {
    match source {
        None => Some(own),
        Some(j) => values.get(j).copied().flatten(),
    }
}

/// Each thread's results in `warp_operations`' terms, as the CPU model of its warp of `warp`
/// lanes says; `None` for a thread that returned. Shuffle fields that read a lane not taking
/// part are unspecified: the model leaves them as they came back (`got`).
fn model(
    values: &[i32],
    block: Dim3,
    live: u32,
    warp: usize,
    got: &[WarpResults],
) -> Vec<Option<WarpResults>> {
    let per_block = block.count() as usize;
    let mut expected = vec![None; values.len()];
    for block_start in (0..values.len()).step_by(per_block) {
        for warp_start in (0..per_block).step_by(warp) {
            let lanes = (per_block - warp_start).min(warp);
            let at = |l: usize| block_start + warp_start + l;
            let v: Vec<Option<i32>> = (0..lanes)
                .map(|l| (l < live as usize).then(|| values[at(l)]))
                .collect();
            let map = |f: &dyn Fn(i32) -> i64| -> Vec<Option<i64>> {
                v.iter().map(|x| x.map(f)).collect()
            };
            let wide = map(&|x| x as i64 * 1_000_000_007);
            let float: Vec<Option<f64>> = v.iter().map(|x| x.map(|x| x as f64 / 8.0)).collect();
            let live_bits = |p: &dyn Fn(i32) -> bool| {
                v.iter()
                    .enumerate()
                    .filter(|(_, x)| x.is_some_and(p))
                    .fold(0u64, |bits, (l, _)| bits | 1 << l)
            };
            let live_lanes = live_bits(&|_| true);
            for l in 0..lanes {
                let Some(own) = v[l] else { continue };
                let g = &got[at(l)];
                let up = l.checked_sub(3);
                let down = Some(l + 5).filter(|&j| j < warp);
                expected[at(l)] = Some(WarpResults {
                    indexed: shuffled(&v, Some((l * 7 + 3) % 32), own).unwrap_or(g.indexed),
                    up: shuffled(&v, up, own).unwrap_or(g.up),
                    down: shuffled(&v, down, own).unwrap_or(g.down),
                    xor: shuffled(&v, Some(l ^ 9), own).unwrap_or(g.xor),
                    wide: shuffled(&wide, Some(l + 1).filter(|&j| j < warp), wide[l].unwrap())
                        .unwrap_or(g.wide),
                    float: shuffled(&float, Some(l ^ 1), float[l].unwrap()).unwrap_or(g.float),
                    any: (live_bits(&|x| x > 90) != 0) as u32,
                    all: (live_bits(&|x| x > -90) == live_lanes) as u32,
                    ballot: live_bits(&|x| x % 2 == 0),
                    sum: reduce(&v, warp, i32::wrapping_add),
                    min: reduce(&v, warp, |a, b| if b < a { b } else { a }),
                    max: reduce(&v, warp, |a, b| if b > a { b } else { a }),
                    float_sum: reduce(
                        &v.iter()
                            .map(|x| x.map(|x| x as f32 * 0.1))
                            .collect::<Vec<_>>(),
                        warp,
                        |a, b| a + b,
                    ),
                    lane: l as u32,
                    warp: (warp_start / warp) as u32,
                });
            }
        }
    }
    expected
}

/// Lanes per warp on `device`, as a launch there sees it: the lane id of thread 63 of a block
/// of 64, plus one (32 on NVIDIA GPUs and by default on the host backend; 64 on CDNA AMD GPUs
/// and under `OFFLOAD_HOST_WARP_SIZE=64`).
/// Whether `device` refuses a warp kernel in blocks of `block`: the OpenCL plugin runs warps as
/// sub-groups of 32 along x, so there a block's x extent must be a multiple of 32.
fn refuses_warp_block(device: &Device, block: Dim3) -> bool {
    device.kind() == BackendKind::OpenCl && !block.x.is_multiple_of(32)
}

/// `result` is the refusal [`refuses_warp_block`] describes.
fn assert_refused<T: std::fmt::Debug>(result: offload::Result<T>, block: Dim3) {
    match result {
        Err(Error::InvalidLaunch { reason, .. }) => {
            assert!(reason.contains("must be a multiple of 32"), "{reason}")
        }
        other => panic!("a warp kernel in blocks of {block}: {other:?}"),
    }
}

pub fn warp_size(device: &Device) -> usize {
    let mut got = vec![WarpResults::default(); 64];
    warp_operations::launch(Launch::on(device).grid(1).block(64), 64, &[0; 64], &mut got).unwrap();
    got[63].lane as usize + 1
}

/// Shuffles, votes and reductions give what the CPU model of a warp gives, bit for bit: whole
/// warps, a partial last warp, 3D blocks, and warps some of whose lanes have returned; with
/// 32-lane and 64-lane warps alike.
pub fn warp_operations_match_a_cpu_model(device: &Device) {
    let cases: [(Dim3, Dim3, u32); 8] = [
        (Dim3::new(2, 1, 1), Dim3::new(64, 1, 1), 64),
        (Dim3::new(3, 1, 1), Dim3::new(48, 1, 1), 64),
        (Dim3::new(2, 1, 1), Dim3::new(8, 4, 2), 64),
        (Dim3::new(2, 1, 1), Dim3::new(96, 1, 1), 20),
        (Dim3::new(1, 1, 1), Dim3::new(40, 1, 1), 7),
        (Dim3::new(4, 2, 1), Dim3::new(1024, 1, 1), 64),
        (Dim3::new(2, 1, 1), Dim3::new(160, 1, 1), 50),
        (Dim3::new(1, 1, 1), Dim3::new(100, 1, 1), 33),
    ];
    for (grid, block, live) in cases {
        let threads = (grid.count() * block.count()) as usize;
        let values: Vec<i32> = ints(threads, u64::from(live) + threads as u64)
            .iter()
            .map(|v| (v % 100) as i32)
            .collect();
        warp_operations_match_the_model(device, grid, block, live, &values);
    }
}

/// One launch of `warp_operations` over `values` (one per thread of the launch), each thread's
/// results against the CPU model of its warp, bit for bit.
pub fn warp_operations_match_the_model(
    device: &Device,
    grid: Dim3,
    block: Dim3,
    live: u32,
    values: &[i32],
) {
    let mut got = vec![WarpResults::default(); values.len()];
    let result = warp_operations::launch(
        Launch::on(device).grid(grid).block(block),
        live,
        values,
        &mut got,
    );
    if refuses_warp_block(device, block) {
        return assert_refused(result, block);
    }
    result.unwrap();
    let expected = model(values, block, live, warp_size(device), &got);
    for (t, (g, e)) in got.iter().zip(&expected).enumerate() {
        let e = e.unwrap_or_default();
        assert_eq!(
            (g, g.float.to_bits(), g.float_sum.to_bits()),
            (&e, e.float.to_bits(), e.float_sum.to_bits()),
            "thread {t}, grid {grid} block {block}, {live} live lanes, on {}",
            device.name()
        );
    }
}
