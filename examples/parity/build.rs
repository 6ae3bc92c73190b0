fn main() {
    // nvcc contracts multiplies and adds into FMAs by default; so do these kernels, so that both
    // sides run the same arithmetic (the tests compare with the host backend within a tolerance).
    // The fast-math kernels (src/fast_math.rs, compared with nvcc -use_fast_math) are a module
    // of their own.
    offload_build::Kernels::new("src/kernels.rs")
        .module("src/fast_math.rs")
        .fma_contraction(true)
        .build();
}
