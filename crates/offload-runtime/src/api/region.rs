//! Data regions: OpenMP's `target data`, scoped by a closure. On entry to [`region`] nothing is
//! mapped; each `r.to(&x)`, `r.tofrom(&mut y)`, … maps host data on the region's device (copy
//! in only at the first map of those bytes) and returns a handle; launches inside take handles
//! or the plain host data and find it present, moving nothing. When the closure returns `Ok`,
//! every map is released, and `from`/`tofrom` data is copied back at its final unmap.
//!
//! Why the host cannot read stale data: the region keeps the borrows. `tofrom`, `from` and
//! `alloc` take `&mut` host data for the whole region, so the host cannot look at it while the
//! device holds the newer copy; [`MappedMut::update_from`] and [`MappedMut::update_to`] refresh
//! one side explicitly. `to` and `present` borrow shared: neither side can change those bytes.
//!
//! When the closure returns `Err` (or panics), maps are released without copying back: host
//! data keeps the values it had before the region (or at its last `update_from`).

use crate::api::map::{HostSlice, HostSliceMut, InArg, OutArg};
use crate::mapping::device::{default_device, Device};
use crate::mapping::kernel::KernelArg;
use crate::mapping::present::{self, Key};
use crate::mapping::trace::{self, CopySource};
use crate::plugins::{Backend, DevicePtr};
use crate::{Error, Result};
use offload_kernel::DeviceCopy;
use std::marker::PhantomData;
use std::mem::size_of;
use std::sync::Mutex;
use std::time::Instant;

/// What `Error::OutOfMemory` names when a region's map does not fit.
const REGION: &str = "offload::region";

/// Run `body` in a data region on the default device: what it maps through [`Region`] stays on
/// the device until it returns (longer if an enclosing region mapped it too), and `from`/`tofrom`
/// data is copied back at its final unmap if `body` returned `Ok`, not if it failed. Launches
/// inside take the handles (or the plain host data, found present): the `offload` crate's docs
/// show one. The maps and updates themselves:
///
/// ```
/// # fn main() -> offload_runtime::Result<()> {
/// let x = vec![1.0f32; 1000];
/// let mut y = vec![2.0f32; 1000];
/// offload_runtime::region(|r| {            // or region_on(&device, |r| ...)
///     let x = r.to(&x)?;                   // copied in at the first map
///     let mut y = r.tofrom(&mut y)?;       // copied in now, back when the region ends
///     assert_eq!((x.len(), y.len()), (1000, 1000));
///     y.update_to(|host| host[0] = 5.0)?;  // a host write, then copied to the device
///     assert_eq!(y.update_from()?[..2], [5.0, 2.0]);
///     Ok(())
/// })?;                                     // y is back on the host, copied once
/// assert_eq!(y[0], 5.0);
/// # Ok(())
/// # }
/// ```
pub fn region<'data, R>(body: impl FnOnce(&Region<'data>) -> Result<R>) -> Result<R> {
    region_on(&default_device()?, body)
}

/// Run `body` in a data region on `device`.
pub fn region_on<'data, R>(
    device: &Device,
    body: impl FnOnce(&Region<'data>) -> Result<R>,
) -> Result<R> {
    let region = Region {
        device: device.clone(),
        held: Mutex::new(Vec::new()),
        scratch: Mutex::new(Vec::new()),
        _data: PhantomData,
    };
    let outcome = body(&region);
    let closed = region.close(outcome.is_ok());
    let value = outcome?;
    closed.map(|()| value)
}

/// An open data region; see [`region`].
pub struct Region<'data> {
    device: Device,
    /// The present-table entries this region holds a count on, in map order.
    held: Mutex<Vec<Key>>,
    /// On a device whose memory is the host's, the zeroed buffers standing in for `alloc` maps.
    scratch: Mutex<Vec<DevicePtr>>,
    /// Invariant in `'data`: the region copies back into the borrowed data after `body`, so no
    /// shorter borrow may be mapped.
    _data: PhantomData<fn(&'data ()) -> &'data ()>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    To,
    From,
    ToFrom,
    Alloc,
    Present,
}

