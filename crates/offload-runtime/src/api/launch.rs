//! The launch API: how to launch a kernel ([`Launch`]: device, grid, block, shared memory), the
//! shape chosen and checked against the device and the kernel's entry, and [`launch`], what the
//! generated launchers call. One path for every device: the plugin behind it decides where the
//! data goes and how the kernel runs.

use crate::api::prepared;
use crate::mapping::device::{resolve_device, Device};
use crate::mapping::kernel::{ArgData, Kernel, KernelArg, ThreadShare};
use crate::mapping::loaded::Entry;
use crate::mapping::report::{self, LaunchReport};
use crate::mapping::transfer;
use crate::plugins::{BackendKind, EntryLimits, Limits, Shape};
use crate::{Error, Result};
use offload_kernel::Dim3;

/// Threads per block when the launch does not say.
pub const DEFAULT_BLOCK: u32 = 256;

/// Elements each thread handles in a default launch, once the grid fills the device. Fewer
/// leave streaming kernels short of the memory's bandwidth; more slow down scattered stores and
/// do not pay for a block's set-up. Four was the best single choice over examples/parity
/// (docs/PERFORMANCE.md, "Why the defaults are what they are").
pub const DEFAULT_ELEMENTS_PER_THREAD: u64 = 4;

/// Threads per block of a default launch of a kernel with `#[reduce]` parameters on the host
/// CPU, where a block's threads run one after another: few, so that they walk their block's
/// region of the data together, each a 16-byte chunk apart in a cache line.
pub const HOST_REDUCTION_BLOCK: u32 = 4;

/// Bytes of data per block at most in a default launch of such a kernel on the host CPU: small
/// enough to stay in a core's cache while the block's threads walk it.
pub const HOST_REDUCTION_REGION: u64 = 128 << 10;

/// Bytes each thread covers at least in a default launch: one 16-byte access of the `#[wide]`
/// ownership loops (`update_mine_wide`), so that threads of 2-byte elements each get a whole
/// chunk.
pub const DEFAULT_BYTES_PER_THREAD: u64 = 16;

/// Most threads one launch may have. GPU kernels compute their thread ids in 32-bit arithmetic
/// (`offload_kernel::global_id`), as CUDA C does with `int`: cheaper than 64-bit on GPUs, and
/// exact only below 2^32 threads. A grid-stride loop covers any length with fewer threads.
pub const MAX_LAUNCH_THREADS: u64 = u32::MAX as u64;

