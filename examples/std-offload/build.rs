//! Each program defines its kernels in its own file, compiled for the device as std::offload
//! compiles the whole program: one device image set for the three.
fn main() {
    offload_build::Kernels::new("src/bin/std_offload_fill.rs")
        .module("src/bin/std_offload_scale.rs")
        .module("src/bin/std_offload_dot.rs")
        .build();
}