impl<'data> Region<'data> {
    /// The device the region maps data on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `map(to: x)`: copied to the device at its first map; read-only for kernels.
    pub fn to<T: DeviceCopy>(&self, data: impl HostSlice<'data, T>) -> Result<Mapped<'_, T>> {
        let data = data.host_slice();
        let addr = self.map(data.as_ptr() as *mut u8, size_of_val(data), Kind::To)?;
        Ok(Mapped::new(self, addr, data.len()))
    }

    /// Data an enclosing region already mapped: its count is raised, nothing moves.
    /// `Err(Error::NotPresent)` when it is not mapped.
    pub fn present<T: DeviceCopy>(&self, data: impl HostSlice<'data, T>) -> Result<Mapped<'_, T>> {
        let data = data.host_slice();
        let addr = self.map(data.as_ptr() as *mut u8, size_of_val(data), Kind::Present)?;
        Ok(Mapped::new(self, addr, data.len()))
    }

    /// `map(tofrom: y)`: copied in at the first map and back at the final unmap.
    pub fn tofrom<T: DeviceCopy>(
        &self,
        data: impl HostSliceMut<'data, T>,
    ) -> Result<MappedMut<'_, T>> {
        self.map_mut(data.host_slice_mut(), Kind::ToFrom)
    }

    /// `map(from: y)`: the device copy starts zeroed and is copied back at the final unmap.
    pub fn from<T: DeviceCopy>(
        &self,
        data: impl HostSliceMut<'data, T>,
    ) -> Result<MappedMut<'_, T>> {
        self.map_mut(data.host_slice_mut(), Kind::From)
    }

    /// `map(alloc: y)`: zeroed device scratch of `y`'s length; nothing is copied either way, and
    /// `y` is left as it was (on the host device too).
    pub fn alloc<T: DeviceCopy>(
        &self,
        data: impl HostSliceMut<'data, T>,
    ) -> Result<MappedMut<'_, T>> {
        self.map_mut(data.host_slice_mut(), Kind::Alloc)
    }

    fn map_mut<T: DeviceCopy>(&self, data: &'data mut [T], kind: Kind) -> Result<MappedMut<'_, T>> {
        let (host, len) = (data.as_mut_ptr(), data.len());
        let addr = if kind == Kind::Alloc && self.device.memory_is_host() {
            self.host_scratch(size_of_val(data))?
        } else {
            self.map(host as *mut u8, size_of_val(data), kind)?
        };
        Ok(MappedMut {
            device: &self.device,
            host,
            addr,
            len,
            _borrow: PhantomData,
        })
    }

    /// Maps `bytes` host bytes at `host` (the device address of their copy; on a device whose
    /// memory is the host's, `host` itself).
    fn map(&self, host: *mut u8, bytes: usize, kind: Kind) -> Result<u64> {
        if self.device.memory_is_host() {
            return Ok(host as usize as u64);
        }
        let backend = self.device.backend();
        if bytes == 0 {
            return Ok(0);
        }
        let id = self.device.id();
        let name = backend.name();
        let mut table = present::table();
        if let Some(found) = table.retain(id, name, host as usize, bytes)? {
            self.held_keys().push(found.key);
            trace::present(name, host as usize, bytes, found.refs);
            return Ok(found.device.0);
        }
        let kind_name = match kind {
            Kind::Present => {
                return Err(Error::NotPresent {
                    device: name.to_string(),
                    host: host as usize,
                    bytes,
                })
            }
            Kind::To => "to",
            Kind::From => "from",
            Kind::ToFrom => "tofrom",
            Kind::Alloc => "alloc",
        };
        let device = backend.alloc(REGION, bytes)?;
        trace::map(name, kind_name, host as usize, bytes);
        if let Err(e) = fill(backend, id, device, host, bytes, kind) {
            // SAFETY: allocated above and never handed out.
            unsafe { backend.free(device) };
            trace::unmap(name, host as usize, bytes);
            return Err(e);
        }
        let copy_out = matches!(kind, Kind::From | Kind::ToFrom).then_some(host);
        let key = table.insert(id, host as usize, bytes, device, copy_out);
        self.held_keys().push(key);
        Ok(device.0)
    }

    fn held_keys(&self) -> std::sync::MutexGuard<'_, Vec<Key>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A zeroed buffer of `bytes` for an `alloc` map on a device whose memory is the host's,
    /// freed with the region.
    fn host_scratch(&self, bytes: usize) -> Result<u64> {
        if bytes == 0 {
            return Ok(0);
        }
        let backend = self.device.backend();
        let ptr = backend.alloc(REGION, bytes)?;
        self.scratch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(ptr);
        // SAFETY: `ptr` holds `bytes`.
        unsafe { backend.fill_zero(ptr, bytes)? };
        Ok(ptr.0)
    }

    /// Releases every map, copying `from`/`tofrom` data back at final unmaps when `copy_back`.
    /// The first error is returned; every map is released regardless.
    fn close(&self, copy_back: bool) -> Result<()> {
        let held = std::mem::take(&mut *self.held_keys());
        let backend = self.device.backend();
        let scratch = std::mem::take(&mut *self.scratch.lock().unwrap_or_else(|p| p.into_inner()));
        for ptr in scratch {
            // SAFETY: allocated by `host_scratch`; the region's launches have completed (plain
            // launches wait, and handles cannot leave the region).
            unsafe { backend.free(ptr) };
        }
        let mut result = Ok(());
        for key in held.into_iter().rev() {
            let last = present::table().release(key);
            if let Some(entry) = last {
                let unmapped = present::unmap(backend, self.device.id(), entry, copy_back);
                if result.is_ok() {
                    result = unmapped;
                }
            }
        }
        result
    }
}

