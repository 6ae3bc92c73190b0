//! Kernels of the block model: shared memory, the block barrier, a block reduction and a tiled
//! SGEMM. Their results depend on the launch shape only where documented (the reduction's
//! partial sums are per block).
use offload::prelude::*;

/// Four floats loaded and stored as one 16-byte access (`ld.v4.f32`).
#[derive(Clone, Copy, DeviceCopy)]
#[repr(C, align(16))]
pub struct F32x4(pub [f32; 4]);

/// Reverses every block-sized chunk of `x` into `out`, through a static shared array: each thread
/// stores one element, the block synchronises, and each thread reads the element another thread
/// stored. Blocks take chunks in a grid-stride loop; blocks of at most 1024 threads.
#[offload::kernel]
pub fn reverse_chunks(x: &[f32], out: &mut [f32]) {
    let chunk = offload::shared!([f32; 1024]);
    reverse_through(chunk, x, &mut out);
}

/// [`reverse_chunks`] through the launch's dynamic shared memory, which must hold one `f32` per
/// thread of the block.
#[offload::kernel]
pub fn reverse_chunks_dynamic(x: &[f32], out: &mut [f32]) {
    reverse_through(dynamic_shared::<f32>(), x, &mut out);
}

#[inline(always)]
fn reverse_through(chunk: SharedSlice<f32>, x: &[f32], out: &mut ThreadSlice<'_, f32>) {
    let n = block_dim().count() as usize;
    let t = thread_idx().linear_in(block_dim());
    let blocks = grid_dim().count() as usize;
    let mut start = block_idx().linear_in(grid_dim()) * n;
    while start < x.len() {
        let len = n.min(x.len() - start);
        if t < len {
            chunk.write_mine(x[start + t]);
        }
        sync_threads();
        if t < len {
            // SAFETY: element len-1-t was written before the barrier and nobody writes the chunk
            // until the barrier below. Element start+t of `out` belongs to this thread alone.
            unsafe { *out.at(start + t) = chunk.read(len - 1 - t) };
        }
        sync_threads();
        start += blocks * n;
    }
}

/// Threads with an even index in the block return at once; the others each store their index + 1
/// in shared memory, meet at the barrier, and write the value stored by the odd thread two slots
/// further (wrapping) into `out`, one element per thread of the launch. The barrier waits for the
/// threads that have not returned only, on a GPU (PTX `barrier.sync`) as on the host backend.
#[offload::kernel]
pub fn barrier_after_early_return(out: &mut [u32]) {
    let slots = offload::shared!([u32; 1024]);
    let n = block_dim().count() as usize;
    let t = thread_idx().linear_in(block_dim());
    if t & 1 == 0 {
        return;
    }
    slots.write_mine(t as u32 + 1);
    sync_threads();
    // The odd slot two further, wrapping over the odd slots below n.
    let odd = n / 2;
    let from = ((t / 2 + 1) % odd) * 2 + 1;
    let g = global_id();
    if g < out.len() {
        // SAFETY: slot `from` (odd) was written before the barrier and is not written again;
        // element g of `out` is this thread's alone.
        unsafe { *out.at(g) = slots.read(from) };
    }
}

/// Sums `x` into one partial sum per block: `partial[b]` is block `b`'s sum (`partial` holds one
/// element per block). Each thread adds its share of `x` (16-byte loads), the block combines its
/// threads' sums (`block_reduce`), and the block's first thread writes them: `#[tile(1)]` gives
/// block `b` element `b`. Sum the partials for the total, or let `#[reduce(sum)]` do all of it
/// (`reductions::sum_f32`). For a given launch shape and alignment of `x` the result is the same,
/// bit for bit, on every backend.
#[offload::kernel]
pub fn block_sum(x: &[f32], #[tile(1)] partial: &mut [f32]) {
    let mut mine = 0.0f32;
    for_each_mine_wide(x, |_, x| mine += x);
    let total = block_reduce::<offload::reduce::Sum, _>(mine);
    if let Some(mut tile) = partial.iter_mine().next() {
        for (_, partial) in tile.iter_mine() {
            *partial = total;
        }
    }
}

