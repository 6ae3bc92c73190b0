//! Device-wide prefix scans (inclusive and exclusive), deterministic, over device data.
//!
//! Kernels only exist in a crate's kernels module, so a scan is instantiated there, once per
//! element type and operation, by [`scan_kernel!`](crate::scan_kernel):
//!
//! ```text
//! // src/kernels.rs
//! offload::scan_kernel!(pub scan_sum_u32(u32, offload::reduce::Sum));
//! offload::scan_kernel!(pub scan_min_loc(MinLoc, offload::reduce::Own)); // a `Reduce` type
//! ```
//! ```text
//! // host code
//! let x = DeviceVec::from_slice(&device, &data)?;
//! let mut out = DeviceVec::zeroed(&device, x.len())?;
//! kernels::scan_sum_u32::exclusive(&x, &mut out)?;       // out[i] = x[0] + … + x[i-1]
//! kernels::scan_sum_u32::inclusive(&x, &mut out)?;       // out[i] = x[0] + … + x[i]
//! offload::scope(|s| {                                   // on a stream, scratch kept
//!     let stream = s.stream(&device)?;
//!     let mut scratch = offload::scan::Scratch::new();
//!     kernels::scan_sum_u32::enqueue(&stream, Scan::exclusive(), x.slice(..), out.slice_mut(..), &mut scratch)
//! })?;
//! ```
//!
//! The macro writes one kernel (in the module it makes, under the same name) that a scan
//! launches three times on the stream, reduce-then-scan: the total of each tile of the input
//! (`Scan::tile` elements, one block each); the exclusive scan of those totals in one block;
//! the scan of each tile from its offset. An input of one tile takes one launch.
//!
//! **Determinism.** Every combine happens in an order fixed by the element type, the threads
//! per block and the tile length ([`Scan::block`], [`Scan::tile`]; by default 128 threads and a
//! tile length that depends on the input's length only), never by the warp width or timing,
//! and no atomics are used: the result is the same bits from run to run, and on the host
//! backend and on any GPU for the same shape. Integer sums wrap; `min`/`max` of floats ignore
//! NaN (see [`crate::reduce`]). The operation must be associative; it need not be
//! commutative (operands are combined left to right).

pub use offload_kernel::scan::*;

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
pub use host::*;

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
mod host {
    use super::{items_per_thread, max_threads};
    use crate::{
        Device, DeviceCopy, DeviceVec, DeviceView, DeviceViewMut, Error, Launch, Result, Stream,
    };

    /// The one kernel of a scan, as `scan_kernel!` writes it: implemented by the macro.
    #[doc(hidden)]
    pub trait ScanKernel<T: DeviceCopy> {
        /// Queue one launch of the kernel on `stream`.
        #[allow(clippy::too_many_arguments)]
        fn enqueue(
            stream: &Stream<'_>,
            launch: Launch<'_>,
            inclusive: bool,
            tile_len: usize,
            x: DeviceView<'_, T>,
            offsets: DeviceView<'_, T>,
            out: DeviceViewMut<'_, T>,
            totals: DeviceViewMut<'_, T>,
        ) -> Result<()>;
    }