impl Drop for Region<'_> {
    /// Reached with maps still held only when the body panicked: release them, no copy back.
    fn drop(&mut self) {
        let _ = self.close(false);
    }
}

/// Fills a fresh device copy as `kind` says.
fn fill(
    backend: &dyn Backend,
    device_id: usize,
    device: DevicePtr,
    host: *const u8,
    bytes: usize,
    kind: Kind,
) -> Result<()> {
    match kind {
        Kind::To | Kind::ToFrom => {
            let start = Instant::now();
            // SAFETY: the region borrows the host bytes, unchanged until the synchronize below;
            // `device` holds `bytes`.
            unsafe { backend.copy_to_device(device, host, bytes)? };
            // Complete before the map returns: a copy from page-locked memory is only queued, and
            // a region that launches nothing would otherwise hand the borrow back mid-copy.
            backend.synchronize()?;
            trace::copy_to_device(
                device_id,
                backend.name(),
                host,
                bytes,
                start.elapsed(),
                CopySource::RegionMap,
            );
            Ok(())
        }
        // SAFETY: `device` holds `bytes`.
        Kind::From | Kind::Alloc => unsafe { backend.fill_zero(device, bytes) },
        Kind::Present => unreachable!("present data is never filled"),
    }
}

/// Read-only device view of host data a region mapped (`to`, `present`): pass `&handle` for a
/// `&[T]` kernel parameter. The host data stays readable through its own shared borrow.
pub struct Mapped<'r, T> {
    device: usize,
    addr: u64,
    len: usize,
    _borrow: PhantomData<&'r [T]>,
}

impl<'r, T: DeviceCopy> Mapped<'r, T> {
    fn new(region: &'r Region<'_>, addr: u64, len: usize) -> Self {
        Mapped {
            device: region.device.id(),
            addr,
            len,
            _borrow: PhantomData,
        }
    }

    /// Number of elements mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it maps no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the mapped copy (a `CUdeviceptr` on a CUDA device, the host data's
    /// own address on the host device; 0 when empty), for vendor libraries to read it. Valid
    /// until the region ends. Plain launches and the region's copies have completed when their
    /// call returns; a library call queued on another queue is ordered by the caller (wait for
    /// it before the region ends). Nothing may write through it: the host data it copies is
    /// borrowed shared.
    pub fn device_ptr(&self) -> u64 {
        self.addr
    }

