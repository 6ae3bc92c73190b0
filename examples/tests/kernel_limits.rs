//! A block the device allows but the kernel cannot run with (it needs too many registers per
//! thread) is `Err(InvalidLaunch)` naming the kernel's own limit, not the driver's "too many
//! resources requested"; the output is untouched and the device stays usable. Through liboffload,
//! which does not report a kernel's limits, the error says so with liboffload's message.

mod common;

use offload::{BackendKind, Error, Launch};
use offload_examples::kernels;

#[test]
fn a_block_too_big_for_the_kernels_registers_is_an_invalid_launch() {
    let Some(gpu) = common::gpu::gpu("a_block_too_big_for_the_kernels_registers") else {
        return;
    };
    let x = common::floats(5000, 3);
    let (mut out32, mut out64) = (vec![7.0f32; 5000], vec![7.0f64; 5000]);
    // math_mix needs more than 64 registers per thread (ptxas: 68 for sm_90), so a full
    // 1024-thread block does not fit the multiprocessor's 64K registers.
    match kernels::math_mix::launch(Launch::on(&gpu).block(1024), &x, &mut out32, &mut out64) {
        Err(Error::InvalidLaunch {
            kernel: "math_mix",
            reason,
            ..
        }) if gpu.kind() == BackendKind::LibOffload => assert!(
            reason.starts_with(
                "1024 threads per block are more than this kernel can run with (liboffload: "
            ),
            "{reason}"
        ),
        Err(Error::InvalidLaunch {
            kernel: "math_mix",
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
    assert!(out32.iter().all(|&v| v == 7.0) && out64.iter().all(|&v| v == 7.0));
    kernels::math_mix::launch(Launch::on(&gpu).block(256), &x, &mut out32, &mut out64).unwrap();
    assert!(out32.iter().all(|&v| v != 7.0));
}