/// How to launch a kernel: on which device, with which grid and block. Anything left unset is
/// chosen: the default device, blocks of 256 threads, and a grid sized from the longest
/// `&mut [T]` argument (else the longest `&[T]`): enough blocks to fill the device, and beyond
/// that one thread per `DEFAULT_ELEMENTS_PER_THREAD` (4) elements, or per 16 bytes of smaller
/// elements (on the host CPU one thread per element, or per strip of a `#[grid]` output's walk).
/// Kernels reach their elements
/// through grid-stride views, so every shape gives the same results.
#[derive(Clone, Copy, Default)]
pub struct Launch<'d> {
    pub(crate) device: Option<&'d Device>,
    grid: Option<Dim3>,
    block: Option<Dim3>,
    dynamic_shared: u32,
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

    /// On `device`.
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

    /// What decides the shape and entry of a launch of `kernel` on `device` with `args`
    /// (`crate::api::prepared`), once the arguments are known to be passable and not to share written
    /// device memory (`check_arguments`).
    pub(crate) fn key(
        &self,
        kernel: &'static Kernel,
        device: &Device,
        args: &[KernelArg<'_>],
    ) -> Result<prepared::Key> {
        check_arguments(kernel, args)?;
        Ok(prepared::Key {
            kernel: prepared::Key::kernel(kernel),
            code: device.code_generation(),
            grid: self.grid,
            block: self.block,
            dynamic_shared: self.dynamic_shared,
            items: self.items_of(args),
        })
    }

    /// The shape of a launch of `kernel` on `device` for `items` (see `items_of`) and the
    /// kernel's entry there (its code loaded on first use), checked against both.
    pub(crate) fn prepare(
        &self,
        kernel: &'static Kernel,
        device: &Device,
        items: (u64, u64),
    ) -> Result<(Shape, Entry)> {
        let shape = self.shape_on(kernel, device, items)?;
        let entry = device.entry(kernel)?;
        let shape = self.fit_entry(kernel, device, shape, &entry)?;
        Ok((shape, entry))
    }

    /// `shape` (from `shape_on`) checked against `kernel`'s entry on `device`. A reduction's
    /// default grid is cut to the blocks the device runs at once, counting the entry's registers
    /// and shared memory: its blocks each walk an equal share of the data, and blocks beyond
    /// those would run as a second, partial wave that leaves most of the device idle.
    pub(crate) fn fit_entry(
        &self,
        kernel: &'static Kernel,
        device: &Device,
        mut shape: Shape,
        entry: &Entry,
    ) -> Result<Shape> {
        check_fits_entry(kernel, device, shape, entry)?;
        if self.grid.is_none() && kernel.share == ThreadShare::Reduction {
            let threads = shape.block.count() as u32;
            if let Some(per_multiprocessor) =
                device.resident_blocks(entry, threads, shape.dynamic_shared)?
            {
                let resident =
                    device.limits().multiprocessors as u64 * per_multiprocessor.max(1) as u64;
                let blocks = shape.grid.count().min(resident) as u32;
                shape.grid = Dim3::new(blocks, 1, 1);
            }
        }
        Ok(shape)
    }

    /// What a default grid is sized from among `args` (`default_items`); zero when the launch
    /// gives its grid.
    pub(crate) fn items_of(&self, args: &[KernelArg<'_>]) -> (u64, u64) {
        match self.grid {
            Some(_) => (0, 0),
            None => default_items(args),
        }
    }

    /// The settings alone, without the device (for a launch prepared once on a stream, whose
    /// device is the stream's).
    pub(crate) fn settings(&self) -> Launch<'static> {
        Launch {
            device: None,
            grid: self.grid,
            block: self.block,
            dynamic_shared: self.dynamic_shared,
        }
    }

    /// The shape of a launch of `kernel` on `device` for `items` (see `items_of`), checked
    /// against the device's limits.
    pub(crate) fn shape_on(
        &self,
        kernel: &'static Kernel,
        device: &Device,
        items: (u64, u64),
    ) -> Result<Shape> {
        self.resolve(kernel, device, &device.limits(), items)
    }

    /// Fill in the unset parts (a default grid covers `items`: elements and their size) and
    /// check the shape against the device.
    fn resolve(
        &self,
        kernel: &'static Kernel,
        device: &Device,
        limits: &Limits,
        (items, elem_size): (u64, u64),
    ) -> Result<Shape> {
        let invalid = |reason: String| Error::InvalidLaunch {
            kernel: kernel.name,
            device: device.name().to_string(),
            reason,
        };
        let host = device.kind() == BackendKind::Host;
        let reduction = kernel.share == ThreadShare::Reduction;
        let default_block = if host && reduction {
            HOST_REDUCTION_BLOCK
        } else {
            DEFAULT_BLOCK
        };
        let block = self.block.unwrap_or(Dim3::new(default_block, 1, 1));
        let grid = match self.grid {
            Some(grid) => grid,
            None => {
                let per_block = block.count().max(1);
                let one_per_thread = items.div_ceil(per_block).max(1);
                let blocks = if reduction && host {
                    // A block's few threads run one after another over its region of the
                    // data (`for_each_mine_wide`), which stays in the core's cache between
                    // them: regions of at most HOST_REDUCTION_REGION bytes, some per worker.
                    let regions = (items * elem_size).div_ceil(HOST_REDUCTION_REGION);
                    regions
                        .max(limits.multiprocessors as u64 * 4)
                        .min(one_per_thread)
                } else if reduction {
                    // The last block combines every block's total: one device-full of blocks,
                    // their threads walking the rest of the data in turn.
                    let resident = limits.multiprocessors as u64
                        * (limits.threads_per_multiprocessor as u64 / per_block).max(1);
                    one_per_thread.min(resident.max(1))
                } else if host {
                    // A GPU thread costs a plain call there, and with one element per thread
                    // each worker's range of threads walks consecutive elements (plugins::host).
                    // A `#[grid]` kernel's thread walks a strip item of its own: with one per
                    // element, all items would sit in the first 1/32 of the threads, and so in
                    // the few ranges that rayon leaves to one worker.
                    items
                        .div_ceil(per_block * host_per_thread(kernel, elem_size))
                        .max(1)
                } else {
                    default_blocks(items, per_thread(kernel, elem_size), per_block, limits)
                };
                // More elements than threads allowed: the grid-stride views cover the rest.
                let blocks = blocks.min(MAX_LAUNCH_THREADS / per_block);
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
        check_shape(shape, limits).map_err(invalid)?;
        Ok(shape)
    }
}

/// Refuses `args` that cannot be passed (`KernelArg::refused`) or that share written device
/// memory (`crate::mapping::aliasing`), naming the argument: what every launch checks of its arguments
/// before anything moves.
pub(crate) fn check_arguments(kernel: &'static Kernel, args: &[KernelArg<'_>]) -> Result<()> {
    if let Some(i) = args.iter().position(|a| a.refused.is_some()) {
        let reason = args[i].refused.as_deref().unwrap_or_default();
        return Err(refused(kernel, i, reason));
    }
    crate::mapping::aliasing::check_disjoint(kernel, args)
}

/// The error of the `i`th argument of a launch of `kernel`, which cannot be passed for `reason`.
#[cold]
fn refused(kernel: &'static Kernel, i: usize, reason: &str) -> Error {
    Error::InvalidArgument {
        kernel: kernel.name,
        argument: kernel.params.get(i).copied().unwrap_or("?"),
        reason: reason.to_string(),
    }
}

/// Elements per thread of a default GPU launch, as the kernel's `ThreadShare` says. One for a
/// kernel that scatters, whose threads would otherwise wait out one index load after another.
fn per_thread(kernel: &Kernel, elem_size: u64) -> u64 {
    let batched = DEFAULT_ELEMENTS_PER_THREAD.max(DEFAULT_BYTES_PER_THREAD / elem_size.max(1));
    match kernel.share {
        ThreadShare::Batched | ThreadShare::Reduction => batched,
        ThreadShare::OneElement => 1,
        ThreadShare::Strip(bytes) => batched.max(bytes / elem_size.max(1)),
    }
}

/// Elements per thread of a default launch on the host: one, or a `#[grid]` kernel's strip item.
fn host_per_thread(kernel: &Kernel, elem_size: u64) -> u64 {
    match kernel.share {
        ThreadShare::Strip(bytes) => (bytes / elem_size.max(1)).max(1),
        ThreadShare::Batched | ThreadShare::OneElement | ThreadShare::Reduction => 1,
    }
}

/// Blocks of a default grid for `items` elements: at least enough to fill the device (without
/// idle threads), else one thread per `per_thread` elements.
fn default_blocks(items: u64, per_thread: u64, per_block: u64, limits: &Limits) -> u64 {
    let one_per_thread = items.div_ceil(per_block);
    let resident = limits.multiprocessors as u64
        * (limits.threads_per_multiprocessor as u64 / per_block).max(1);
    let batched = items.div_ceil(per_block * per_thread);
    batched.max(one_per_thread.min(resident)).max(1)
}

/// The element count the default grid covers and the size of those elements: the longest output
/// (atomics are shared, not outputs split among the threads, and neither are the targets of
/// reductions), else the longest input.
fn default_items(args: &[KernelArg<'_>]) -> (u64, u64) {
    let longest = |output: bool| {
        args.iter()
            .filter(|a| !a.reduction_target)
            .filter(|a| a.data.is_output() == output)
            .filter_map(|a| Some((a.data.slice_len()?, a.data.elem_size()?)))
            .max_by_key(|&(len, _)| len)
    };
    let (len, size) = longest(true).or_else(|| longest(false)).unwrap_or((1, 1));
    (len as u64, size as u64)
}

/// `check_entry` for a launch of `kernel` on `device`, as the launch's error.
fn check_fits_entry(
    kernel: &'static Kernel,
    device: &Device,
    shape: Shape,
    entry: &Entry,
) -> Result<()> {
    let limit = device.limits().max_shared_per_block;
    check_entry(shape, &entry.limits, limit).map_err(|reason| Error::InvalidLaunch {
        kernel: kernel.name,
        device: device.name().to_string(),
        reason,
    })
}

/// Checks a shape the device accepts against the kernel's entry: a kernel that needs many
/// registers per thread runs with fewer threads per block than the device allows (the driver
/// would only say "too many resources requested"), and its static shared memory counts against
/// the device's limit beside the dynamic.
fn check_entry(
    shape: Shape,
    entry: &EntryLimits,
    max_shared: u32,
) -> std::result::Result<(), String> {
    let threads = shape.block.count();
    if threads > entry.max_threads_per_block as u64 {
        return Err(format!(
            "{threads} threads per block exceeds the {} this kernel can run with ({} registers \
             per thread)",
            entry.max_threads_per_block, entry.registers
        ));
    }
    let (dynamic, fixed) = (shape.dynamic_shared, entry.static_shared);
    if dynamic > 0 && dynamic as u64 + fixed as u64 > max_shared as u64 {
        return Err(format!(
            "{dynamic} bytes of dynamic shared memory and the kernel's {fixed} bytes of static \
             shared memory exceed the device limit of {max_shared} bytes per block"
        ));
    }
    Ok(())
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
    let threads = grid.count() as u128 * block.count() as u128;
    if threads > MAX_LAUNCH_THREADS as u128 {
        return Err(format!(
            "{threads} threads in the launch ({grid} blocks of {block}) exceed the {MAX_LAUNCH_THREADS} \
             that 32-bit thread ids allow: use fewer blocks (grid-stride loops cover any length)"
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

/// Launch `kernel` with `args` as `launch` says: pick the device, size and check the grid, move
/// the data, run, and move the results back.
pub fn launch(
    kernel: &'static Kernel,
    launch: Launch<'_>,
    args: &mut [KernelArg<'_>],
) -> Result<()> {
    // Unless the launch names a device, data already on one decides.
    let resident_on = || {
        args.iter().find_map(|a| match a.data {
            ArgData::Resident { device, .. } => Device::by_id(device),
            _ => None,
        })
    };
    let device = match launch.device {
        Some(named) => named.clone(),
        None => resolve_device(kernel, resident_on().as_ref())?,
    };
    let key = launch.key(kernel, &device, args)?;
    let (shape, entry) = prepared::with_kept(
        &key,
        || launch.prepare(kernel, &device, key.items),
        |kept| Ok((kept.shape, kept.entry.clone())),
    )?;
    tracing::debug!(kernel = kernel.name, device = %device.name(), grid = ?shape.grid, block = ?shape.block, "launch");
    let mut report = LaunchReport::new(kernel.name, shape);
    transfer::launch(&device, kernel.name, &entry, shape, args, &mut report)?;
    report::record(report, &device);
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
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
    fn rejects_launches_of_2_to_the_32_threads_or_more() {
        let shape = |grid_x| Shape {
            grid: Dim3::new(grid_x, 1, 1),
            block: Dim3::new(1024, 1, 1),
            dynamic_shared: 0,
        };
        // 2^22 blocks of 1024 is 2^32 threads, one more than 32-bit ids count.
        assert!(check_shape(shape((1 << 22) - 1), &CUDA_LIKE).is_ok());
        assert_eq!(
            check_shape(shape(1 << 22), &CUDA_LIKE).unwrap_err(),
            "4294967296 threads in the launch ((4194304, 1, 1) blocks of (1024, 1, 1)) exceed the \
             4294967295 that 32-bit thread ids allow: use fewer blocks (grid-stride loops cover \
             any length)"
        );
    }

    #[test]
    fn a_kernel_entry_limits_its_block_and_shared_memory() {
        let entry = EntryLimits {
            max_threads_per_block: 640,
            registers: 96,
            static_shared: 4096,
        };
        let shape = |block, dynamic_shared| Shape {
            grid: Dim3::new(1, 1, 1),
            block: Dim3::new(block, 1, 1),
            dynamic_shared,
        };
        assert!(check_entry(shape(640, 0), &entry, 8192).is_ok());
        assert_eq!(
            check_entry(shape(641, 0), &entry, 8192).unwrap_err(),
            "641 threads per block exceeds the 640 this kernel can run with (96 registers per thread)"
        );
        assert!(check_entry(shape(64, 4096), &entry, 8192).is_ok());
        assert_eq!(
            check_entry(shape(64, 4097), &entry, 8192).unwrap_err(),
            "4097 bytes of dynamic shared memory and the kernel's 4096 bytes of static shared \
             memory exceed the device limit of 8192 bytes per block"
        );
    }

    #[test]
    fn default_grid_fills_the_device_then_batches_elements() {
        let per_thread = |elem_size| per_thread(&crate::mapping::mock_kernels::FILL, elem_size);
        // Small: one thread per element (no idle threads).
        assert_eq!(default_blocks(1000, per_thread(4), 256, &CUDA_LIKE), 4);
        assert_eq!(default_blocks(0, per_thread(4), 256, &CUDA_LIKE), 1);
        // Medium: the device is filled (132 SMs x 8 blocks) before elements are batched.
        assert_eq!(
            default_blocks(1 << 20, per_thread(4), 256, &CUDA_LIKE),
            1056
        );
        // Large: four elements per thread.
        assert_eq!(
            default_blocks(1 << 28, per_thread(4), 256, &CUDA_LIKE),
            (1 << 28) / 1024
        );
        assert_eq!(
            default_blocks(1 << 28, per_thread(8), 256, &CUDA_LIKE),
            (1 << 28) / 1024
        );
        // 2-byte elements: eight per thread, one 16-byte access.
        assert_eq!(
            default_blocks(1 << 28, per_thread(2), 256, &CUDA_LIKE),
            (1 << 28) / 2048
        );
    }

    #[test]
    fn default_grid_covers_the_longest_output() {
        let x = [0f32; 1000];
        let mut y = [0f64; 300];
        let args = [KernelArg::slice(&x), KernelArg::slice_mut(&mut y)];
        assert_eq!(default_items(&args), (300, 8));
        let args = [KernelArg::slice(&x)];
        assert_eq!(default_items(&args), (1000, 4));
        let a = 1.0f32;
        assert_eq!(default_items(&[KernelArg::value(&a)]), (1, 1));
        let mut bins = [0u16; 2000];
        let args = [KernelArg::slice(&x), KernelArg::atomics(&mut bins)];
        assert_eq!(default_items(&args), (2000, 2), "atomics count as inputs");
        let args = [KernelArg::atomics(&mut bins), KernelArg::slice_mut(&mut y)];
        assert_eq!(default_items(&args), (300, 8));
    }

    /// The launch path above the plugins on the mock GPU: choosing and caching code, errors
    /// naming the kernel, panic records.
    pub(crate) mod on_the_mock {
        use super::*;
        use crate::api::prepared::with_kept;
        use crate::mapping::mock_kernels::{image, kernel, mock, record, FILL, GOOD};
        use crate::ImageSet;
        use std::cell::Cell;
        use std::sync::atomic::Ordering;
        static REJECTED: ImageSet = ImageSet {
            images: &[image(b"bad image")],
            kernels: &["fill"],
            unavailable: None,
        };
        static UNBUILT: ImageSet = ImageSet {
            images: &[],
            kernels: &[],
            unavailable: Some("no device toolchain"),
        };
        static OTHER: Kernel = kernel("other", &GOOD);
        static MISSING: Kernel = kernel("missing_entry", &GOOD);
        static FILL_REJECTED: Kernel = kernel("fill", &REJECTED);
        static FILL_UNBUILT: Kernel = kernel("fill", &UNBUILT);

        static SCATTER: Kernel = Kernel {
            share: ThreadShare::OneElement,
            ..kernel("fill", &GOOD)
        };
        static STRIPS: Kernel = Kernel {
            share: ThreadShare::Strip(128),
            ..kernel("fill", &GOOD)
        };

        #[test]
        fn a_kernel_scattering_or_walking_strips_gets_its_share_of_a_default_grid() {
            let (_gpu, device) = mock();
            let limits = device.limits();
            let mut out = vec![0f64; 1 << 20];
            let args = [KernelArg::slice_mut(&mut out)];
            let blocks = |kernel| {
                let items = default_items(&args);
                let shape = Launch::on(&device).resolve(kernel, &device, &limits, items);
                shape.unwrap().grid.x
            };
            // The mock's 4 multiprocessors hold 32 blocks of 256: far fewer than any grid here.
            assert_eq!(blocks(&FILL), (1 << 20) / (256 * 4));
            assert_eq!(blocks(&SCATTER), (1 << 20) / 256);
            // Strips of 128 bytes: 16 f64 per thread.
            assert_eq!(blocks(&STRIPS), (1 << 20) / (256 * 16));
            // On the host one element per thread, and a strip item per thread alike.
            let host = Device::host();
            let shape = |kernel| {
                let (items, limits) = (default_items(&args), host.limits());
                let shape = Launch::on(&host).resolve(kernel, &host, &limits, items);
                shape.unwrap().grid.x
            };
            assert_eq!(shape(&FILL), (1 << 20) / 256);
            assert_eq!(shape(&SCATTER), (1 << 20) / 256);
            assert_eq!(shape(&STRIPS), (1 << 20) / (256 * 16));
        }

        static REDUCTION: Kernel = Kernel {
            share: ThreadShare::Reduction,
            ..kernel("fill", &GOOD)
        };

        #[test]
        fn a_reductions_default_grid_holds_the_blocks_the_device_runs_at_once() {
            let (_gpu, device) = mock();
            let mut out = vec![0f64; 1 << 20];
            let args = [KernelArg::slice_mut(&mut out)];
            let grid = |kernel, launch: Launch<'_>| {
                let (shape, _) = launch
                    .prepare(kernel, &device, launch.items_of(&args))
                    .unwrap();
                shape.grid.x
            };
            // The mock's 128 registers a thread: 2 blocks of 256 on each of its 4
            // multiprocessors, where their threads alone would allow 8.
            assert_eq!(grid(&REDUCTION, Launch::on(&device)), 4 * 2);
            assert_eq!(grid(&REDUCTION, Launch::on(&device).block(128)), 4 * 4);
            // A grid the launch gives, and other kernels' default grids, stay as they are.
            assert_eq!(grid(&REDUCTION, Launch::on(&device).grid(100)), 100);
            assert_eq!(grid(&FILL, Launch::on(&device)), (1 << 20) / (256 * 4));
        }

        /// A launch made while the thread's kept launches are in use (inside another launch) gets
        /// one prepared for itself, and keeps nothing.
        #[test]
        fn a_launch_inside_another_is_prepared_for_itself() {
            let (_gpu, device) = mock();
            let mut out = [0u32; 8];
            let args = [KernelArg::value(&7u32), KernelArg::slice_mut(&mut out)];
            let launch = Launch::auto();
            let key = launch.key(&FILL, &device, &args).unwrap();
            let prepared = Cell::new(0);
            let prepare = || {
                prepared.set(prepared.get() + 1);
                launch.prepare(&FILL, &device, key.items)
            };
            with_kept(&key, prepare, |outer| {
                outer.noted = 1;
                with_kept(&key, prepare, |inner| {
                    assert_eq!(inner.noted, u64::MAX, "not the outer launch");
                    Ok(())
                })
            })
            .unwrap();
            assert_eq!(prepared.get(), 2);
            with_kept(&key, prepare, |kept| {
                assert_eq!(kept.noted, 1, "the outer launch was kept");
                Ok(())
            })
            .unwrap();
            assert_eq!(prepared.get(), 2);
        }

        fn fill(kernel: &'static Kernel, launch: Launch<'_>, out: &mut [u32]) -> Result<()> {
            let mut args = [KernelArg::value(&7u32), KernelArg::slice_mut(out)];
            super::launch(kernel, launch, &mut args)
        }

        fn no_image_reason(result: Result<()>) -> String {
            match result {
                Err(Error::NoImage { reason, .. }) => reason,
                other => panic!("expected NoImage, got {other:?}"),
            }
        }

        #[test]
        fn an_image_is_loaded_once_per_device_for_all_its_kernels() {
            let (gpu, device) = mock();
            let mut out = [0u32; 8];
            for _ in 0..3 {
                fill(&FILL, Launch::on(&device), &mut out).unwrap();
                fill(&OTHER, Launch::on(&device), &mut out).unwrap();
            }
            assert_eq!(*gpu.images_loaded.lock().unwrap(), 1);
            assert_eq!(gpu.launches.lock().unwrap().len(), 6);
            let (other_gpu, other) = mock();
            fill(&FILL, Launch::on(&other), &mut out).unwrap();
            assert_eq!(*other_gpu.images_loaded.lock().unwrap(), 1);
        }

        #[test]
        fn missing_or_rejected_code_is_no_image_every_time_and_spares_the_rest() {
            let (_gpu, device) = mock();
            let mut out = [0u32; 8];
            for _ in 0..2 {
                let reason = no_image_reason(fill(&FILL_REJECTED, Launch::on(&device), &mut out));
                assert_eq!(reason, "the mock rejects this image");
            }
            let reason = no_image_reason(fill(&FILL_UNBUILT, Launch::on(&device), &mut out));
            assert_eq!(reason, "no device image was built (no device toolchain)");
            let reason = no_image_reason(fill(&MISSING, Launch::on(&device), &mut out));
            assert_eq!(reason, "no such entry");
            fill(&FILL, Launch::on(&device), &mut out).unwrap();
        }

        #[test]
        fn a_block_beyond_the_entrys_limit_is_refused_before_anything_moves() {
            let (gpu, device) = mock();
            let mut out = [0u32; 8];
            match fill(&FILL, Launch::on(&device).block(1024), &mut out) {
                Err(Error::InvalidLaunch { kernel, reason, .. }) => {
                    assert_eq!(kernel, "fill");
                    assert_eq!(
                        reason,
                        "1024 threads per block exceeds the 512 this kernel can run with \
                         (128 registers per thread)"
                    );
                }
                other => panic!("expected InvalidLaunch, got {other:?}"),
            }
            assert_eq!(gpu.live_allocations(), 0);
            assert!(gpu.launches.lock().unwrap().is_empty());
        }

        /// A panic is read from the image's record, named, and the record re-armed: with the
        /// pinned flag the device sets, and with a copy of the record after each launch.
        #[test]
        fn a_panicking_thread_fails_its_launch_and_only_that_one() {
            for maps_pinned in [true, false] {
                let (gpu, device) = mock();
                gpu.maps_pinned.store(maps_pinned, Ordering::Relaxed);
                let mut out = [5u32; 4];
                gpu.panic_next_launch(record());
                match fill(&FILL, Launch::on(&device), &mut out) {
                    Err(Error::KernelFailed {
                        kernel, message, ..
                    }) => {
                        assert_eq!(kernel, "fill");
                        assert_eq!(
                            message,
                            "panicked at src/kernels.rs:12:20 (block (3, 0, 0), thread (231, 0, 0))"
                        );
                    }
                    other => panic!("expected KernelFailed, got {other:?}"),
                }
                assert_eq!(out, [5; 4], "a failed launch leaves its outputs alone");
                fill(&FILL, Launch::on(&device), &mut out).unwrap();
                assert_eq!(gpu.live_allocations(), 0);
            }
        }

        /// A launch kept for the next ones (`crate::api::prepared`) serves the same kernel on the
        /// same device with the same element count only.
        #[test]
        fn a_kept_launch_serves_only_the_same_kernel_device_and_size() {
            let (gpu, device) = mock();
            let (other_gpu, other) = mock();
            let (mut small, mut large) = ([0u32; 8], vec![0u32; 1 << 16]);
            let grid = || crate::last_launch().unwrap().grid.unwrap();
            fill(&FILL, Launch::on(&device), &mut small).unwrap();
            let small_grid = grid();
            fill(&FILL, Launch::on(&device), &mut large).unwrap();
            assert_ne!(grid(), small_grid, "a longer output gets its own grid");
            fill(&FILL, Launch::on(&device), &mut small).unwrap();
            assert_eq!(grid(), small_grid);
            fill(&FILL, Launch::on(&device).grid(3), &mut small).unwrap();
            assert_eq!(grid(), Dim3::new(3, 1, 1));
            fill(&FILL, Launch::on(&other), &mut small).unwrap();
            assert_eq!(
                *other_gpu.images_loaded.lock().unwrap(),
                1,
                "another device loads its own"
            );
            assert_eq!(gpu.launches.lock().unwrap().len(), 4);
            assert_eq!(other_gpu.launches.lock().unwrap().len(), 1);
        }

        #[test]
        fn a_released_device_refuses_launches() {
            let (_gpu, device) = mock();
            let mut out = [0u32; 8];
            fill(&FILL, Launch::on(&device), &mut out).unwrap();
            device.release().unwrap();
            assert!(matches!(
                fill(&FILL, Launch::on(&device), &mut out),
                Err(Error::Released { .. })
            ));
        }
    }
}
