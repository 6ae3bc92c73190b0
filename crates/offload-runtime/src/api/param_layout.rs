//! The packed parameters of a launch on a stream, kept from one launch to the next with their
//! layout: in a launch prepared once (`crate::api::prepared_enqueue`), or in the launch kept per thread
//! for the generic `enqueue` (`crate::api::prepared`). Where each argument's bytes go depends only on
//! the arguments' kinds: a value's size and alignment, a slice's count of extents (a slice is its
//! address, its length and its extents). A kernel's generated `enqueue` and `Prepared::enqueue`
//! pass the same kinds every time, so after the first launch each one writes its values and device
//! data over the last one's in place instead of laying the parameters out again. Arguments of other
//! kinds, and host data (which needs a place on the device), are packed anew.

use crate::mapping::device::{check_resident, Device};
use crate::mapping::kernel::{ArgData, KernelArg};
use crate::mapping::transfer::{pack_into, HostData};
use crate::plugins::{DevicePtr, PackedArgs};
use crate::Result;

/// What decides an argument's place among the packed parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Value { size: usize, align: usize },
    Slice { extents: usize },
}

impl Kind {
    fn of(arg: &KernelArg<'_>) -> Self {
        match arg.data {
            ArgData::Value { size, align, .. } => Kind::Value { size, align },
            _ => Kind::Slice {
                extents: arg.extents.len(),
            },
        }
    }

    /// The parameters it packs into.
    fn params(self) -> usize {
        match self {
            Kind::Value { .. } => 1,
            Kind::Slice { extents } => 2 + extents,
        }
    }
}

/// A launch's packed parameters and the layout they were packed in: each argument's kind and
/// the offset of its first byte.
#[derive(Default)]
pub(crate) struct KeptParams {
    params: PackedArgs,
    /// Empty until a launch packed them, and while a packing that lays them out anew runs.
    layout: Vec<(Kind, usize)>,
}

impl KeptParams {
    /// The parameters the last [`KeptParams::pack`] packed.
    pub(crate) fn params(&self) -> &PackedArgs {
        &self.params
    }

