use crate::device::Device;
use crate::kernel::KernelArg;
use crate::{Error, Result};
use offload_kernel::Dim3;

/// Threads per block when the launch does not say.
pub const DEFAULT_BLOCK: u32 = 256;

/// Elements each thread handles in a default launch, once the grid fills the device. Measured on
/// an H200 (saxpy, 2^28 f32, blocks of 256): one element per thread reached 0.71x of a
/// device-to-device memcpy, eight 0.84x; more gained under 1 %.
pub const DEFAULT_ELEMENTS_PER_THREAD: u64 = 8;

/// How to launch a kernel: on which device, with which grid and block. Anything left unset is
/// chosen: the default device, blocks of 256 threads, and a grid sized from the longest
/// `&mut [T]` argument (else the longest `&[T]`): enough blocks to fill the device, and beyond
/// that one thread per `DEFAULT_ELEMENTS_PER_THREAD` (8) elements. Kernels reach their elements
/// through grid-stride views, so every shape gives the same results.
#[derive(Clone, Copy, Default)]
pub struct Launch<'d> {
    pub(crate) device: Option<&'d Device>,
    grid: Option<Dim3>,
    block: Option<Dim3>,
    dynamic_shared: u32,
}

/// A launch shape checked against a device's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub grid: Dim3,
    pub block: Dim3,
    /// Bytes of dynamic shared memory per block.
    pub dynamic_shared: u32,
}

/// What a device accepts as a launch shape.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_threads_per_block: u32,
    pub max_block: Dim3,
    pub max_grid: Dim3,
    /// Streaming multiprocessors (worker threads on the host).
    pub multiprocessors: u32,
    /// Threads resident on one multiprocessor at once.
    pub threads_per_multiprocessor: u32,
    /// Shared memory one block may use, static and dynamic together, in bytes (with the
    /// device's opt-in for large allocations).
    pub max_shared_per_block: u32,
}

impl<'d> Launch<'d> {
    /// Everything chosen automatically.
    pub fn auto() -> Self {
        Self::default()
    }

    /// On `device`, shape chosen automatically.
    pub fn on(device: &'d Device) -> Self {
        Launch {
            device: Some(device),
            ..Self::default()
        }
    }

    pub fn device(self, device: &'d Device) -> Self {
        Launch {
            device: Some(device),
            ..self
        }
    }

    /// Blocks in the grid (1D, 2D or 3D).
    pub fn grid(self, grid: impl Into<Dim3>) -> Self {
        Launch {
            grid: Some(grid.into()),
            ..self
        }
    }

    /// Threads per block (1D, 2D or 3D).
    pub fn block(self, block: impl Into<Dim3>) -> Self {
        Launch {
            block: Some(block.into()),
            ..self
        }
    }

    /// Bytes of dynamic shared memory per block, seen by the kernel as
    /// [`dynamic_shared`](offload_kernel::dynamic_shared) (0 by default). More than the device
    /// allows is an `Err` before launch.
    pub fn dynamic_shared(self, bytes: u32) -> Self {
        Launch {
            dynamic_shared: bytes,
            ..self
        }
    }

