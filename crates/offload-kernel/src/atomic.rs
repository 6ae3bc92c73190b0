//! Atomic memory operations for kernels: the shared mutable access that histograms, counters and
//! global reductions need, safe because every access to an [`Atomic`] is atomic.
//!
//! A kernel parameter written `&[Atomic<T>]` is passed by the caller as `&mut [T]`: copied to the
//! device and back like any `&mut [T]`, but every thread of the launch may reach every element.
//! `T` is one of `i32`, `u32`, `i64`, `u64`, `f32` (add, min, max, exchange, compare-exchange,
//! load, store) or `f64` (add, exchange, compare-exchange, load, store).
//!
//! All operations are *relaxed*, as CUDA's `atomicAdd` and friends: each is indivisible, but they
//! order nothing else. Use a fence ([`crate::fence_device`]) to publish other writes. Integer operations are
//! `core::sync::atomic`'s (PTX `atom.add`, `atom.min`… on NVIDIA GPUs, SPIR-V `OpAtomic*` at
//! device scope); `f32`/`f64` addition is PTX `atom.add.f32`/`.f64` on nvptx, LLVM's `atomicrmw
//! fadd` on AMD GPUs and a compare-exchange loop on SPIR-V and the host, and `f32` min/max a
//! compare-exchange loop everywhere (`f32::min`/`max` semantics: a NaN operand is ignored).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicI32, AtomicI64, AtomicU32, AtomicU64, Ordering::Relaxed};

/// A `T` that any number of threads may update at once. Same size and alignment as `T`.
#[repr(transparent)]
pub struct Atomic<T> {
    value: UnsafeCell<T>,
}

// SAFETY: every access to the value goes through an atomic operation.
unsafe impl<T: Send> Sync for Atomic<T> {}

impl<T> Atomic<T> {
    /// An atomic holding `value`.
    pub const fn new(value: T) -> Self {
        Atomic {
            value: UnsafeCell::new(value),
        }
    }

    /// The value, from an atomic no thread shares any more.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }

    /// The memory behind a device-ABI slice, seen as atomics.
    ///
    /// # Safety
    /// For `len > 0`, `ptr..ptr+len` must be valid for reads and writes, aligned for the atomic
    /// type of `T`, and reached only through atomic operations for `'a`.
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn slice_from_raw<'a>(ptr: *mut T, len: usize) -> &'a [Atomic<T>] {
        if len == 0 {
            &[]
        } else {
            // SAFETY: per the contract; `Atomic<T>` is `repr(transparent)` over `T`.
            unsafe { core::slice::from_raw_parts(ptr as *const Atomic<T>, len) }
        }
    }
}

/// Integer atomics: straight `core::sync::atomic` operations, relaxed.
macro_rules! integer_atomic {
    ($t:ty, $core:ty) => {
        // The core atomic must fit the plain integer's layout for the casts below.
        const _: () = assert!(
            core::mem::align_of::<$core>() == core::mem::align_of::<$t>()
                && core::mem::size_of::<$core>() == core::mem::size_of::<$t>()
        );

        impl Atomic<$t> {
            #[inline(always)]
            fn core(&self) -> &$core {
                // SAFETY: same size and alignment (checked above), and the value is only
                // accessed atomically.
                unsafe { <$core>::from_ptr(self.value.get()) }
            }

            /// Adds `v` (wrapping) and returns the previous value.
            #[inline(always)]
            pub fn fetch_add(&self, v: $t) -> $t {
                self.core().fetch_add(v, Relaxed)
            }
            /// Stores the minimum of the value and `v`; returns the previous value.
            #[inline(always)]
            pub fn fetch_min(&self, v: $t) -> $t {
                self.core().fetch_min(v, Relaxed)
            }
            /// Stores the maximum of the value and `v`; returns the previous value.
            #[inline(always)]
            pub fn fetch_max(&self, v: $t) -> $t {
                self.core().fetch_max(v, Relaxed)
            }
            /// Stores `v` and returns the previous value.
            #[inline(always)]
            pub fn swap(&self, v: $t) -> $t {
                self.core().swap(v, Relaxed)
            }
            /// Stores `new` if the value is `current`: `Ok(previous)` if it did, else
            /// `Err(actual value)`.
            #[inline(always)]
            pub fn compare_exchange(&self, current: $t, new: $t) -> Result<$t, $t> {
                self.core().compare_exchange(current, new, Relaxed, Relaxed)
            }
            /// The value now (relaxed).
            #[inline(always)]
            pub fn load(&self) -> $t {
                self.core().load(Relaxed)
            }
            /// Replaces the value with `v` (relaxed).
            #[inline(always)]
            pub fn store(&self, v: $t) {
                self.core().store(v, Relaxed)
            }
        }
    };
}

integer_atomic!(i32, AtomicI32);
integer_atomic!(u32, AtomicU32);
integer_atomic!(i64, AtomicI64);
integer_atomic!(u64, AtomicU64);

