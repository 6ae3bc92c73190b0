//! Launch shapes of the tensor-core GEMMs (`kernels::sgemm_tf32`, `kernels::gemm_bf16`,
//! `kernels::dgemm`, `kernels::gemm_wgmma`, with its tensor maps): block size, dynamic shared
//! memory (all four stages, or as many as the device gives a block: fewer on the host backend's
//! 48 KiB), and one block per output tile unless a grid is given.
use crate::kernels::dgemm::{dgemm_blocks, DGEMM_SHARED_BYTES, DGEMM_THREADS};
use crate::kernels::gemm_bf16::{gemm_bf16_blocks, GEMM_BF16_SHARED_BYTES, GEMM_BF16_THREADS};
use crate::kernels::gemm_wgmma::{
    gemm_wgmma_blocks, gemm_wgmma_layout, GEMM_WGMMA_SHARED_BYTES, GEMM_WGMMA_THREADS, WGMMA_BM,
    WGMMA_BN,
};
use crate::kernels::sgemm_tf32::{sgemm_tf32_blocks, SGEMM_TF32_SHARED_BYTES, SGEMM_TF32_THREADS};
use crate::kernels::tensor::MatDims;
use offload::tensor_copy::TensorMap;
use offload::{Device, Launch};

/// The launch of `sgemm_tf32x3` for `dims` on `device` (`blocks`: the grid, else one block per
/// tile).
pub fn sgemm_tf32x3(device: &Device, dims: MatDims, blocks: Option<u32>) -> Launch<'_> {
    Launch::on(device)
        .grid(blocks.unwrap_or(sgemm_tf32_blocks(dims)).max(1))
        .block(SGEMM_TF32_THREADS)
        .dynamic_shared(SGEMM_TF32_SHARED_BYTES.min(device.limits().max_shared_per_block))
}

/// The launch of `gemm_bf16` for `dims` on `device` (`blocks` as above).
pub fn gemm_bf16(device: &Device, dims: MatDims, blocks: Option<u32>) -> Launch<'_> {
    Launch::on(device)
        .grid(blocks.unwrap_or(gemm_bf16_blocks(dims)).max(1))
        .block(GEMM_BF16_THREADS)
        .dynamic_shared(GEMM_BF16_SHARED_BYTES.min(device.limits().max_shared_per_block))
}

/// The launch of `dgemm` for `dims` on `device` (`blocks` as above).
pub fn dgemm(device: &Device, dims: MatDims, blocks: Option<u32>) -> Launch<'_> {
    Launch::on(device)
        .grid(blocks.unwrap_or(dgemm_blocks(dims)).max(1))
        .block(DGEMM_THREADS)
        .dynamic_shared(DGEMM_SHARED_BYTES.min(device.limits().max_shared_per_block))
}

/// The launch of `gemm_bf16_wgmma` for `dims` on `device` (`blocks` as above).
pub fn gemm_bf16_wgmma(device: &Device, dims: MatDims, blocks: Option<u32>) -> Launch<'_> {
    Launch::on(device)
        .grid(blocks.unwrap_or(gemm_wgmma_blocks(dims)).max(1))
        .block(GEMM_WGMMA_THREADS)
        .dynamic_shared(GEMM_WGMMA_SHARED_BYTES)
}

/// The tensor maps `gemm_bf16_wgmma` reads A and W and writes out through, for `device` memory
/// at `a`, `w` and `out` (`device_ptr()`s of `dims.m × dims.k`, `dims.n × dims.k` and
/// `dims.m × dims.n` row-major `bf16`).
pub fn gemm_wgmma_maps(
    device: &Device,
    dims: MatDims,
    (a, w, out): (u64, u64, u64),
) -> offload::Result<[TensorMap; 3]> {
    Ok([
        device.tensor_map_2d(a, &gemm_wgmma_layout(dims.m, dims.k, WGMMA_BM))?,
        device.tensor_map_2d(w, &gemm_wgmma_layout(dims.n, dims.k, WGMMA_BN))?,
        device.tensor_map_2d(out, &gemm_wgmma_layout(dims.m, dims.n, WGMMA_BM))?,
    ])
}

/// Whether `device` runs the sm_90a kernels (`wgmma`, `tensor_copy`): this crate's images
/// include sm_90a and the device is a Hopper GPU (compute capability 9.0, the only one sm_90a
/// code runs on, told by its name).
pub fn runs_sm90a(device: &Device) -> bool {
    let built = crate::__OFFLOAD_IMAGES
        .images
        .iter()
        .any(|i| i.target == "sm_90a");
    built
        && ["H100", "H200", "H800", "H20"]
            .iter()
            .any(|h| device.name().contains(h))
}
