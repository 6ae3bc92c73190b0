//! Tensor maps for kernels' bulk tensor copies (`offload_kernel::tensor_copy`), made on the host
//! for one device: the driver encodes them on a CUDA device, the host backend describes the same
//! layout in its own words.

use crate::plugins::DevicePtr;
use crate::{Device, Error, Result};
use offload_kernel::tensor_copy::{TensorMap, TiledLayout};

impl Device {
    /// A 2D tensor map of `layout` over this device's memory at `address` (a mapping's or a
    /// `DeviceVec`'s `device_ptr()`), for a kernel's `copy_box_2d` on this device. The map holds
    /// the address: the memory must stay allocated while kernels use the map.
    ///
    /// # Errors
    /// `InvalidArgument` when the layout breaks a rule of the copy engine (`TiledLayout::problem`)
    /// or `address` is not 16-byte aligned; `NoImage` when the device has no bulk tensor copies
    /// (OpenCL, AMD and liboffload devices); `Driver` when the driver refuses it.
    pub fn tensor_map_2d(&self, address: u64, layout: &TiledLayout) -> Result<TensorMap> {
        let problem = layout
            .problem()
            .or((address % 16 != 0).then_some("the address must be 16-byte aligned"));
        if let Some(reason) = problem {
            return Err(Error::InvalidArgument {
                kernel: "Device::tensor_map_2d",
                argument: "layout",
                reason: reason.to_string(),
            });
        }
        if self.memory_is_host() {
            return Ok(TensorMap::for_host(address, layout));
        }
        match self
            .backend()
            .encode_tensor_map_2d(DevicePtr(address), layout)?
        {
            Some(words) => Ok(TensorMap::from_words(words)),
            None => Err(Error::NoImage {
                kernel: "Device::tensor_map_2d",
                device: self.name().to_string(),
                reason: "this device's plugin has no bulk tensor copies (CUDA devices of sm_90 \
                         and newer have)"
                    .to_string(),
            }),
        }
    }
}