/// Float atomics on the bits, through the unsigned core atomic of the same width.
macro_rules! float_atomic {
    ($t:ty, $bits:ty, $core:ty, $ptx_add:literal, $reg:ident, $amdgpu_add:ident $(, #[$update_cfg:meta])?) => {
        const _: () = assert!(
            core::mem::align_of::<$core>() == core::mem::align_of::<$t>()
                && core::mem::size_of::<$core>() == core::mem::size_of::<$t>()
        );

        impl Atomic<$t> {
            #[inline(always)]
            fn bits(&self) -> &$core {
                // SAFETY: same size and alignment (checked above), any bits are a valid float,
                // and the value is only accessed atomically.
                unsafe { <$core>::from_ptr(self.value.get() as *mut $bits) }
            }

            /// Replaces the value by `update(value)` atomically (a compare-exchange loop);
            /// returns the previous value.
            $(#[$update_cfg])?
            #[inline(always)]
            fn fetch_update(&self, update: impl Fn($t) -> $t) -> $t {
                let mut old = self.bits().load(Relaxed);
                loop {
                    let new = update(<$t>::from_bits(old)).to_bits();
                    match self.bits().compare_exchange_weak(old, new, Relaxed, Relaxed) {
                        Ok(previous) => return <$t>::from_bits(previous),
                        Err(actual) => old = actual,
                    }
                }
            }

            /// Adds `v` (IEEE addition, round to nearest) and returns the previous value.
            #[inline(always)]
            pub fn fetch_add(&self, v: $t) -> $t {
                #[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
                {
                    let old: $bits;
                    // SAFETY: `self` is a valid, aligned, atomically accessed float; `atom`
                    // with a generic address works for global and shared memory alike.
                    unsafe {
                        core::arch::asm!(
                            concat!($ptx_add, " {old}, [{ptr}], {v};"),
                            old = out($reg) old,
                            ptr = in(reg64) self.value.get(),
                            v = in($reg) v.to_bits(),
                            options(nostack),
                        );
                    }
                    <$t>::from_bits(old)
                }
                #[cfg(target_arch = "amdgpu")]
                // SAFETY: `self` is a valid, aligned, atomically accessed float, in global memory
                // or LDS (the flat address reaches both).
                unsafe {
                    crate::amdgpu::$amdgpu_add(self.value.get(), v)
                }
                #[cfg(not(any(all(target_arch = "nvptx64", not(feature = "spirv")), target_arch = "amdgpu")))]
                {
                    self.fetch_update(|old| old + v)
                }
            }
            /// Stores `v` and returns the previous value.
            #[inline(always)]
            pub fn swap(&self, v: $t) -> $t {
                <$t>::from_bits(self.bits().swap(v.to_bits(), Relaxed))
            }
            /// Stores `new` if the value has the bits of `current`: `Ok(previous)` if it did,
            /// else `Err(actual value)`. Compares bits, so `-0.0` is not `0.0` and a NaN can match.
            #[inline(always)]
            pub fn compare_exchange(&self, current: $t, new: $t) -> Result<$t, $t> {
                self.bits()
                    .compare_exchange(current.to_bits(), new.to_bits(), Relaxed, Relaxed)
                    .map(<$t>::from_bits)
                    .map_err(<$t>::from_bits)
            }
            /// The value now (relaxed).
            #[inline(always)]
            pub fn load(&self) -> $t {
                <$t>::from_bits(self.bits().load(Relaxed))
            }
            /// Replaces the value with `v` (relaxed).
            #[inline(always)]
            pub fn store(&self, v: $t) {
                self.bits().store(v.to_bits(), Relaxed)
            }
        }
    };
}

float_atomic!(
    f32,
    u32,
    AtomicU32,
    "atom.add.f32",
    reg32,
    __offload_amdgpu_atomic_add_f32
);
// f64 has no min/max, and nvptx and amdgcn add with an instruction: only the other targets'
// addition loops.
float_atomic!(
    f64,
    u64,
    AtomicU64,
    "atom.add.f64",
    reg64,
    __offload_amdgpu_atomic_add_f64,
    #[cfg(not(any(all(target_arch = "nvptx64", not(feature = "spirv")), target_arch = "amdgpu")))]
);

impl Atomic<f32> {
    /// Stores `f32::min(value, v)`; returns the previous value.
    #[inline(always)]
    pub fn fetch_min(&self, v: f32) -> f32 {
        self.fetch_update(|old| old.min(v))
    }
    /// Stores `f32::max(value, v)`; returns the previous value.
    #[inline(always)]
    pub fn fetch_max(&self, v: f32) -> f32 {
        self.fetch_update(|old| old.max(v))
    }
}

#[cfg(all(test, not(target_arch = "nvptx64")))]
mod tests {
    use super::*;

    #[test]
    fn operations_return_the_previous_value() {
        let a = Atomic::new(5i32);
        assert_eq!(a.fetch_add(-7), 5);
        assert_eq!(a.fetch_min(-10), -2);
        assert_eq!(a.fetch_max(3), -10);
        assert_eq!(a.swap(9), 3);
        assert_eq!(a.compare_exchange(1, 2), Err(9));
        assert_eq!(a.compare_exchange(9, 2), Ok(9));
        assert_eq!(a.into_inner(), 2);

        let f = Atomic::new(1.5f32);
        assert_eq!(f.fetch_add(2.0), 1.5);
        assert_eq!(f.fetch_min(f32::NAN), 3.5);
        assert_eq!(f.fetch_min(-1.0), 3.5);
        assert_eq!(f.fetch_max(0.25), -1.0);
        assert_eq!(f.compare_exchange(-0.0, 1.0), Err(0.25));
        assert_eq!(f.load(), 0.25);

        let d = Atomic::new(0.5f64);
        assert_eq!(d.fetch_add(0.25), 0.5);
        assert_eq!(d.load(), 0.75);
    }

    #[test]
    fn float_addition_is_atomic_across_threads() {
        // Fewer under Miri, whose interpreted compare-and-swap loops retry often.
        let per_thread = if cfg!(miri) { 100 } else { 1000 };
        let total = Atomic::new(0.0f32);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..per_thread {
                        total.fetch_add(1.0);
                    }
                });
            }
        });
        assert_eq!(total.load(), 4.0 * per_thread as f32);
    }
}
