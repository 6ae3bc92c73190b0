//! Launch arguments that share device memory, refused when one of them is written. Read-only
//! slice parameters reach the kernel as `noalias` read-only pointers (loads through the
//! non-coherent cache), so a kernel could read stale bytes that another argument writes, and two
//! writers of the same bytes race. Host borrows cannot overlap that way; `Copy` handles to device
//! memory (a stream scope's `DeviceSlice`) can, so device-resident arguments are compared here.

use crate::mapping::kernel::{ArgData, Kernel, KernelArg};
use crate::plugins::error::{Error, Result};
use std::ops::Range;

/// The device, byte range and writability of a device-resident argument with bytes.
fn device_bytes(data: &ArgData) -> Option<(usize, Range<u64>, bool)> {
    match *data {
        ArgData::Resident {
            device,
            addr,
            len,
            elem_size,
            writable,
        } if len * elem_size > 0 => Some((device, addr..addr + (len * elem_size) as u64, writable)),
        _ => None,
    }
}

/// Refuses `args` when a written device range overlaps another argument's range on the same
/// device, naming both parameters. Quadratic in the arguments, which are a handful.
pub(crate) fn check_disjoint(kernel: &'static Kernel, args: &[KernelArg<'_>]) -> Result<()> {
    for (i, first) in args.iter().enumerate() {
        let Some((device, range, writes)) = device_bytes(&first.data) else {
            continue;
        };
        for (j, second) in args.iter().enumerate().skip(i + 1) {
            let Some((other_device, other, other_writes)) = device_bytes(&second.data) else {
                continue;
            };
            let overlap = range.start < other.end && other.start < range.end;
            if device != other_device || !overlap || !(writes || other_writes) {
                continue;
            }
            return Err(shared(kernel, (i, writes), (j, other_writes)));
        }
    }
    Ok(())
}

/// The error of the `i`th and `j`th arguments of a launch of `kernel`, which share device
/// memory that one of them writes (whether each writes it beside it). Out of line: the check
/// of every launch does not build it.
#[cold]
fn shared(
    kernel: &'static Kernel,
    (i, writes): (usize, bool),
    (j, other_writes): (usize, bool),
) -> Error {
    let name = |i: usize| kernel.params.get(i).copied().unwrap_or("?");
    let other_name = name(j);
    let reason = match (writes, other_writes) {
        (true, true) => format!(
            "and `{other_name}` are both written and share device memory: one launch \
             cannot write the same device data through two parameters"
        ),
        (true, false) => format!(
            "is written and shares device memory with `{other_name}`, which the kernel \
             reads as read-only data: pass separate device data"
        ),
        _ => format!(
            "is read as read-only data and shares device memory with `{other_name}`, \
             which the kernel writes: pass separate device data"
        ),
    };
    Error::InvalidArgument {
        kernel: kernel.name,
        argument: name(i),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::mock_kernels::kernel_of;
    use crate::plugins::image::ImageSet;

    static NO_IMAGES: ImageSet = ImageSet {
        images: &[],
        kernels: &[],
        unavailable: None,
    };
    static COPY: Kernel = kernel_of("copy", &NO_IMAGES, &["n", "x", "y"]);

    /// `len` floats at `addr` on device 1.
    fn floats<'a>(addr: u64, len: usize, writable: bool) -> KernelArg<'a> {
        KernelArg::resident::<f32>(1, addr, len, writable, None)
    }

    fn refusal(args: &[KernelArg<'_>]) -> (&'static str, String) {
        match check_disjoint(&COPY, args) {
            Err(Error::InvalidArgument {
                kernel: "copy",
                argument,
                reason,
            }) => (argument, reason),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn a_written_range_overlapping_another_is_refused_naming_both() {
        let n = 4u32;
        // y's first float is x's last.
        let (argument, reason) = refusal(&[
            KernelArg::value(&n),
            floats(0x1000, 4, false),
            floats(0x100c, 4, true),
        ]);
        assert_eq!(argument, "x");
        assert!(reason.contains("`y`, which the kernel writes"), "{reason}");
        let (argument, reason) = refusal(&[
            KernelArg::value(&n),
            floats(0x1000, 4, true),
            floats(0x1000, 4, true),
        ]);
        assert_eq!(argument, "x");
        assert!(reason.contains("`y` are both written"), "{reason}");
        let (_, reason) = refusal(&[
            KernelArg::value(&n),
            floats(0x1000, 8, true),
            floats(0x1004, 1, false),
        ]);
        assert!(reason.contains("`y`, which the kernel reads"), "{reason}");
    }

    #[test]
    fn disjoint_read_only_empty_or_other_device_ranges_pass() {
        let n = 4u32;
        let ok = |x: KernelArg<'_>, y: KernelArg<'_>| {
            check_disjoint(&COPY, &[KernelArg::value(&n), x, y]).is_ok()
        };
        assert!(
            ok(floats(0x1000, 4, false), floats(0x1010, 4, true)),
            "adjacent"
        );
        assert!(
            ok(floats(0x1000, 4, false), floats(0x1000, 4, false)),
            "both read"
        );
        assert!(
            ok(floats(0x1000, 0, true), floats(0x1000, 4, true)),
            "empty"
        );
        let elsewhere = KernelArg::resident::<f32>(2, 0x1000, 4, true, None);
        assert!(ok(floats(0x1000, 4, true), elsewhere), "another device");
    }
}
