include!("../kernels_build.rs");

fn main() {
    // The very kernels of offload-examples, with panic reporting off.
    example_kernels("../src/kernels.rs")
        .panic_reporting(false)
        .build();
}