    fn kernel_arg<'a>(&self) -> KernelArg<'a> {
        KernelArg::resident::<T>(self.device, self.addr, self.len, false, None)
    }
}

/// Device view of host data a region mapped mutably (`tofrom`, `from`, `alloc`): pass
/// `&mut handle` for a `&mut [T]` kernel parameter, `&handle` for a `&[T]` one. It holds the
/// host data's `&mut` borrow: the host side is reached only through [`MappedMut::update_from`]
/// and [`MappedMut::update_to`].
pub struct MappedMut<'r, T> {
    device: &'r Device,
    host: *mut T,
    addr: u64,
    len: usize,
    _borrow: PhantomData<&'r mut [T]>,
}

// SAFETY: like the `&mut [T]` it stands for: the handle is the only way to the host data.
unsafe impl<T: Send> Send for MappedMut<'_, T> {}
// SAFETY: shared handles only read (the device copy, as kernel inputs).
unsafe impl<T: Sync> Sync for MappedMut<'_, T> {}

impl<T: DeviceCopy> MappedMut<'_, T> {
    /// Number of elements mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it maps no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the mapped copy, for vendor libraries to read it (as
    /// [`Mapped::device_ptr`]).
    pub fn device_ptr(&self) -> u64 {
        self.addr
    }

    /// As [`MappedMut::device_ptr`], for a library that writes the device copy: the exclusive
    /// borrow keeps offload's launches off it meanwhile. Write only `len()` elements of `T`, and
    /// have the write complete before the next launch or update that uses the data (and before
    /// the region ends, which copies `tofrom`/`from` data back). On the host device it is the
    /// host data itself.
    pub fn device_ptr_mut(&mut self) -> u64 {
        self.addr
    }

    fn kernel_arg<'a>(&self, writable: bool) -> KernelArg<'a> {
        KernelArg::resident::<T>(self.device.id(), self.addr, self.len, writable, None)
    }

    fn host(&mut self) -> &mut [T] {
        // SAFETY: the handle holds the `&mut` borrow of these `len` elements.
        unsafe { std::slice::from_raw_parts_mut(self.host, self.len) }
    }

    /// `target update from`: copies the device data to the host and shows it. For an `alloc`
    /// map on the host device, shows the scratch copy's host data instead (it never changes).
    pub fn update_from(&mut self) -> Result<&[T]> {
        let bytes = self.len * size_of::<T>();
        if !self.device.memory_is_host() && bytes > 0 {
            let backend = self.device.backend();
            let start = Instant::now();
            // SAFETY: the handle holds the host data's `&mut` borrow and the device copy.
            unsafe { backend.copy_from_device(self.host as *mut u8, DevicePtr(self.addr), bytes)? };
            backend.synchronize()?;
            trace::copy_from_device(
                self.device.id(),
                backend.name(),
                self.host as *const u8,
                bytes,
                start.elapsed(),
            );
        }
        Ok(self.host())
    }

    /// `target update to`: lets `write` change the host data, then copies it to the device.
    pub fn update_to(&mut self, write: impl FnOnce(&mut [T])) -> Result<()> {
        write(self.host());
        let bytes = self.len * size_of::<T>();
        match self.device.backend() {
            backend if !backend.memory_is_host() && bytes > 0 => {
                let start = Instant::now();
                // SAFETY: the handle holds the host data's borrow and the device copy; the host
                // bytes stay unchanged until the synchronize below.
                unsafe {
                    backend.copy_to_device(DevicePtr(self.addr), self.host as *const u8, bytes)?
                };
                // Complete before the next `write` can change the host bytes under the copy.
                backend.synchronize()?;
                trace::copy_to_device(
                    self.device.id(),
                    backend.name(),
                    self.host as *const u8,
                    bytes,
                    start.elapsed(),
                    CopySource::RegionUpdate,
                );
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

impl<T: DeviceCopy> InArg<T> for &Mapped<'_, T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.kernel_arg()
    }
}

impl<T: DeviceCopy> InArg<T> for &MappedMut<'_, T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.kernel_arg(false)
    }
}

