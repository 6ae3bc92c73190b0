//! Warp shuffles, votes and reductions against the CPU model of a warp (tests/common/warps.rs),
//! bit for bit on every backend: random 3D grids and blocks (partial last warps included), random
//! values, and a random number of lanes per warp that return before the warp operations.

use super::*;
use common::warps::warp_operations_match_the_model;
use offload::Error;
use offload_examples::kernels::warps::divergent_warp_sum;

proptest! {
    // 48 cases: warp operations in blocks of up to 1024 threads, and finding the deadlock, are
    // the slowest launches on the host backend (about 3 s for each test here).
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn warp_operations((grid, block) in grid_and_block(), live in 0u32..=65, seed in any::<u64>()) {
        let threads = (grid.count() * block.count()) as usize;
        // Small values, so that the votes' thresholds (±90) split the lanes, or any values (the
        // integer sums wrap).
        let values: Vec<i32> = common::ints(threads, seed)
            .iter()
            .map(|&v| if seed % 2 == 0 { (v % 100) as i32 } else { (v >> 32) as i32 })
            .collect();
        warp_operations_match_the_model(&Device::host(), grid, block, live, &values);
        if let Some(g) = gpu() {
            warp_operations_match_the_model(g, grid, block, live, &values);
        }
    }

    /// `divergent_warp_sum` breaks the warp contract on purpose, and only the host backend has a
    /// contract for it (a GPU may hang): whenever a warp has an odd lane beside lane 0, the launch
    /// fails naming the deadlock and the output is untouched; blocks of one thread have no
    /// divergence and write 1 everywhere (a warp sum over one lane).
    #[test]
    fn divergent_warp_sum_on_the_host((grid, block) in grid_and_block(), n in 0usize..3000) {
        let mut out = vec![7i32; n];
        let result = divergent_warp_sum::launch(Launch::on(&Device::host()).grid(grid).block(block), &mut out);
        if block.count() == 1 {
            prop_assert!(result.is_ok(), "{:?}", result);
            prop_assert!(out.iter().all(|&v| v == 1));
        } else {
            match result {
                Err(Error::KernelFailed { message, .. }) => prop_assert!(message.contains("deadlock"), "{}", message),
                other => prop_assert!(false, "expected KernelFailed, got {:?}", other),
            }
            prop_assert!(out.iter().all(|&v| v == 7), "the output is untouched");
        }
    }
}
