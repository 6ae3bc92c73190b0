//! Kernels of the block model (shared memory, barriers, a block reduction, the tiled SGEMM): any
//! grid, any 3D block of at most 1024 threads (the static shared arrays hold 1024 elements), except
//! for SGEMM, whose shape its contract fixes. Fewer cases than the element-wise kernels: blocks
//! that meet barriers cost the host backend more per thread.

use super::*;
use offload::Error;
use offload_examples::kernels::block::{self, GemmDims, SGEMM_DEPTH, SGEMM_THREADS, SGEMM_TILE};
use offload_examples::reference;

/// Random data that reaches every block and leaves some blocks with nothing to do.
fn data_for_blocks() -> impl Strategy<Value = ((Dim3, Dim3), Vec<f32>)> {
    grid_and_block().prop_flat_map(|(grid, block)| {
        let threads = (grid.count() * block.count()) as usize;
        (
            Just((grid, block)),
            proptest::collection::vec(any_f32(), 0..2 * threads + 3),
        )
    })
}

proptest! {
    // 128 cases rather than the default 256: launches of up to 1024-thread blocks that meet
    // barriers cost the host backend more than element-wise ones.
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Each block-sized chunk reversed through a static shared array; values only move, so
    /// every bit (NaN payloads included) is kept.
    #[test]
    fn reverse_chunks(((grid, block), x) in data_for_blocks()) {
        let mut expected = vec![f32::NAN; x.len()];
        reference::reverse_chunks(block.count() as usize, &x, &mut expected);
        let run = |device: &Device| {
            let mut out = vec![f32::NAN; x.len()];
            block::reverse_chunks::launch(Launch::on(device).grid(grid).block(block), &x, &mut out).unwrap();
            bits_of(&out)
        };
        prop_assert_eq!(run(&Device::host()), bits_of(&expected), "host backend vs CPU");
        if let Some(g) = gpu() {
            prop_assert_eq!(run(g), bits_of(&expected), "GPU vs CPU");
        }
    }

    /// The same through dynamic shared memory: one f32 per thread, or more.
    #[test]
    fn reverse_chunks_dynamic(((grid, block), x) in data_for_blocks(), extra in 0u32..64) {
        let mut expected = vec![f32::NAN; x.len()];
        reference::reverse_chunks(block.count() as usize, &x, &mut expected);
        let bytes = 4 * block.count() as u32 + extra;
        let run = |device: &Device| {
            let mut out = vec![f32::NAN; x.len()];
            let launch = Launch::on(device).grid(grid).block(block).dynamic_shared(bytes);
            block::reverse_chunks_dynamic::launch(launch, &x, &mut out).unwrap();
            bits_of(&out)
        };
        prop_assert_eq!(run(&Device::host()), bits_of(&expected), "host backend vs CPU");
        if let Some(g) = gpu() {
            prop_assert_eq!(run(g), bits_of(&expected), "GPU vs CPU");
        }
    }

    /// Even threads return before the barrier; each odd thread gets what the odd thread two
    /// slots further stored; elements of even threads, and beyond the launch's threads, are
    /// untouched.
    #[test]
    fn barrier_after_early_return((grid, block) in grid_and_block(), extra in 0usize..100, short in any::<bool>()) {
        let (per_block, threads) = (block.count() as usize, (grid.count() * block.count()) as usize);
        // Longer than the launch, or shorter (then the threads past the end write nothing).
        let n = if short { threads.saturating_sub(extra) } else { threads + extra };
        let expected: Vec<u32> = (0..n)
            .map(|g| {
                let t = g % per_block;
                if g >= threads || t & 1 == 0 {
                    u32::MAX
                } else {
                    (((t / 2 + 1) % (per_block / 2)) * 2 + 2) as u32
                }
            })
            .collect();
        let run = |device: &Device| {
            let mut out = vec![u32::MAX; n];
            block::barrier_after_early_return::launch(Launch::on(device).grid(grid).block(block), &mut out).unwrap();
            out
        };
        prop_assert_eq!(run(&Device::host()), expected.clone(), "host backend vs CPU");
        if let Some(g) = gpu() {
            prop_assert_eq!(run(g), expected, "GPU vs CPU");
        }
    }

    /// Each block's partial sum is the sum of the elements its threads own (by the kernel's
    /// documented split: unaligned head and tail elements to the first threads, 16-byte chunks
    /// grid-stride), within the rounding bound of that many additions; blocks that own nothing
    /// give +0. `x` starts at a random offset into its allocation, so the head is exercised; the
    /// GPU copy of `x` is 16-byte aligned, so the GPU equals the host backend bit for bit when
    /// the host's `x` is aligned too (the contract), and is checked against the model otherwise.
    #[test]
    fn block_sum((grid, block) in grid_and_block(), offset in 0usize..4,
                 values in proptest::collection::vec(finite_f32(), 0..5000)) {
        let x = &values[offset.min(values.len())..];
        let blocks = grid.count() as usize;
        let run = |device: &Device| {
            let mut partial = vec![f32::NAN; blocks];
            block::block_sum::launch(Launch::on(device).grid(grid).block(block), x, &mut partial).unwrap();
            partial
        };
        let host = run(&Device::host());
        // SAFETY: F32x4 is four f32 with a stricter alignment; only the split's lengths are used.
        let (head, body, _) = unsafe { x.align_to::<block::F32x4>() };
        check_block_sums(x, head.len(), body.len(), block.count() as usize, &host)?;
        if let Some(g) = gpu() {
            let on_gpu = run(g);
            if head.is_empty() {
                prop_assert_eq!(bits_of(&on_gpu), bits_of(&host), "GPU vs host backend");
            } else {
                check_block_sums(x, 0, x.len() / 4, block.count() as usize, &on_gpu)?;
            }
        }
    }
}