impl<T: DeviceCopy> OutArg<T> for &mut MappedMut<'_, T> {
    fn into_kernel_arg<'a>(self) -> KernelArg<'a>
    where
        Self: 'a,
    {
        self.kernel_arg(true)
    }
}

#[cfg(test)]
mod tests {
    //! The mapping semantics on the mock GPU plugin, counted through the trace counters.
    use super::*;
    use crate::api::launch::launch;
    use crate::api::map::{alloc, from, present, to};
    use crate::mapping::kernel::Kernel;
    use crate::mapping::mock_kernels::{image, kernel_of, mock_of as mock};
    use crate::mapping::trace::{thread_counters, Counters};
    use crate::{ImageSet, Launch};

    static MOCK_IMAGES: ImageSet = ImageSet {
        images: &[image(b"mock image")],
        kernels: &["saxpy"],
        unavailable: None,
    };
    /// Never runs on the mock: its launches only record their parameters.
    static SAXPY: Kernel = kernel_of("saxpy", &MOCK_IMAGES, &["a", "x", "y"]);

    /// What a generated `saxpy::launch` does.
    fn saxpy(device: &Device, a: f32, x: impl InArg<f32>, y: impl OutArg<f32>) -> Result<()> {
        let mut args = [
            KernelArg::value(&a),
            x.into_kernel_arg(),
            y.into_kernel_arg(),
        ];
        launch(&SAXPY, Launch::on(device), &mut args)
    }

    fn moved(f: impl FnOnce()) -> Counters {
        let before = thread_counters();
        f();
        thread_counters() - before
    }

    const N: usize = 1000;
    const BYTES: u64 = (N * 4) as u64;

    #[test]
    fn a_region_moves_each_array_once_per_direction() {
        let (gpu, device) = mock(1 << 20);
        let x = vec![1.0f32; N];
        let mut y = vec![2.0f32; N];
        let counted = moved(|| {
            region_on(&device, |r| {
                let xd = r.to(&x)?;
                let mut yd = r.tofrom(&mut y)?;
                for i in 0..100 {
                    if i % 2 == 0 {
                        saxpy(&device, 2.0, &xd, &mut yd)?;
                    } else {
                        // Plain host data inside the region is found present too.
                        saxpy(&device, 2.0, &x, &mut yd)?;
                    }
                }
                Ok(())
            })
            .unwrap()
        });
        assert_eq!(counted.bytes_to_device, 2 * BYTES, "x and y go in once");
        assert_eq!(counted.bytes_from_device, BYTES, "y comes back once");
        assert_eq!(
            (counted.copies_to_device, counted.copies_from_device),
            (2, 1)
        );
        assert_eq!((counted.maps, counted.unmaps), (2, 2));
        assert_eq!(counted.present_hits, 50, "the plain &x launches");
        assert_eq!(counted.launches, 100);
        assert_eq!(gpu.live_allocations(), 0);
        // Every launch saw the region's device copies.
        let addresses: Vec<(u64, u64)> = gpu
            .launches
            .lock()
            .unwrap()
            .iter()
            // SAFETY: parameters 1 and 3 are the words of x's and y's addresses.
            .map(|args| unsafe { (args.read::<u64>(1), args.read::<u64>(3)) })
            .collect();
        assert!(addresses.windows(2).all(|w| w[0] == w[1]), "{addresses:?}");
    }

