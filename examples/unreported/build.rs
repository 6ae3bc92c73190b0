fn main() {
    // offload-examples' saxpy, its very file, with panic reporting off.
    offload_build::Kernels::new("../src/kernels/demo_saxpy.rs")
        .panic_reporting(false)
        .build();
}
