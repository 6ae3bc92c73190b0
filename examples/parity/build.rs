fn main() {
    // nvcc contracts multiplies and adds into FMAs by default; so do these kernels, so that both
    // sides run the same arithmetic (the tests compare with the host backend within a tolerance).
    offload_build::Kernels::new("src/kernels.rs")
        .fma_contraction(true)
        .build();
}
