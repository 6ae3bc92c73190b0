fn main() {
    // The very kernels of offload-examples, with panic reporting off.
    offload_build::Kernels::new("../src/kernels.rs")
        .panic_reporting(false)
        .build();
}