/// Sizes of an SGEMM `C = A · B` with row-major `A` (m × k), `B` (k × n) and `C` (m × n).
#[derive(Clone, Copy, Debug, DeviceCopy)]
#[repr(C)]
pub struct GemmDims {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

/// Rows and columns of `C` computed by one block of [`sgemm`].
pub const SGEMM_TILE: u32 = 128;
/// Depth of the `A` and `B` tiles staged in shared memory per step.
pub const SGEMM_DEPTH: u32 = 8;
/// Threads per block of [`sgemm`] (16 × 16, each computing 8 × 8 elements of `C`).
pub const SGEMM_THREADS: u32 = 256;

/// `C = A · B` in f32, tiled: each block of 256 threads computes a 128 × 128 tile of `C`, staging
/// 128 × 8 slices of `A` (transposed) and 8 × 128 slices of `B` in shared memory; each thread keeps
/// an 8 × 8 block of `C` in registers and reads its operands from shared memory as `ld.v4`. The
/// next slices are loaded into registers while the current ones are used. Launch with a grid of
/// (n / 128, m / 128) blocks of 256 threads; m and n must be multiples of 128 and k of 8 (any
/// other shape, or matrices not 16-byte aligned, panic). Multiply-adds are fused (`math::mul_add`), in the same order on every
/// backend.
#[offload::kernel]
pub fn sgemm(dims: GemmDims, a: &[f32], b: &[f32], c: &mut [f32]) {
    const TILE: usize = SGEMM_TILE as usize;
    const DEPTH: usize = SGEMM_DEPTH as usize;
    let (m, n, k) = (dims.m as usize, dims.n as usize, dims.k as usize);
    assert!(
        m % TILE == 0 && n % TILE == 0 && k % DEPTH == 0,
        "sgemm needs m and n multiples of 128 and k of 8"
    );
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    assert!(block_dim().x == SGEMM_THREADS && block_dim().count() == SGEMM_THREADS as u64);
    // As[d][row]: the A slice transposed, so that a thread's 8 rows are two 16-byte reads.
    let a_tile = offload::shared!([F32x4; DEPTH * TILE / 4]);
    // Bs[d][col].
    let b_tile = offload::shared!([F32x4; DEPTH * TILE / 4]);
    let t = thread_idx().x as usize;
    // Known to hold (256 threads in x); stated so that the compiler drops the index checks below.
    assert!(t < SGEMM_THREADS as usize);
    let (tx, ty) = (t % 16, t / 16);
    let (row0, col0) = (block_idx().y as usize * TILE, block_idx().x as usize * TILE);
    // SAFETY: F32x4 is four f32 with a stricter alignment; align_to only yields aligned chunks.
    let (a_head, a4, _) = unsafe { a.align_to::<F32x4>() };
    // SAFETY: as above.
    let (b_head, b4, _) = unsafe { b.align_to::<F32x4>() };
    assert!(
        a_head.is_empty() && b_head.is_empty(),
        "sgemm needs 16-byte aligned A and B"
    );
    // Which 16 bytes of the A and B slices this thread loads: A row `t / 2`, depth (t % 2) * 4;
    // B depth `t / 32`, columns (t % 32) * 4.
    let (a_row, a_d) = (t / 2, (t % 2) * 4);
    let (b_d, b_col) = (t / 32, (t % 32) * 4);
    let load = |d0: usize| {
        (
            a4[((row0 + a_row) * k + d0 + a_d) / 4].0,
            b4[((d0 + b_d) * n + col0 + b_col) / 4].0,
        )
    };
    let stage = |(av, bv): ([f32; 4], [f32; 4])| {
        let a_scalar = a_tile.as_ptr() as *mut f32;
        for (j, v) in av.iter().enumerate() {
            // SAFETY: element (a_d + j, a_row) of As is written by this thread only, between
            // barriers that keep every reader away.
            unsafe { a_scalar.add((a_d + j) * TILE + a_row).write(*v) };
        }
        let b_scalar = b_tile.as_ptr() as *mut f32;
        for (j, v) in bv.iter().enumerate() {
            // SAFETY: as above, for element (b_d, b_col + j) of Bs. (Stored element by element:
            // as one [f32; 4] the value took a detour through local memory.)
            unsafe { b_scalar.add(b_d * TILE + b_col + j).write(*v) };
        }
    };
    let mut acc = [[0.0f32; 8]; 8];
    stage(load(0));
    sync_threads();
    let mut d0 = 0;
    while d0 < k {
        // The next slices (the last ones again at the end, unused: no branch around the loads).
        let next = load((d0 + DEPTH).min(k - DEPTH));
        for d in 0..DEPTH {
            // SAFETY: the tiles were staged before the last barrier; nobody writes them until
            // the barrier below.
            let (a_lo, a_hi, b_lo, b_hi) = unsafe {
                (
                    a_tile.read((d * TILE + ty * 4) / 4).0,
                    a_tile.read((d * TILE + 64 + ty * 4) / 4).0,
                    b_tile.read((d * TILE + tx * 4) / 4).0,
                    b_tile.read((d * TILE + 64 + tx * 4) / 4).0,
                )
            };
            let av = [
                a_lo[0], a_lo[1], a_lo[2], a_lo[3], a_hi[0], a_hi[1], a_hi[2], a_hi[3],
            ];
            let bv = [
                b_lo[0], b_lo[1], b_lo[2], b_lo[3], b_hi[0], b_hi[1], b_hi[2], b_hi[3],
            ];
            for i in 0..8 {
                for j in 0..8 {
                    acc[i][j] = math::mul_add(av[i], bv[j], acc[i][j]);
                }
            }
        }
        sync_threads();
        if d0 + DEPTH < k {
            stage(next);
        }
        sync_threads();
        d0 += DEPTH;
    }
    // Thread (tx, ty) owns rows ty*4..+4 and 64+ty*4..+4 of the tile, and the same split of
    // columns: two 16-byte stores per row.
    let c_ptr = c.as_mut_ptr();
    assert!(c_ptr as usize & 15 == 0, "sgemm needs a 16-byte aligned C");
    for (i, r) in acc.iter().enumerate() {
        let row = row0
            + if i < 4 {
                ty * 4 + i
            } else {
                64 + ty * 4 + i - 4
            };
        let at = row * n + col0 + tx * 4;
        // SAFETY: these 8 elements of C belong to this thread alone (the tiles of the blocks, and
        // the 8 x 8 blocks of the threads, do not overlap); in bounds and 16-byte aligned by the
        // asserts above (n, col0 and tx * 4 are multiples of 4).
        unsafe {
            (c_ptr.add(at) as *mut F32x4).write(F32x4([r[0], r[1], r[2], r[3]]));
            (c_ptr.add(at + 64) as *mut F32x4).write(F32x4([r[4], r[5], r[6], r[7]]));
        }
    }
}
