//! Device out-of-memory while mapping, in its own test binary: the check fills the GPU's memory,
//! which would make any test running beside it fail, or make it fail itself when a neighbour
//! takes the memory it freed on purpose.

mod common;

#[test]
fn out_of_memory_while_mapping_leaves_host_data() {
    if let Some(device) = common::gpu::gpu("out_of_memory_while_mapping_leaves_host_data") {
        common::mapping::out_of_memory_while_mapping_leaves_host_data(&device);
    }
}