    /// Fill in the unset parts from the arguments and check the shape against the device.
    pub(crate) fn resolve(
        &self,
        kernel: &'static str,
        device: &Device,
        args: &[KernelArg<'_>],
    ) -> Result<Shape> {
        let invalid = |reason: String| Error::InvalidLaunch {
            kernel,
            device: device.name().to_string(),
            reason,
        };
        let block = self.block.unwrap_or(Dim3::new(DEFAULT_BLOCK, 1, 1));
        let grid = match self.grid {
            Some(grid) => grid,
            None => {
                let items = default_items(args) as u64;
                let blocks = default_blocks(items, block.count().max(1), &device.limits());
                let blocks = u32::try_from(blocks).map_err(|_| {
                    invalid(format!("{items} elements need {blocks} blocks: too many"))
                })?;
                Dim3::new(blocks, 1, 1)
            }
        };
        let shape = Shape {
            grid,
            block,
            dynamic_shared: self.dynamic_shared,
        };
        check_shape(shape, &device.limits()).map_err(invalid)?;
        Ok(shape)
    }
}

/// Blocks of a default grid for `items` elements: at least enough to fill the device (without
/// idle threads), else one thread per `DEFAULT_ELEMENTS_PER_THREAD` elements.
fn default_blocks(items: u64, per_block: u64, limits: &Limits) -> u64 {
    let one_per_thread = items.div_ceil(per_block);
    let resident = limits.multiprocessors as u64
        * (limits.threads_per_multiprocessor as u64 / per_block).max(1);
    let batched = items.div_ceil(per_block * DEFAULT_ELEMENTS_PER_THREAD);
    batched.max(one_per_thread.min(resident)).max(1)
}

/// The element count the default grid covers: the longest output (atomics are shared, not
/// outputs split among the threads), else the longest input.
fn default_items(args: &[KernelArg<'_>]) -> usize {
    let longest = |output: bool| {
        args.iter()
            .filter(|a| a.data.is_output() == output)
            .filter_map(|a| a.data.slice_len())
            .max()
    };
    longest(true).or_else(|| longest(false)).unwrap_or(1)
}

fn check_shape(shape: Shape, limits: &Limits) -> std::result::Result<(), String> {
    let Shape {
        grid,
        block,
        dynamic_shared,
    } = shape;
    for (what, dims, max) in [
        ("grid", grid, limits.max_grid),
        ("block", block, limits.max_block),
    ] {
        for (axis, n, m) in [
            ("x", dims.x, max.x),
            ("y", dims.y, max.y),
            ("z", dims.z, max.z),
        ] {
            if n == 0 {
                return Err(format!("{what}.{axis} is 0"));
            }
            if n > m {
                return Err(format!("{what}.{axis} = {n} exceeds the device limit {m}"));
            }
        }
    }
    if block.count() > limits.max_threads_per_block as u64 {
        return Err(format!(
            "{} threads per block exceeds the device limit {}",
            block.count(),
            limits.max_threads_per_block
        ));
    }
    if dynamic_shared > limits.max_shared_per_block {
        return Err(format!(
            "{dynamic_shared} bytes of dynamic shared memory exceed the device limit of {} bytes per block",
            limits.max_shared_per_block
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUDA_LIKE: Limits = Limits {
        max_threads_per_block: 1024,
        max_block: Dim3::new(1024, 1024, 64),
        max_grid: Dim3::new(i32::MAX as u32, 65535, 65535),
        multiprocessors: 132,
        threads_per_multiprocessor: 2048,
        max_shared_per_block: 232448,
    };

    #[test]
    fn rejects_zero_and_oversized_shapes_naming_the_limit() {
        let ok = Shape {
            grid: Dim3::new(10, 1, 1),
            block: Dim3::new(256, 1, 1),
            dynamic_shared: 4096,
        };
        assert!(check_shape(ok, &CUDA_LIKE).is_ok());
        let zero = Shape {
            grid: Dim3::new(0, 1, 1),
            ..ok
        };
        assert_eq!(check_shape(zero, &CUDA_LIKE).unwrap_err(), "grid.x is 0");
        let wide = Shape {
            block: Dim3::new(2048, 1, 1),
            ..ok
        };
        assert_eq!(
            check_shape(wide, &CUDA_LIKE).unwrap_err(),
            "block.x = 2048 exceeds the device limit 1024"
        );
        let fat = Shape {
            block: Dim3::new(64, 32, 1),
            ..ok
        };
        assert_eq!(
            check_shape(fat, &CUDA_LIKE).unwrap_err(),
            "2048 threads per block exceeds the device limit 1024"
        );
        let greedy = Shape {
            dynamic_shared: 232449,
            ..ok
        };
        assert_eq!(
            check_shape(greedy, &CUDA_LIKE).unwrap_err(),
            "232449 bytes of dynamic shared memory exceed the device limit of 232448 bytes per block"
        );
    }

    #[test]
    fn default_grid_fills_the_device_then_batches_elements() {
        // Small: one thread per element (no idle threads).
        assert_eq!(default_blocks(1000, 256, &CUDA_LIKE), 4);
        assert_eq!(default_blocks(0, 256, &CUDA_LIKE), 1);
        // Medium: the device is filled (132 SMs x 8 blocks) before elements are batched.
        assert_eq!(default_blocks(1 << 20, 256, &CUDA_LIKE), 1056);
        // Large: eight elements per thread.
        assert_eq!(default_blocks(1 << 28, 256, &CUDA_LIKE), (1 << 28) / 2048);
    }

    #[test]
    fn default_grid_covers_the_longest_output() {
        let x = [0f32; 1000];
        let mut y = [0f32; 300];
        let args = [KernelArg::slice(&x), KernelArg::slice_mut(&mut y)];
        assert_eq!(default_items(&args), 300);
        let args = [KernelArg::slice(&x)];
        assert_eq!(default_items(&args), 1000);
        let a = 1.0f32;
        assert_eq!(default_items(&[KernelArg::value(&a)]), 1);
        let mut bins = [0u32; 2000];
        let args = [KernelArg::slice(&x), KernelArg::atomics(&mut bins)];
        assert_eq!(default_items(&args), 2000, "atomics count as inputs");
        let args = [KernelArg::atomics(&mut bins), KernelArg::slice_mut(&mut y)];
        assert_eq!(default_items(&args), 300);
    }
}