    #[test]
    fn without_a_region_every_launch_moves_the_arrays() {
        // Under Miri a few launches: each repeats the same code (about 4 s of interpretation).
        const LAUNCHES: u64 = if cfg!(miri) { 3 } else { 100 };
        let (gpu, device) = mock(1 << 20);
        let x = vec![1.0f32; N];
        let mut y = vec![2.0f32; N];
        let counted = moved(|| {
            for _ in 0..LAUNCHES {
                saxpy(&device, 2.0, &x, &mut y).unwrap();
            }
        });
        assert_eq!(counted.bytes_to_device, LAUNCHES * 2 * BYTES);
        assert_eq!(counted.bytes_from_device, LAUNCHES * BYTES);
        assert_eq!((counted.maps, counted.unmaps), (2 * LAUNCHES, 2 * LAUNCHES));
        // `from` skips the copy in, `alloc` both copies.
        let counted = moved(|| saxpy(&device, 2.0, &x, from(&mut y)).unwrap());
        assert_eq!(
            (counted.bytes_to_device, counted.bytes_from_device),
            (BYTES, BYTES)
        );
        let counted = moved(|| saxpy(&device, 2.0, to(&x), alloc(&mut y)).unwrap());
        assert_eq!(
            (counted.bytes_to_device, counted.bytes_from_device),
            (BYTES, 0)
        );
        assert_eq!(gpu.live_allocations(), 0);
    }

    #[test]
    fn nested_regions_raise_counts_and_move_nothing() {
        let (gpu, device) = mock(1 << 20);
        let x = vec![1.0f32; N];
        let mut y = vec![2.0f32; N];
        region_on(&device, |outer| {
            let _xd = outer.to(&x)?;
            let mut yd = outer.from(&mut y)?;
            let inner = moved(|| {
                region_on(&device, |inner| {
                    let x_again = inner.to(&x)?;
                    let first_half = inner.present(&x[..N / 2])?;
                    assert_eq!(first_half.len(), N / 2);
                    saxpy(&device, 1.0, &x_again, &mut yd)
                })
                .unwrap()
            });
            assert_eq!(inner.bytes_to_device + inner.bytes_from_device, 0);
            assert_eq!((inner.maps, inner.unmaps, inner.present_hits), (0, 0, 2));
            assert_eq!(
                gpu.live_allocations(),
                2,
                "still mapped by the outer region"
            );
            Ok(())
        })
        .unwrap();
        assert_eq!(gpu.live_allocations(), 0);
    }

    #[test]
    fn partial_overlap_and_absent_present_data_are_errors() {
        let (gpu, device) = mock(1 << 20);
        let x = vec![1.0f32; N];
        let mut y = vec![0.0f32; N];
        let result = region_on(&device, |r| {
            let _head = r.to(&x[..N / 2])?;
            match r.to(&x[N / 4..]) {
                Err(Error::MapOverlap {
                    bytes,
                    mapped_bytes,
                    ..
                }) => {
                    assert_eq!((bytes, mapped_bytes), (3 * N, 2 * N));
                }
                other => panic!("expected MapOverlap, got {:?}", other.map(|m| m.len())),
            }
            // A launch argument overlapping a map is the same error.
            let e = saxpy(&device, 1.0, &x[N / 4..], &mut y).unwrap_err();
            assert!(matches!(e, Error::MapOverlap { .. }), "{e}");
            let e = saxpy(&device, 1.0, present(&x[N / 2..]), &mut y).unwrap_err();
            assert!(matches!(e, Error::NotPresent { .. }), "{e}");
            saxpy(&device, 1.0, present(&x[..N / 4]), &mut y)?;
            r.present(&y).map(drop)
        });
        assert!(matches!(result, Err(Error::NotPresent { .. })));
        assert_eq!(gpu.live_allocations(), 0, "an error releases every map");
    }

    #[test]
    fn out_of_memory_while_mapping_releases_everything_and_leaves_host_data() {
        let (gpu, device) = mock(N * 4);
        let x = vec![1.0f32; N];
        let mut big = vec![3.0f32; N + 1];
        let e = saxpy(&device, 1.0, &x, &mut big).unwrap_err();
        assert!(matches!(e, Error::OutOfMemory { .. }), "{e}");
        assert_eq!(gpu.live_allocations(), 0, "x's copy was released");
        assert!(big.iter().all(|&v| v == 3.0));
        let mut y = vec![5.0f32; N];
        let result = region_on(&device, |r| {
            let mut yd = r.tofrom(&mut y)?;
            yd.update_to(|host| host.fill(7.0))?;
            r.to(&big)?;
            Ok(())
        });
        assert!(matches!(result, Err(Error::OutOfMemory { .. })));
        assert_eq!(gpu.live_allocations(), 0);
        assert!(
            y.iter().all(|&v| v == 7.0),
            "no copy back from a failed region"
        );
    }

