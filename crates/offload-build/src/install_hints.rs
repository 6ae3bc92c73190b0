//! How to install each piece of the device toolchain: the build pass's warning and
//! `cargo offload doctor` name the same commands.

/// A rustc that builds `core` for nvptx64, with LLVM tools to match (without a rustc, neither is
/// there).
pub const DEVICE_RUSTC: &str = "apt-get install rustc-web rust-web-src llvm-22 (Debian), or \
                                rustup toolchain install nightly -c rust-src -c llvm-tools";

/// LLVM's `llvm-link`, `opt` and `llc` able to read the bitcode of a rustc built with LLVM
/// `llvm_major`.
pub fn llvm_tools(llvm_major: u32) -> String {
    format!(
        "apt-get install llvm-{llvm_major} (Debian/Ubuntu), or rustup component add llvm-tools, \
         or point OFFLOAD_LLVM_BIN at the tools of LLVM {llvm_major} or newer"
    )
}

/// `ptxas`, which checks the PTX and makes cubins.
pub const PTXAS: &str = "pip download nvidia-cuda-nvcc-cu12 and unpack its ptxas (what \
                         scripts/install-device-toolchain does), or install the CUDA toolkit, or \
                         set OFFLOAD_PTXAS";

/// `ld.lld`, which links AMD GPU code objects.
pub fn lld(llvm_major: u32) -> String {
    format!("apt-get install lld-{llvm_major}")
}

/// LLVM's liboffload runtime.
pub fn liboffload(llvm_major: u32) -> String {
    format!("apt-get install liboffload-{llvm_major}, or set OFFLOAD_LIBOFFLOAD to the library")
}

/// The CUDA driver (`libcuda.so.1`), needed to run on NVIDIA GPUs.
pub const CUDA_DRIVER: &str = "install NVIDIA's driver, which provides libcuda.so.1 (Debian: \
                               apt-get install nvidia-driver from non-free)";
