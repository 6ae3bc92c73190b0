//! Kernels exercising warp shuffles, votes and reductions.
use offload::prelude::*;

/// What one thread gets from each warp operation in `warp_operations`.
#[derive(Clone, Copy, Debug, Default, PartialEq, DeviceCopy)]
#[repr(C)]
pub struct WarpResults {
    /// `shuffle(v, (lane · 7 + 3) mod 32)`.
    pub indexed: i32,
    /// `shuffle_up(v, 3)`.
    pub up: i32,
    /// `shuffle_down(v, 5)`.
    pub down: i32,
    /// `shuffle_xor(v, 9)`.
    pub xor: i32,
    /// `shuffle_down(v · 1_000_000_007 as i64, 1)`: two 32-bit halves.
    pub wide: i64,
    /// `shuffle_xor(v as f64 / 8, 1)`.
    pub float: f64,
    /// `vote_any(v > 90)`, `vote_all(v > -90)`, `ballot(v even)`.
    pub any: u32,
    pub all: u32,
    /// One bit per lane (64-lane warps use the upper half).
    pub ballot: u64,
    /// `warp_sum(v)`, `warp_min(v)`, `warp_max(v)`, `warp_sum(v as f32 · 0.1)`.
    pub sum: i32,
    pub min: i32,
    pub max: i32,
    pub float_sum: f32,
    /// `lane_id()`, `warp_id()`.
    pub lane: u32,
    pub warp: u32,
}

/// Every warp operation on `values[global_id()]`, each thread's results at `out[global_id()]`.
/// Threads whose lane is `live_lanes` or more return first, so the rest of their warp works
/// without them. Launch exactly `values.len()` threads.
#[offload::kernel]
pub fn warp_operations(live_lanes: u32, values: &[i32], out: &mut [WarpResults]) {
    if lane_id() >= live_lanes {
        return;
    }
    let v = values[global_id()];
    let lane = lane_id();
    let results = WarpResults {
        indexed: shuffle(v, (lane * 7 + 3) % 32),
        up: shuffle_up(v, 3),
        down: shuffle_down(v, 5),
        xor: shuffle_xor(v, 9),
        wide: shuffle_down(v as i64 * 1_000_000_007, 1),
        float: shuffle_xor(v as f64 / 8.0, 1),
        any: vote_any(v > 90) as u32,
        all: vote_all(v > -90) as u32,
        ballot: ballot(v % 2 == 0),
        sum: warp_sum(v),
        min: warp_min(v),
        max: warp_max(v),
        float_sum: warp_sum(v as f32 * 0.1),
        lane,
        warp: warp_id(),
    };
    for (_, out) in out.iter_mine() {
        *out = results;
    }
}

/// Breaks the warp contract on purpose: even lanes sum over the warp while odd lanes wait at a
/// block barrier. A GPU may hang on it; the host backend fails the launch naming the deadlock.
/// Only the host-backend tests launch it.
#[offload::kernel]
pub fn divergent_warp_sum(out: &mut [i32]) {
    let v = if lane_id().is_multiple_of(2) {
        warp_sum(1)
    } else {
        sync_threads();
        0
    };
    for (_, out) in out.iter_mine() {
        *out = v;
    }
}
