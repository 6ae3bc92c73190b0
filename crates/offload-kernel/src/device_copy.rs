/// A type whose bytes mean the same on the device as on the host, so it may be copied to a GPU
/// and passed to a kernel by value or in a slice.
///
/// # Safety
/// Implement it only for types that are `#[repr(C)]` (or primitive), hold no pointers or
/// references (a host address is meaningless on the device) and no interior mutability, and
/// for which every bit pattern the kernel may write is a valid value, all-zero bytes included
/// (device scratch of `from`/`alloc` maps and `DeviceVec::zeroed` starts zeroed). `#[derive(DeviceCopy)]`
/// checks the first and second points field by field.
pub unsafe trait DeviceCopy: Copy + Send + Sync + 'static {}

macro_rules! device_copy_primitives {
    // SAFETY: primitives hold no pointers, and every bit pattern of the numbers is valid. A
    // kernel writes a `bool` only as a `bool`, so its bytes stay 0 or 1.
    ($($t:ty),* $(,)?) => { $(unsafe impl DeviceCopy for $t {})* };
}
device_copy_primitives!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    bool,
    ()
);

// SAFETY: half precision from the `half` crate (no_std): plain 16-bit values, every bit pattern
// valid, arithmetic through f32.
unsafe impl DeviceCopy for half::f16 {}
// SAFETY: as for f16.
unsafe impl DeviceCopy for half::bf16 {}

// SAFETY: an array is laid out as its elements, which are DeviceCopy.
unsafe impl<T: DeviceCopy, const N: usize> DeviceCopy for [T; N] {}
