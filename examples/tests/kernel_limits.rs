//! A block the device allows but the kernel cannot run with (it needs too many registers per
//! thread) is `Err(InvalidLaunch)` naming the kernel's own limit, not the driver's "too many
//! resources requested"; the output is untouched and the device stays usable. Through liboffload,
//! which does not report a kernel's limits, the error says so with liboffload's message.

mod common;

use offload::{BackendKind, Error, Launch};
use offload_examples::kernels::block::{self, GemmDims, SGEMM_THREADS, SGEMM_TILE};

#[test]
fn a_block_too_big_for_the_kernels_registers_is_an_invalid_launch() {
    let Some(gpu) = common::gpu::gpu("a_block_too_big_for_the_kernels_registers") else {
        return;
    };
    // The block model's sgemm keeps a tile of C in registers: ptxas gives it 126 per thread for
    // sm_90, so a 1024-thread block (126K registers) does not fit the multiprocessor's 64K.
    // (A kernel near 64 registers would not do: code generation moves it across the line.)
    const SIZE: u32 = SGEMM_TILE;
    let n = (SIZE * SIZE) as usize;
    let (a, b) = (common::floats(n, 3), common::floats(n, 5));
    let mut c = vec![7.0f32; n];
    let dims = GemmDims {
        m: SIZE,
        n: SIZE,
        k: SIZE,
    };
    match block::sgemm::launch(Launch::on(&gpu).grid(1).block(1024), dims, &a, &b, &mut c) {
        Err(Error::InvalidLaunch {
            kernel: "sgemm",
            reason,
            ..
        }) if gpu.kind() == BackendKind::LibOffload => assert!(
            reason.starts_with(
                "1024 threads per block are more than this kernel can run with (liboffload: "
            ),
            "{reason}"
        ),
        Err(Error::InvalidLaunch {
            kernel: "sgemm",
            reason,
            ..
        }) => assert!(
            reason.starts_with("1024 threads per block exceeds the ")
                && reason.contains(" this kernel can run with (")
                && reason.ends_with(" registers per thread)"),
            "{reason}"
        ),
        other => panic!("expected InvalidLaunch naming the kernel's limit, got {other:?}"),
    }
    assert!(c.iter().all(|&v| v == 7.0));
    block::sgemm::launch(
        Launch::on(&gpu).grid(1).block(SGEMM_THREADS),
        dims,
        &a,
        &b,
        &mut c,
    )
    .unwrap();
    assert!(c.iter().all(|&v| v != 7.0));
}