    /// Pack `args` of `kernel` for `device` as `transfer::pack` does (same parameters, same
    /// errors, `place` called alike): over the last launch's when the arguments are values and
    /// device data of the last launch's kinds, else laid out anew. The count of device-resident
    /// arguments. Inlined, so that a launch that writes over the last one's parameters does not
    /// build `place`.
    #[inline]
    pub(crate) fn pack(
        &mut self,
        device: &Device,
        kernel: &'static str,
        args: &[KernelArg<'_>],
        blocks: u64,
        place: impl FnMut(HostData) -> Result<DevicePtr>,
    ) -> Result<usize> {
        if let Some(written) = self.write_over(device, kernel, args) {
            return written;
        }
        // A packing that fails half-way leaves no layout to write over.
        self.layout.clear();
        self.params.clear();
        let resident = pack_into(&mut self.params, device, kernel, args, blocks, place)?;
        let offsets = self.params.params();
        let mut first = 0;
        for arg in args {
            let kind = Kind::of(arg);
            self.layout.push((kind, offsets[first].offset));
            first += kind.params();
        }
        Ok(resident)
    }

    /// Write `args` over the last launch's parameters, in its layout, as `pack_into` would pack
    /// them (with its errors, in its order); `None` when an argument is not a value or device
    /// data of the kind the layout has for it (nothing is kept before the first launch).
    #[inline]
    fn write_over(
        &mut self,
        device: &Device,
        kernel: &'static str,
        args: &[KernelArg<'_>],
    ) -> Option<Result<usize>> {
        if self.layout.len() != args.len() {
            return None;
        }
        let params = &mut self.params;
        let mut resident = 0;
        let word = |w: &u64| w as *const u64 as *const u8;
        for (arg, &(kind, at)) in args.iter().zip(&self.layout) {
            match arg.data {
                ArgData::Value { ptr, size, align } if kind == (Kind::Value { size, align }) => {
                    // SAFETY: a `DeviceCopy` value of `size` bytes, borrowed for the launch;
                    // the common sizes get a copy of known size.
                    unsafe {
                        match size {
                            4 => params.write_array_at::<4>(at, ptr),
                            8 => params.write_array_at::<8>(at, ptr),
                            _ => params.write_at(at, ptr, size),
                        }
                    }
                }
                ArgData::Resident {
                    device: on,
                    addr,
                    len,
                    ..
                } if kind
                    == (Kind::Slice {
                        extents: arg.extents.len(),
                    }) =>
                {
                    if let Err(e) = check_resident(kernel, device, on) {
                        return Some(Err(e));
                    }
                    resident += 1;
                    // SAFETY: live words are readable; a slice's words follow one another.
                    unsafe {
                        params.write_at(at, word(&addr), 8);
                        params.write_at(at + 8, word(&(len as u64)), 8);
                        for (i, extent) in arg.extents.iter().enumerate() {
                            params.write_at(at + 16 + 8 * i, word(extent), 8);
                        }
                    }
                }
                _ => return None,
            }
        }
        Some(Ok(resident))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::mock_kernels::mock;

    /// Each parameter's place, size and kind, and the buffer's bytes.
    fn packed(kept: &KeptParams) -> (Vec<crate::plugins::Param>, Vec<u8>) {
        let params = kept.params();
        let size = params.size();
        // SAFETY: every byte of these parameters was written (no struct padding in them).
        let bytes = unsafe { std::slice::from_raw_parts(params.as_ptr(), size) }.to_vec();
        (params.params().to_vec(), bytes)
    }

    /// Where host data goes on the device.
    fn place(_: HostData) -> Result<DevicePtr> {
        Ok(DevicePtr(0x9000))
    }

    /// Packed afresh, as the generic launch packs.
    fn fresh(device: &Device, args: &[KernelArg<'_>]) -> (Vec<crate::plugins::Param>, Vec<u8>) {
        let (params, _) = crate::mapping::transfer::pack(device, "k", args, 1, place).unwrap();
        // SAFETY: as above.
        let bytes = unsafe { std::slice::from_raw_parts(params.as_ptr(), params.size()) };
        (params.params().to_vec(), bytes.to_vec())
    }

    #[test]
    fn writing_over_the_kept_layout_gives_what_a_fresh_packing_gives() {
        let (_gpu, device) = mock();
        let id = device.id();
        let on_device = |addr, len| KernelArg::resident::<f32>(id, addr, len, false, None);
        let mut kept = KeptParams::default();
        let (a, b, c) = (3u8, 2.5f64, 9u32);
        let first = [
            KernelArg::value(&a),
            on_device(0x1000, 4).with_extents(&[2, 2]),
            KernelArg::value(&b),
        ];
        kept.pack(&device, "k", &first, 1, |_| unreachable!())
            .unwrap();
        assert_eq!(packed(&kept), fresh(&device, &first));
        // The same kinds: written in place.
        let (a, b) = (7u8, -1.0f64);
        let second = [
            KernelArg::value(&a),
            on_device(0x2000, 6).with_extents(&[3, 2]),
            KernelArg::value(&b),
        ];
        kept.pack(&device, "k", &second, 1, |_| unreachable!())
            .unwrap();
        assert_eq!(packed(&kept), fresh(&device, &second));
        // Other kinds (a u32 where a u8 was, a slice without extents): laid out anew.
        let third = [
            KernelArg::value(&c),
            on_device(0x3000, 8),
            KernelArg::value(&b),
        ];
        kept.pack(&device, "k", &third, 1, place).unwrap();
        assert_eq!(packed(&kept), fresh(&device, &third));
        // Host data where device data was, of the same kind: placed, then packed anew.
        let host = [1.0f32; 8];
        let fourth = [
            KernelArg::value(&c),
            KernelArg::slice(&host),
            KernelArg::value(&b),
        ];
        kept.pack(&device, "k", &fourth, 1, place).unwrap();
        assert_eq!(packed(&kept), fresh(&device, &fourth));
        kept.pack(&device, "k", &third, 1, place).unwrap();
        assert_eq!(packed(&kept), fresh(&device, &third));
    }

    #[test]
    fn a_packing_that_failed_half_way_is_laid_out_anew_next_time() {
        let (_gpu, device) = mock();
        let (_other_gpu, other) = mock();
        let n = 5u64;
        let on =
            |device: &Device, addr| KernelArg::resident::<f32>(device.id(), addr, 4, false, None);
        let mut kept = KeptParams::default();
        let good = [KernelArg::value(&n), on(&device, 0x1000)];
        kept.pack(&device, "k", &good, 1, |_| unreachable!())
            .unwrap();
        // Another layout, refused after its first parameter was packed.
        let refused = [KernelArg::value(&1u8), on(&other, 0x2000)];
        assert!(kept
            .pack(&device, "k", &refused, 1, |_| unreachable!())
            .is_err());
        kept.pack(&device, "k", &good, 1, |_| unreachable!())
            .unwrap();
        assert_eq!(packed(&kept), fresh(&device, &good));
    }
}