    #[test]
    fn region_copies_back_at_exit_and_updates_on_request() {
        let (gpu, device) = mock(1 << 20);
        let mut y = vec![1.0f32; 4];
        region_on(&device, |r| {
            let mut yd = r.tofrom(&mut y)?;
            saxpy(&device, 0.0, &[0.0f32; 4], &mut yd)?;
            // Write y's device copy behind the mock's back, as a kernel would.
            // SAFETY: parameter 3 is the word of y's address.
            let addr = unsafe { gpu.launches.lock().unwrap()[0].read::<u64>(3) };
            assert_eq!(
                gpu.read(DevicePtr(addr), 16),
                1.0f32.to_ne_bytes().repeat(4)
            );
            let bytes = 9.0f32.to_ne_bytes().repeat(4);
            // SAFETY: `addr` is the mapped copy of y, 16 bytes.
            unsafe { gpu.copy_to_device(DevicePtr(addr), bytes.as_ptr(), 16)? };
            assert_eq!(yd.update_from()?, &[9.0; 4]);
            Ok(())
        })
        .unwrap();
        assert_eq!(y, [9.0; 4]);
        assert_eq!(gpu.live_allocations(), 0);
    }

    #[test]
    fn the_trace_reports_bytes_sent_again_unchanged() {
        let (_gpu, device) = mock(1 << 20);
        crate::mapping::trace::enable();
        let mut x = vec![1.0f32; N];
        let mut y = vec![0.0f32; N];
        let counted = moved(|| {
            saxpy(&device, 2.0, &x, from(&mut y)).unwrap();
            saxpy(&device, 2.0, &x, from(&mut y)).unwrap();
            x[7] = 3.0;
            saxpy(&device, 2.0, &x, from(&mut y)).unwrap();
            // y came back from the device: sending it unchanged is redundant too.
            saxpy(&device, 2.0, &y, from(&mut x)).unwrap();
        });
        assert_eq!(counted.redundant_copies, 2);
    }

    #[test]
    fn device_vecs_pass_as_they_are_and_round_trip() {
        let (gpu, device) = mock(1 << 20);
        let mut v = crate::DeviceVec::from_slice(&device, &[1u32, 2, 3]).unwrap();
        let counted = moved(|| {
            let mut args = [KernelArg::value(&1.0f32), (&v).into_kernel_arg()];
            launch(&SAXPY, Launch::on(&device), &mut args).unwrap();
        });
        assert_eq!(counted.bytes_to_device + counted.bytes_from_device, 0);
        v.copy_from_host(&[4, 5, 6]).unwrap();
        assert_eq!(v.to_vec().unwrap(), [4, 5, 6]);
        // Part of it, at an element offset of the device allocation.
        v.copy_from_host_at(1, &[9, 8]).unwrap();
        let mut tail = [0; 2];
        v.copy_to_host_at(1, &mut tail).unwrap();
        assert_eq!((v.to_vec().unwrap(), tail), (vec![4, 9, 8], [9, 8]));
        assert!(matches!(
            v.copy_to_host_at(2, &mut tail),
            Err(Error::OutOfRange {
                start: 2,
                end: 4,
                len: 3,
                ..
            })
        ));
        assert!(matches!(
            v.copy_from_host(&[1]),
            Err(Error::LengthMismatch {
                expected: 3,
                found: 1,
                ..
            })
        ));
        let (_, other) = mock(1 << 20);
        let mut y = [0.0f32; 3];
        let e = {
            let mut args = [(&mut y).into_kernel_arg(), (&v).into_kernel_arg()];
            launch(&SAXPY, Launch::on(&other), &mut args).unwrap_err()
        };
        assert!(matches!(e, Error::WrongDevice { .. }), "{e}");
        drop(v);
        assert_eq!(gpu.live_allocations(), 0);
    }
}
