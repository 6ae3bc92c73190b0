fn main() {
    // offload-examples' saxpy (kernels.rs includes its file), with panic reporting off.
    println!("cargo::rerun-if-changed=../src/kernels/demo_saxpy.rs");
    offload_build::Kernels::new("src/kernels.rs")
        .panic_reporting(false)
        .build();
}
