//! A launch on a stream prepared once ([`prepare`], which each kernel's generated `prepare` calls):
//! its kernel, stream and settings are fixed, so the kernel's entry is found and its shape chosen
//! and checked when it is prepared. Each [`PreparedEnqueue::enqueue`] then checks only what
//! depends on its arguments, as the generic `enqueue` does: refused arguments, written device
//! memory shared between arguments, each argument's device, the element count a default grid is
//! sized from (sized anew when it changes); it writes them over the last launch's parameters in
//! the handle's own buffer, whose layout it keeps (`crate::api::param_layout`), orders device data
//! across streams and queues the kernel. What it skips per launch: the kept-launch lookup
//! (`crate::api::prepared`), the launch's device check, laying the parameters out, the thread's spare
//! parameter buffer, and the lock of the stream's kernel list while the list still holds its
//! kernel.
//!
//! The handle keeps the entry of the code its device had loaded when it was prepared: once
//! `Device::release` renewed the device's code generation (see `crate::api::prepared`), it refuses to
//! launch with `Err(Released)`.

use crate::api::launch::{check_arguments, Launch};
use crate::api::prepared::KeptLaunch;
use crate::api::stream::Stream;
use crate::mapping::kernel::{Kernel, KernelArg};
use crate::{Error, Result};

/// A launch of one kernel on one stream with fixed settings, from [`prepare`].
pub struct PreparedEnqueue<'s> {
    stream: Stream<'s>,
    kernel: &'static Kernel,
    /// The settings, without the device (the stream's).
    launch: Launch<'static>,
    /// The generation of the device's code that `kept`'s entry belongs to.
    code: u64,
    /// What `kept`'s shape was sized for (`Launch::items_of`).
    items: (u64, u64),
    /// The entry, shape and last parameters, as a launch kept per thread has them.
    kept: KeptLaunch,
}

/// Prepare launches of `kernel` on `stream` as `launch` says: its entry loaded, its shape chosen
/// and checked (a default grid is sized again at each launch whose element count differs).
/// `Err` as the first launch would give it for a bad shape or a missing image; a launch naming
/// another device than the stream's is refused.
///
/// On a running stream only (`Stream<'s, Runs>`, refused while it records a graph, as `enqueue`
/// on it is): a handle of the stream that `record_graph` gives its body would outlive that body,
/// and could add launches to a later recording whose graph outlives their arguments' borrows.
pub fn prepare<'s>(
    kernel: &'static Kernel,
    stream: &Stream<'s>,
    launch: Launch<'_>,
) -> Result<PreparedEnqueue<'s>> {
    let device = stream.check_launch_device(kernel, &launch)?;
    let launch = launch.settings();
    let code = device.code_generation();
    // A default grid for one element until the arguments say otherwise.
    let items = launch.items_of(&[]);
    let kept = KeptLaunch::new(launch.prepare(kernel, device, items)?);
    Ok(PreparedEnqueue {
        stream: stream.another(),
        kernel,
        launch,
        code,
        items,
        kept,
    })
}

impl PreparedEnqueue<'_> {
    /// Queue the kernel with `args` (what the generated `Prepared::enqueue` calls): as the
    /// generic `enqueue`, with the same checks of the arguments and the same errors.
    pub fn enqueue(&mut self, args: &[KernelArg<'_>]) -> Result<()> {
        let device = self.stream.device();
        if device.code_generation() != self.code {
            return Err(Error::Released {
                device: device.name().to_string(),
            });
        }
        check_arguments(self.kernel, args)?;
        let items = self.launch.items_of(args);
        if items != self.items {
            let shape = self.launch.shape_on(self.kernel, device, items)?;
            let shape = self
                .launch
                .fit_entry(self.kernel, device, shape, &self.kept.entry)?;
            (self.kept.shape, self.items) = (shape, items);
        }
        self.stream.queue_kernel(self.kernel, &mut self.kept, args)
    }
}

