//! One computation as two kernels, with and without `max_registers`: it keeps many values live
//! at once, so that the device's register count shows the cap (tests/amdgpu_images.rs reads it
//! from the AMD code objects).

/// Values per output: each takes part in two product chains that run in opposite orders, so all
/// of them stay live until both are done (without fast math LLVM keeps the order of the chains).
pub const SPAN: usize = 64;

/// `out[i]` from `x[i * SPAN..(i + 1) * SPAN]`: the forward chain `(..((1 * v0 + 1) * v1 + 1)..)`
/// plus the same chain over the values in reverse.
#[offload::kernel]
pub fn opposite_chains(x: &[f32], out: &mut [f32]) {
    for (i, o) in out.iter_mine() {
        *o = chains(&x[i * SPAN..(i + 1) * SPAN]);
    }
}

/// [`opposite_chains`] within 32 registers per thread (an AMD lane's 32 VGPRs): the values that
/// do not fit are spilled.
#[offload::kernel(max_registers = 32)]
pub fn opposite_chains_capped(x: &[f32], out: &mut [f32]) {
    for (i, o) in out.iter_mine() {
        *o = chains(&x[i * SPAN..(i + 1) * SPAN]);
    }
}

#[inline(always)]
fn chains(window: &[f32]) -> f32 {
    let v: [f32; SPAN] = core::array::from_fn(|k| window[k]);
    let forward = v.iter().fold(1.0, |acc, &x| acc * x + 1.0);
    let backward = v.iter().rev().fold(1.0, |acc, &x| acc * x + 1.0);
    forward + backward
}
