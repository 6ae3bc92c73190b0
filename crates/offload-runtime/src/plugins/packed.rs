//! A launch's parameters packed into one buffer laid out like a C struct of the kernel entry's
//! parameters (each at the next multiple of its alignment): what liboffload's `olLaunchKernel`
//! takes, what the CUDA plugin hands the driver one parameter at a time, and what a kernel's host
//! build reads its parameters from on the host CPU. Each parameter's size, and whether it is a
//! device address, are kept too: OpenCL sets each argument by itself, an address with its own
//! call (`clSetKernelArgMemPointerINTEL`).

use std::cell::Cell;
use std::mem::{align_of, size_of, take, MaybeUninit};

/// The packed parameters of one launch, with where each one starts, its size and kind.
#[derive(Clone, Debug, Default)]
pub struct PackedArgs {
    /// Padding inside by-value structs may be uninitialised, as in the values themselves.
    bytes: Vec<MaybeUninit<u8>>,
    params: Vec<Param>,
}

/// One parameter of a [`PackedArgs`]: its size and kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// Where it starts in the buffer.
    pub offset: usize,
    /// Its bytes.
    pub size: usize,
    /// Whether it is a device address (a 64-bit word pushed by [`PackedArgs::push_address`]).
    pub address: bool,
}

/// Buffers a dropped `PackedArgs` leaves for the next one on its thread, up to this many bytes:
/// a launch then allocates nothing for its parameters.
const SPARE_BYTES: usize = 4096;

/// The two buffers of a `PackedArgs`: bytes and parameters.
type Buffers = (Vec<MaybeUninit<u8>>, Vec<Param>);

thread_local! {
    static SPARE: Cell<Option<Buffers>> = const { Cell::new(None) };
}

impl PackedArgs {
    /// Room for `params` parameters of 8 bytes.
    pub fn with_capacity(params: usize) -> Self {
        let (mut bytes, mut list) = SPARE
            .try_with(Cell::take)
            .ok()
            .flatten()
            .unwrap_or_default();
        bytes.reserve(params * 8);
        list.reserve(params);
        PackedArgs {
            bytes,
            params: list,
        }
    }