    /// Which scan, and its launch shape (which, with the element type, fixes the order of the
    /// combines: see the [module](super) docs).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Scan {
        inclusive: bool,
        block: Option<u32>,
        tile: Option<usize>,
    }

    /// Threads per block of a scan by default.
    pub const DEFAULT_BLOCK: u32 = 128;
    /// Chunks (a block's pass over its staging memory) per tile at least, by default: a block
    /// scans several chunks, so that fewer tiles pass through the middle launch.
    const DEFAULT_TILE_CHUNKS: usize = 4;
    /// At most this many tiles by default: the one block that scans their totals takes a few
    /// chunks at most.
    const DEFAULT_MAX_TILES: usize = 32768;

    impl Scan {
        /// `out[i] = x[0] ⊕ … ⊕ x[i-1]`, `out[0]` the identity.
        pub fn exclusive() -> Self {
            Scan {
                inclusive: false,
                block: None,
                tile: None,
            }
        }

        /// `out[i] = x[0] ⊕ … ⊕ x[i]`.
        pub fn inclusive() -> Self {
            Scan {
                inclusive: true,
                ..Self::exclusive()
            }
        }

        /// Whether it is the inclusive scan.
        pub fn is_inclusive(&self) -> bool {
            self.inclusive
        }

        /// Threads per block (1 to 1024, at most 16 KiB of elements: `offload::scan::max_threads`),
        /// and no more than the kernel's registers allow on the device: a launch past that fails
        /// with `Error::InvalidLaunch`, which names the limit.
        pub fn block(self, threads: u32) -> Self {
            Scan {
                block: Some(threads),
                ..self
            }
        }

        /// Elements per tile (one block scans one tile; at least 1).
        pub fn tile(self, elements: usize) -> Self {
            Scan {
                tile: Some(elements),
                ..self
            }
        }

        /// Threads per block and the tile length for `len` elements of `T`.
        pub fn shape<T>(&self, len: usize) -> Result<(u32, usize)> {
            let size = std::mem::size_of::<T>();
            let block = self
                .block
                .unwrap_or(DEFAULT_BLOCK.min(max_threads(size) as u32));
            if block == 0 || block as usize > max_threads(size) {
                return Err(Error::InvalidArgument {
                    kernel: "scan",
                    argument: "block",
                    reason: format!(
                        "{block} threads per block: a scan of {size}-byte elements takes 1 to {}",
                        max_threads(size)
                    ),
                });
            }
            let chunk = items_per_thread(size, block as usize) * block as usize;
            let tile = match self.tile {
                Some(0) => {
                    return Err(Error::InvalidArgument {
                        kernel: "scan",
                        argument: "tile",
                        reason: "a tile of 0 elements".into(),
                    })
                }
                Some(tile) => tile,
                None => chunk * len.div_ceil(chunk * DEFAULT_MAX_TILES).max(DEFAULT_TILE_CHUNKS),
            };
            Ok((block, tile))
        }
    }

    /// Device memory a scan uses between its launches (a total and an offset per tile), kept
    /// for the next scan. Grows as needed; moves to the stream's device when it changes.
    pub struct Scratch<T: DeviceCopy> {
        buffers: Option<Buffers<T>>,
    }

    struct Buffers<T: DeviceCopy> {
        device: Device,
        totals: DeviceVec<T>,
        offsets: DeviceVec<T>,
        /// Empty: what a launch passes for an argument it does not use.
        no_input: DeviceVec<T>,
        no_output: DeviceVec<T>,
    }

    impl<T: DeviceCopy> Default for Scratch<T> {
        fn default() -> Self {
            Self::new()
        }
    }

    impl<T: DeviceCopy> Scratch<T> {
        /// No memory yet: the first scan allocates it.
        pub fn new() -> Self {
            Scratch { buffers: None }
        }

        fn on(&mut self, device: &Device, tiles: usize) -> Result<&mut Buffers<T>> {
            let fits = self.buffers.as_ref().is_some_and(|b| {
                b.device.kind() == device.kind()
                    && b.device.ordinal() == device.ordinal()
                    && b.totals.len() >= tiles
            });
            if !fits {
                self.buffers = None;
                let len = tiles.next_power_of_two();
                self.buffers = Some(Buffers {
                    device: device.clone(),
                    totals: DeviceVec::zeroed(device, len)?,
                    offsets: DeviceVec::zeroed(device, len)?,
                    no_input: DeviceVec::zeroed(device, 0)?,
                    no_output: DeviceVec::zeroed(device, 0)?,
                });
            }
            Ok(self.buffers.as_mut().expect("just made"))
        }
    }

    /// Queue the scan `scan` of `x` into `out` (as long as `x`) on `stream`, through kernel
    /// `K` (what `scan_kernel!` writes); `scratch` must stay alive until the stream's work is
    /// done (it is borrowed for the call; dropping a `DeviceVec` waits for its queued uses).
    pub fn enqueue<T: DeviceCopy, K: ScanKernel<T>>(
        stream: &Stream<'_>,
        scan: Scan,
        x: DeviceView<'_, T>,
        out: DeviceViewMut<'_, T>,
        scratch: &mut Scratch<T>,
    ) -> Result<()> {
        let n = x.len();
        if out.len() != n {
            return Err(Error::InvalidArgument {
                kernel: "scan",
                argument: "out",
                reason: format!("{} elements for an input of {n}", out.len()),
            });
        }
        let (block, tile) = scan.shape::<T>(n)?;
        if n == 0 {
            return Ok(());
        }
        let tiles = n.div_ceil(tile);
        let grid = u32::try_from(tiles).map_err(|_| Error::InvalidArgument {
            kernel: "scan",
            argument: "tile",
            reason: format!("{tiles} tiles of {tile} elements: more blocks than a grid has"),
        })?;
        let device = stream.device().clone();
        let b = scratch.on(&device, tiles)?;
        let shape = Launch::on(&device).grid(grid).block(block);
        if tiles == 1 {
            return K::enqueue(
                stream,
                shape,
                scan.inclusive,
                tile,
                x,
                b.no_input.slice(..),
                out,
                b.no_output.slice_mut(..),
            );
        }
        // 1. Each tile's total.
        K::enqueue(
            stream,
            shape,
            false,
            tile,
            x,
            b.no_input.slice(..),
            b.no_output.slice_mut(..),
            b.totals.slice_mut(..tiles),
        )?;
        // 2. Their exclusive scan, in one block: each tile's offset.
        K::enqueue(
            stream,
            Launch::on(&device).grid(1).block(block),
            false,
            tiles,
            b.totals.slice(..tiles),
            b.no_input.slice(..),
            b.offsets.slice_mut(..tiles),
            b.no_output.slice_mut(..),
        )?;
        // 3. Each tile's scan from its offset.
        K::enqueue(
            stream,
            shape,
            scan.inclusive,
            tile,
            x,
            b.offsets.slice(..tiles),
            out,
            b.no_output.slice_mut(..),
        )
    }

    /// [`enqueue`] on a stream of `x`'s device, waiting for it: `out` holds the scan on return.
    pub fn run<T: DeviceCopy, K: ScanKernel<T>>(
        scan: Scan,
        x: &DeviceVec<T>,
        out: &mut DeviceVec<T>,
    ) -> Result<()> {
        let mut scratch = Scratch::new();
        let device = x.device().clone();
        crate::scope(|s| {
            let stream = s.stream(&device)?;
            enqueue::<T, K>(&stream, scan, x.slice(..), out.slice_mut(..), &mut scratch)
        })
    }
}