/// `partial` against the per-block sums of `x` split as `block_sum` (`for_each_mine_wide`) splits
/// it: `head` elements, `chunks` 16-byte chunks in tiles of `max(4B, 1024)` chunks (tile `j` to
/// block `j mod G`), then the tail; the head and tail elements, numbered one after the other,
/// grid-stride over the threads.
fn check_block_sums(
    x: &[f32],
    head: usize,
    chunks: usize,
    per_block: usize,
    partial: &[f32],
) -> Result<(), TestCaseError> {
    let blocks = partial.len();
    let tile = (4 * per_block).max(1024);
    let owner_block = |e: usize| {
        if e >= head && e < head + 4 * chunks {
            (e - head) / 4 / tile % blocks
        } else {
            let j = if e < head { e } else { e - 4 * chunks };
            j % (per_block * blocks) / per_block
        }
    };
    let mut exact = vec![0.0f64; partial.len()];
    let mut magnitude = vec![0.0f64; partial.len()];
    let mut terms = vec![0usize; partial.len()];
    for (e, &v) in x.iter().enumerate() {
        let b = owner_block(e);
        exact[b] += v as f64;
        magnitude[b] += v.abs() as f64;
        terms[b] += 1;
    }
    for (b, &got) in partial.iter().enumerate() {
        if terms[b] == 0 {
            prop_assert_eq!(got.to_bits(), 0.0f32.to_bits(), "block {} owns nothing", b);
        } else {
            // Each value passes through the thread's sum and the block's tree: a few more
            // additions than it has terms.
            let additions = terms[b] + 2 * per_block.ilog2() as usize + 8;
            prop_assert!(
                within_summation_bound(got as f64, exact[b], additions, magnitude[b]),
                "block {}: {} vs exact {} ({} terms)",
                b,
                got,
                exact[b],
                terms[b]
            );
        }
    }
    Ok(())
}

proptest! {
    // Each case multiplies up to 256 × 256 × 64 on the host backend and checks every element
    // against an f64 product: 32 cases.
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Any shape the contract allows (m, n multiples of 128, k of 8): each element within the
    /// rounding bound of k fused multiply-adds of the exact (f64) product, and the GPU equal to
    /// the host backend bit for bit (the same fused operations in the same order).
    #[test]
    fn sgemm(m in 1u32..3, n in 1u32..3, k in 1u32..9, seed in any::<u64>(), scale in prop_oneof![Just(1.0f32), Just(1.0e-20), Just(1.0e15)]) {
        let (m, n, k) = (m * SGEMM_TILE, n * SGEMM_TILE, k * SGEMM_DEPTH);
        let (a, b): (Vec<f32>, Vec<f32>) = (
            common::floats((m * k) as usize, seed).iter().map(|v| v * scale).collect(),
            common::floats((k * n) as usize, seed ^ 1).iter().map(|v| v * scale).collect(),
        );
        let run = |device: &Device| -> Result<Vec<f32>, Error> {
            let mut c = vec![f32::NAN; (m * n) as usize];
            let launch = Launch::on(device).grid((n / SGEMM_TILE, m / SGEMM_TILE)).block(SGEMM_THREADS);
            block::sgemm::launch(launch, GemmDims { m, n, k }, &a, &b, &mut c)?;
            Ok(c)
        };
        let host = run(&Device::host()).unwrap();
        let mut exact = vec![0.0f32; host.len()];
        reference::sgemm(m as usize, n as usize, k as usize, &a, &b, &mut exact);
        let (m, n, k) = (m as usize, n as usize, k as usize);
        for i in 0..m {
            for j in 0..n {
                let magnitude: f64 = (0..k).map(|d| (a[i * k + d] as f64 * b[d * n + j] as f64).abs()).sum();
                // The reference rounds its f64 sum to f32 once more.
                let got = host[i * n + j] as f64;
                prop_assert!(
                    within_summation_bound(got, exact[i * n + j] as f64, k + 1, magnitude),
                    "C[{}][{}] = {} vs {} ({}x{}x{})", i, j, got, exact[i * n + j], m, n, k
                );
            }
        }
        if let Some(g) = gpu() {
            prop_assert_eq!(bits_of(&run(g).unwrap()), bits_of(&host), "GPU vs host backend");
        }
    }
}
