//! 2D tiled tensor maps for the CUDA plugin: `cuTensorMapEncodeTiled` over a layout the caller
//! checked (`TiledLayout::problem`). Elements are moved as raw bits (unsigned integers of their
//! size), so any element type of that size works, and the box's parts outside the matrix arrive
//! as zeros.

use cudarc::driver::sys::{
    self, CUtensorMapDataType as DataType, CUtensorMapFloatOOBfill as OobFill,
    CUtensorMapInterleave as Interleave, CUtensorMapL2promotion as L2Promotion,
    CUtensorMapSwizzle as Swizzle,
};
use cudarc::driver::DriverError;
use offload_kernel::tensor_copy::TiledLayout;

/// The driver's tensor map of `layout` at device address `address`, as 16 words.
pub(crate) fn encode_2d(address: u64, layout: &TiledLayout) -> Result<[u64; 16], DriverError> {
    let data_type = match layout.element_bytes {
        1 => DataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        2 => DataType::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        4 => DataType::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        _ => DataType::CU_TENSOR_MAP_DATA_TYPE_UINT64,
    };
    let swizzle = if layout.swizzle_128 {
        Swizzle::CU_TENSOR_MAP_SWIZZLE_128B
    } else {
        Swizzle::CU_TENSOR_MAP_SWIZZLE_NONE
    };
    let dims = [layout.cols, layout.rows];
    // The stride of every dimension but the innermost, in bytes.
    let strides = [layout.row_stride_bytes];
    let boxes = [layout.box_cols, layout.box_rows];
    let element_strides = [1u32, 1];
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    // SAFETY: every pointer is to a live local array of the rank's length (strides: rank - 1);
    // the driver only writes `map`. It reads no device memory: `address` is recorded.
    unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            data_type,
            2,
            address as *mut core::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            element_strides.as_ptr(),
            Interleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            L2Promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            OobFill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    }
    .result()?;
    Ok(map.opaque)
}