/// Instantiate a device-wide prefix scan in a kernels module: `scan_kernel!(pub NAME(T, OP))`,
/// `OP` one of [`reduce::Sum`](crate::reduce::Sum), `Product`, `Min`, `Max` for primitive
/// types, or [`reduce::Own`](crate::reduce::Own) for a type implementing
/// [`Reduce`](crate::Reduce). It makes module `NAME` with:
/// - `exclusive(&x, &mut out)` and `inclusive(&x, &mut out)`: over `DeviceVec`s, on `x`'s
///   device, the default shape, returning when done;
/// - `run(Scan::…, &x, &mut out)`: the same with a chosen [`scan::Scan`](crate::scan::Scan);
/// - `enqueue(&stream, Scan::…, x_view, out_view, &mut scratch)`: on a stream, over views of
///   `DeviceVec`s (`v.slice(..)`, `v.slice_mut(..)`);
/// - the kernel itself, `NAME::NAME` (its device entry is named `NAME`, so `NAME` must be unique
///   among the crate's kernels).
///
/// See the [`scan`](crate::scan) module for the algorithm and what fixes its result.
#[macro_export]
macro_rules! scan_kernel {
    ($(#[$attr:meta])* $vis:vis $name:ident($t:ty, $op:ty)) => {
        $(#[$attr])*
        #[allow(clippy::too_many_arguments)]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;

            /// The scan's kernel: one pass of three (see `offload::scan`).
            #[::offload::kernel]
            pub fn $name(
                inclusive: bool,
                tile_len: usize,
                x: &[$t],
                offsets: &[$t],
                #[tile(tile_len)] out: &mut [$t],
                #[tile(1)] totals: &mut [$t],
            ) {
                ::offload::scan::scan_tiles::<$t, $op>(inclusive, x, offsets, out, totals)
            }

            /// The kernel, for `offload::scan`'s launch sequence.
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            #[doc(hidden)]
            pub struct Kernel;

            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            impl ::offload::scan::ScanKernel<$t> for Kernel {
                fn enqueue(
                    stream: &::offload::Stream<'_>,
                    launch: ::offload::Launch<'_>,
                    inclusive: bool,
                    tile_len: usize,
                    x: ::offload::DeviceView<'_, $t>,
                    offsets: ::offload::DeviceView<'_, $t>,
                    out: ::offload::DeviceViewMut<'_, $t>,
                    totals: ::offload::DeviceViewMut<'_, $t>,
                ) -> ::offload::Result<()> {
                    $name::enqueue(stream, launch, inclusive, tile_len, x, offsets, out, totals)
                }
            }

            /// The exclusive scan of `x` into `out` (as long as `x`), on `x`'s device.
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            pub fn exclusive(
                x: &::offload::DeviceVec<$t>,
                out: &mut ::offload::DeviceVec<$t>,
            ) -> ::offload::Result<()> {
                ::offload::scan::run::<$t, Kernel>(::offload::scan::Scan::exclusive(), x, out)
            }

            /// The inclusive scan of `x` into `out` (as long as `x`), on `x`'s device.
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            pub fn inclusive(
                x: &::offload::DeviceVec<$t>,
                out: &mut ::offload::DeviceVec<$t>,
            ) -> ::offload::Result<()> {
                ::offload::scan::run::<$t, Kernel>(::offload::scan::Scan::inclusive(), x, out)
            }

            /// The scan `scan` (with its shape) of `x` into `out`, on `x`'s device.
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            pub fn run(
                scan: ::offload::scan::Scan,
                x: &::offload::DeviceVec<$t>,
                out: &mut ::offload::DeviceVec<$t>,
            ) -> ::offload::Result<()> {
                ::offload::scan::run::<$t, Kernel>(scan, x, out)
            }

            /// Queue the scan `scan` of `x` into `out` on `stream` (see `offload::scan::enqueue`).
            #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
            pub fn enqueue(
                stream: &::offload::Stream<'_>,
                scan: ::offload::scan::Scan,
                x: ::offload::DeviceView<'_, $t>,
                out: ::offload::DeviceViewMut<'_, $t>,
                scratch: &mut ::offload::scan::Scratch<$t>,
            ) -> ::offload::Result<()> {
                ::offload::scan::enqueue::<$t, Kernel>(stream, scan, x, out, scratch)
            }
        }
    };
}