/// Prepared launches on the mock GPU: what they pass and order, and what they refuse.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::map::{InArg, OutArg};
    use crate::mapping::mock_kernels::{kernel, mock, record, FILL, GOOD};
    use crate::{scope, DeviceSlice};
    use offload_kernel::Dim3;
    use std::sync::atomic::Ordering::Relaxed;

    /// `x` read, `y` written.
    static COPY: Kernel = Kernel {
        params: &["x", "y"],
        ..kernel("fill", &GOOD)
    };

    fn fill_args(out: DeviceSlice<'_, u32>) -> [KernelArg<'_>; 2] {
        [KernelArg::value(&7u32), OutArg::into_kernel_arg(out)]
    }

    fn copy_args<'a>(x: DeviceSlice<'a, u32>, y: DeviceSlice<'a, u32>) -> [KernelArg<'a>; 2] {
        [InArg::into_kernel_arg(x), OutArg::into_kernel_arg(y)]
    }

    /// A launch's parameters: their layout and fill's three words (value, address, length).
    fn fill_params(
        args: &crate::plugins::PackedArgs,
    ) -> (Vec<crate::plugins::Param>, u32, u64, u64) {
        // SAFETY: packed from fill's arguments: a u32, then a slice's address and length.
        unsafe {
            let words = (args.read::<u32>(0), args.read::<u64>(1), args.read(2));
            (args.params().to_vec(), words.0, words.1, words.2)
        }
    }

    #[test]
    fn a_prepared_launch_passes_what_enqueue_passes_and_waits_across_streams() {
        let (gpu, device) = mock();
        scope(|s| {
            let (a, b) = (s.stream(&device)?, s.stream(&device)?);
            let out = a.alloc_zeroed::<u32>(8)?;
            let (mut on_a, mut on_b) = (
                prepare(&FILL, &a, Launch::auto())?,
                prepare(&FILL, &b, Launch::on(&device))?,
            );
            crate::api::stream::enqueue(&FILL, &a, Launch::auto(), &fill_args(out))?;
            on_a.enqueue(&fill_args(out))?;
            on_a.enqueue(&fill_args(out))?;
            assert_eq!(gpu.events.load(Relaxed), 0, "one stream waits for nothing");
            on_b.enqueue(&fill_args(out))?;
            assert_eq!(gpu.events.load(Relaxed), 1, "b waits for a's write");
            on_a.enqueue(&fill_args(out))?;
            assert_eq!(gpu.events.load(Relaxed), 2, "a waits for b's write");
            Ok(())
        })
        .unwrap();
        let launches = gpu.launches.lock().unwrap();
        assert_eq!(launches.len(), 5);
        let generic = fill_params(&launches[0]);
        assert_eq!((generic.1, generic.3), (7, 8));
        for prepared in &launches[1..] {
            assert_eq!(fill_params(prepared), generic);
        }
    }

    #[test]
    fn a_default_grid_is_sized_for_each_element_count_as_enqueue_sizes_it() {
        let (_gpu, device) = mock();
        let grid = || crate::last_launch().unwrap().grid.unwrap();
        scope(|s| {
            let a = s.stream(&device)?;
            let (small, large) = (a.alloc_zeroed::<u32>(8)?, a.alloc_zeroed::<u32>(1 << 16)?);
            let mut prepared = prepare(&FILL, &a, Launch::auto())?;
            for out in [small, large, small] {
                crate::api::stream::enqueue(&FILL, &a, Launch::auto(), &fill_args(out))?;
                let generic = grid();
                prepared.enqueue(&fill_args(out))?;
                assert_eq!(grid(), generic, "{} elements", out.len());
            }
            let mut given = prepare(&FILL, &a, Launch::auto().grid(3))?;
            given.enqueue(&fill_args(large))?;
            assert_eq!(grid(), Dim3::new(3, 1, 1));
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn bad_arguments_and_settings_are_refused_before_anything_is_queued() {
        let (gpu, device) = mock();
        let (_other_gpu, other) = mock();
        scope(|s| {
            let (a, elsewhere) = (s.stream(&device)?, s.stream(&other)?);
            let (x, y) = (a.alloc_zeroed::<u32>(8)?, a.alloc_zeroed::<u32>(8)?);
            let mut copy = prepare(&COPY, &a, Launch::auto())?;
            match copy.enqueue(&copy_args(y.slice(4..8)?, y)) {
                Err(Error::InvalidArgument {
                    kernel,
                    argument,
                    reason,
                }) => {
                    assert_eq!((kernel, argument), ("fill", "x"));
                    assert!(reason.contains("`y`, which the kernel writes"), "{reason}");
                }
                other => panic!("expected InvalidArgument, got {other:?}"),
            }
            let foreign = elsewhere.alloc_zeroed::<u32>(8)?;
            assert!(matches!(
                copy.enqueue(&copy_args(foreign, y)),
                Err(Error::WrongDevice { kernel: "fill", .. })
            ));
            copy.enqueue(&copy_args(x, y))?;
            match prepare(&FILL, &a, Launch::on(&other)) {
                Err(Error::InvalidLaunch { reason, .. }) => {
                    assert!(reason.contains("but its stream is on"), "{reason}")
                }
                other => panic!("expected InvalidLaunch, got {:?}", other.err()),
            }
            match prepare(&FILL, &a, Launch::auto().block(1024)) {
                Err(Error::InvalidLaunch { reason, .. }) => assert_eq!(
                    reason,
                    "1024 threads per block exceeds the 512 this kernel can run with \
                     (128 registers per thread)"
                ),
                other => panic!("expected InvalidLaunch, got {:?}", other.err()),
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(
            gpu.launches.lock().unwrap().len(),
            1,
            "only the good launch"
        );
    }

    #[test]
    fn a_running_handle_is_refused_while_its_stream_records() {
        let (gpu, device) = mock();
        scope(|s| {
            let a = s.stream(&device)?;
            let out = a.alloc_zeroed::<u32>(8)?;
            let mut prepared = prepare(&FILL, &a, Launch::auto())?;
            let recorded = a.record_graph(|_| prepared.enqueue(&fill_args(out)));
            match recorded {
                Err(Error::InvalidLaunch { reason, .. }) => {
                    assert!(reason.contains("the stream is recording"), "{reason}")
                }
                other => panic!("expected InvalidLaunch, got {:?}", other.err()),
            }
            Ok(())
        })
        .unwrap();
        assert!(gpu.launches.lock().unwrap().is_empty());
    }

    /// The stream's list of kernels to check is taken by each synchronize: a handle notes its
    /// kernel again after it, so a panic in a later launch is reported.
    #[test]
    fn a_panic_in_a_prepared_launch_after_a_synchronize_is_reported() {
        let (gpu, device) = mock();
        scope(|s| {
            let a = s.stream(&device)?;
            let out = a.alloc_zeroed::<u32>(8)?;
            let mut prepared = prepare(&FILL, &a, Launch::auto())?;
            prepared.enqueue(&fill_args(out))?;
            prepared.enqueue(&fill_args(out))?;
            a.synchronize()?;
            gpu.panic_next_launch(record());
            prepared.enqueue(&fill_args(out))?;
            match a.synchronize() {
                Err(Error::KernelFailed { kernel, .. }) => assert_eq!(kernel, "fill"),
                other => panic!("expected KernelFailed, got {other:?}"),
            }
            prepared.enqueue(&fill_args(out))?;
            a.synchronize()
        })
        .unwrap();
    }

    #[test]
    fn a_handle_is_refused_once_its_device_was_released() {
        let (gpu, device) = mock();
        let queued = scope(|s| {
            let a = s.stream(&device)?;
            let out = a.alloc_zeroed::<u32>(8)?;
            let mut prepared = prepare(&FILL, &a, Launch::auto())?;
            prepared.enqueue(&fill_args(out))?;
            a.synchronize()?;
            device.release()?;
            prepared.enqueue(&fill_args(out))
        });
        assert!(matches!(queued, Err(Error::Released { .. })), "{queued:?}");
        assert_eq!(gpu.launches.lock().unwrap().len(), 1);
    }
}