    /// Empty, keeping the buffers' room for the next launch's parameters.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.params.clear();
    }

    /// Append a parameter: the `size` bytes at `value`, at the next multiple of `align` (a power
    /// of two).
    ///
    /// # Safety
    /// `value..value + size` is readable (padding bytes in it may be uninitialised).
    pub unsafe fn push_raw(&mut self, value: *const u8, size: usize, align: usize) {
        debug_assert!(align.is_power_of_two());
        // SAFETY: per the contract.
        unsafe { self.append(value, size, align, false) }
    }

    /// Append a parameter holding `value`.
    pub fn push<T: Copy>(&mut self, value: &T) {
        // SAFETY: a live `T` is readable.
        unsafe {
            self.push_raw(
                value as *const T as *const u8,
                size_of::<T>(),
                align_of::<T>(),
            )
        }
    }

    /// Append a 64-bit word that is not an address: a slice length or extent.
    pub fn push_word(&mut self, word: u64) {
        // SAFETY: a live word is readable.
        unsafe { self.append(&word as *const u64 as *const u8, 8, 8, false) }
    }

    /// Append a device address (a 64-bit word; 0 for an empty slice).
    pub fn push_address(&mut self, address: u64) {
        // SAFETY: as above.
        unsafe { self.append(&address as *const u64 as *const u8, 8, 8, true) }
    }

    /// Append the `size` bytes at `value` at the next multiple of `align` (a power of two: a
    /// mask, not a division), zeroing the padding before them, and note the parameter.
    ///
    /// # Safety
    /// `value..value + size` is readable, outside the buffer.
    unsafe fn append(&mut self, value: *const u8, size: usize, align: usize, address: bool) {
        let len = self.bytes.len();
        let offset = (len + align - 1) & !(align - 1);
        self.bytes.reserve(offset + size - len);
        // SAFETY: the buffer has room for `offset + size` bytes (reserved above); the padding is
        // zeroed and `value`'s bytes copied (they may be uninitialised padding of a struct,
        // which `MaybeUninit` holds) before the length covers them.
        unsafe {
            let base = self.bytes.as_mut_ptr();
            if offset > len {
                std::ptr::write_bytes(base.add(len), 0, offset - len);
            }
            std::ptr::copy_nonoverlapping(value as *const MaybeUninit<u8>, base.add(offset), size);
            self.bytes.set_len(offset + size);
        }
        self.params.push(Param {
            offset,
            size,
            address,
        });
    }

    /// Overwrite the `size` bytes at `offset`, inside the buffer, with those at `value`: a launch
    /// prepared once writes its arguments over the last launch's, laid out alike.
    ///
    /// # Safety
    /// `value..value + size` is readable, outside the buffer.
    pub(crate) unsafe fn write_at(&mut self, offset: usize, value: *const u8, size: usize) {
        assert!(
            offset + size <= self.bytes.len(),
            "a write past the packed parameters"
        );
        // SAFETY: inside the buffer (checked above); `value` is readable per the contract.
        unsafe {
            let at = self.bytes.as_mut_ptr().add(offset);
            std::ptr::copy_nonoverlapping(value as *const MaybeUninit<u8>, at, size);
        }
    }

    /// `write_at` for `N` bytes known when compiling: a load and a store, where the compiler
    /// makes a `memcpy` call of `write_at`s of different constant sizes merged into one.
    ///
    /// # Safety
    /// `value..value + N` is readable, outside the buffer.
    pub(crate) unsafe fn write_array_at<const N: usize>(
        &mut self,
        offset: usize,
        value: *const u8,
    ) {
        assert!(
            offset + N <= self.bytes.len(),
            "a write past the packed parameters"
        );
        // SAFETY: inside the buffer (checked above); `value` is readable per the contract.
        unsafe {
            let bytes = (value as *const [u8; N]).read_unaligned();
            let at = self.bytes.as_mut_ptr().add(offset) as *mut [u8; N];
            at.write_unaligned(bytes);
        }
    }

    /// The start of the buffer.
    pub fn as_ptr(&self) -> *const u8 {
        self.bytes.as_ptr() as *const u8
    }

    /// Bytes in the buffer: the end of the last parameter, with no padding after it.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// Each parameter: where it starts, its size, and whether it is a device address.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Parameter `index` as a `T`.
    ///
    /// # Safety
    /// The parameter was pushed from a valid `T`.
    pub unsafe fn read<T: Copy>(&self, index: usize) -> T {
        let start = self.params[index].offset;
        let bytes = &self.bytes[start..start + size_of::<T>()];
        // SAFETY: `bytes` holds the bytes of a valid `T` (the contract), read without assuming
        // alignment.
        unsafe { (bytes.as_ptr() as *const T).read_unaligned() }
    }

    /// Parameter `index`, a word holding a host address, as a pointer (on the host CPU device
    /// addresses are host addresses).
    ///
    /// # Safety
    /// The parameter was pushed by `push_address`.
    pub unsafe fn host_pointer<T>(&self, index: usize) -> *mut T {
        // SAFETY: per the contract.
        unsafe { self.read::<u64>(index) as usize as *mut T }
    }
}

impl Drop for PackedArgs {
    fn drop(&mut self) {
        if self.bytes.capacity() > SPARE_BYTES {
            return;
        }
        let (mut bytes, mut params) = (take(&mut self.bytes), take(&mut self.params));
        bytes.clear();
        params.clear();
        // During the thread's teardown there is no one left to reuse them.
        let _ = SPARE.try_with(|spare| spare.set(Some((bytes, params))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_sit_at_their_alignment_like_a_c_struct() {
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[repr(C)]
        struct Padded {
            a: u8,
            b: f64,
        }
        let padded = Padded { a: 7, b: -1.5 };
        let mut args = PackedArgs::with_capacity(4);
        args.push(&3u8);
        args.push_address(0xdead_beef_0000);
        args.push(&padded);
        args.push(&2.5f32);
        let params: Vec<(usize, usize, bool)> = args
            .params()
            .iter()
            .map(|p| (p.offset, p.size, p.address))
            .collect();
        assert_eq!(
            params,
            [(0, 1, false), (8, 8, true), (16, 16, false), (32, 4, false)]
        );
        // The end of the last parameter, not a C struct's size (40, a multiple of its 8-byte
        // alignment): what liboffload's AMDGPU plugin copies into the kernarg segment.
        assert_eq!(args.size(), 36);
        // SAFETY: each parameter was pushed from a value of the type read.
        unsafe {
            assert_eq!(args.read::<u8>(0), 3);
            assert_eq!(args.read::<u64>(1), 0xdead_beef_0000);
            assert_eq!(args.read::<Padded>(2), padded);
            assert_eq!(args.read::<f32>(3), 2.5);
        }
    }
}
