//! Device out-of-memory while mapping, in its own test binary: the check fills the GPU's memory,
//! which would make any test running beside it fail, or make it fail itself when a neighbour
//! takes the memory it freed on purpose.

mod common;

#[test]
fn out_of_memory_while_mapping_leaves_host_data() {
    if let Some(device) = common::gpu::gpu("out_of_memory_while_mapping_leaves_host_data") {
        // An OpenCL CPU runtime's device memory is the host's: filling it would fill the
        // machine's memory (the kernel's OOM killer ends the test, or a neighbour).
        if device.name().contains("(OpenCL CPU ") {
            eprintln!("SKIPPED: {} allocates host memory", device.name());
            return;
        }
        common::mapping::out_of_memory_while_mapping_leaves_host_data(&device);
    }
}
