//! Shared memory: per-block arrays that all threads of a block see, declared in the kernel with
//! [`shared!`](crate::shared), and the launch's dynamic shared memory ([`dynamic_shared`]).
//!
//! Every thread of a block may write any element, so element access is `unsafe` under one rule:
//! **between two block barriers ([`sync_threads`](crate::sync_threads)), an element written by
//! one thread is read or written by no other thread.** The usual pattern keeps to it by
//! construction: each thread writes its own slot ([`SharedSlice::write_mine`], safe), the block
//! synchronises, then threads read any slot, and synchronise again before the next writes.
//! Contents are undefined when a block starts (zeroed on the host backend): read only what the
//! block wrote. [`shared_atomic!`](crate::shared_atomic) arrays need none of this: every access
//! is atomic, so safe.

use core::marker::PhantomData;

/// Alignment of every shared allocation, in bytes: element types must not need more.
pub const SHARED_ALIGN: usize = 16;

/// A block's view of a shared-memory array of `len()` elements of `T`.
#[derive(Clone, Copy)]
pub struct SharedSlice<T> {
    ptr: *mut T,
    len: usize,
    _elements: PhantomData<*mut T>,
}

impl<T: Copy> SharedSlice<T> {
    /// # Safety
    /// `ptr..ptr+len` is this block's shared memory, aligned for `T`, for the whole launch.
    #[doc(hidden)]
    #[inline(always)]
    pub unsafe fn from_raw(ptr: *mut T, len: usize) -> Self {
        SharedSlice {
            ptr,
            len,
            _elements: PhantomData,
        }
    }

    /// Number of elements.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no element.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Address of element 0, for access patterns the methods do not cover.
    #[inline(always)]
    pub fn as_ptr(&self) -> *mut T {
        self.ptr
    }

    /// Element `i` (bounds-checked).
    ///
    /// # Safety
    /// Element `i` was written by this block, and no other thread writes it between the last
    /// barrier and the next one (see the module docs).
    #[inline(always)]
    #[track_caller]
    pub unsafe fn read(&self, i: usize) -> T {
        assert!(i < self.len, "shared index out of bounds");
        // SAFETY: in bounds; no racing write per the caller's contract.
        unsafe { self.ptr.add(i).read() }
    }

    /// Store `value` at element `i` (bounds-checked).
    ///
    /// # Safety
    /// No other thread reads or writes element `i` between the last barrier and the next one.
    #[inline(always)]
    #[track_caller]
    pub unsafe fn write(&self, i: usize, value: T) {
        assert!(i < self.len, "shared index out of bounds");
        // SAFETY: in bounds; no racing access per the caller's contract.
        unsafe { self.ptr.add(i).write(value) }
    }

    /// Store `value` at the calling thread's own slot: its linear index in the block
    /// (bounds-checked). Safe: no two threads of a block have the same slot; the threads that read
    /// it afterwards (with [`read`](Self::read)) carry the duty to synchronise first.
    #[inline(always)]
    #[track_caller]
    pub fn write_mine(&self, value: T) {
        let mine = crate::thread_idx().linear_in(crate::block_dim());
        assert!(mine < self.len, "shared index out of bounds");
        // SAFETY: in bounds, and this slot belongs to this thread alone among safe writers.
        unsafe { self.ptr.add(mine).write(value) }
    }
}

/// The launch's dynamic shared memory (`Launch::dynamic_shared(bytes)`, `offload!`'s `dyn_cache`) as
/// elements of `T`: `bytes / size_of::<T>()` of them, 16-byte aligned. Empty when the launch
/// asked for none.
#[inline(always)]
pub fn dynamic_shared<T: Copy>() -> SharedSlice<T> {
    const { assert!(core::mem::align_of::<T>() <= SHARED_ALIGN) };
    let (ptr, bytes) = dynamic_shared_bytes();
    let len = match core::mem::size_of::<T>() {
        0 => 0,
        size => bytes / size,
    };
    // SAFETY: the block's dynamic shared memory, 16-byte aligned, `bytes` long.
    unsafe { SharedSlice::from_raw(ptr as *mut T, len) }
}

#[cfg(all(target_arch = "nvptx64", feature = "spirv"))]
#[inline(always)]
fn dynamic_shared_bytes() -> (*mut u8, usize) {
    // SAFETY: markers the device pass replaces by the kernel's hidden local-memory argument and
    // its size.
    unsafe {
        (
            crate::spirv::__offload_spirv_dynamic_shared(),
            crate::spirv::__offload_spirv_dynamic_shared_bytes(),
        )
    }
}

#[cfg(all(target_arch = "nvptx64", not(feature = "spirv")))]
#[inline(always)]
fn dynamic_shared_bytes() -> (*mut u8, usize) {
    extern "C" {
        // Defined by offload-build's linker: the generic address of the `.extern .shared` array.
        fn __offload_dyn_shared_base() -> *mut u8;
    }
    let bytes: u32;
    // SAFETY: reads a special register; the base function has no side effects.
    unsafe {
        core::arch::asm!("mov.u32 {0}, %dynamic_smem_size;", out(reg32) bytes, options(nomem, nostack, pure));
        (__offload_dyn_shared_base(), bytes as usize)
    }
}

#[cfg(target_arch = "amdgpu")]
#[inline(always)]
fn dynamic_shared_bytes() -> (*mut u8, usize) {
    // The launch's LDS holds the static arrays (each padded to 16 bytes by the link step, so the
    // dynamic part starts right after them) and then the dynamic part.
    let total = crate::amdgpu::group_segment_size();
    let fixed = core::arch::amdgpu::groupstaticsize();
    // SAFETY: the base function has no side effects.
    let base = unsafe { crate::amdgpu::__offload_dyn_shared_base() };
    (base, total.saturating_sub(fixed) as usize)
}

#[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
fn dynamic_shared_bytes() -> (*mut u8, usize) {
    crate::host_block::dynamic_shared()
}

/// Declare a static shared array in a kernel: `let tile = offload::shared!([f32; 256]);` gives
/// every block its own 256 floats, as a [`SharedSlice`]. Each use of the macro is one array; the
/// element type must need at most 16-byte alignment.
///
/// On the GPU it becomes a `.shared` variable (offload-build's linker places the
/// `__offload_shared_*` symbols in shared memory: PTX's `.shared` state space, AMD's LDS); on the
/// host backend, an allocation of the running block.
#[macro_export]
macro_rules! shared {
    ([$t:ty; $n:expr]) => {{
        const __OFFLOAD_SHARED_BYTES: usize = ::core::mem::size_of::<[$t; $n]>();
        const {
            ::core::assert!(
                ::core::mem::align_of::<$t>() <= $crate::SHARED_ALIGN,
                "shared arrays hold types aligned to at most 16 bytes"
            )
        };
        #[cfg(target_arch = "nvptx64")]
        let ptr: *mut u8 = {
            extern "C" {
                #[link_name = $crate::__offload_shared_symbol!()]
                static mut __OFFLOAD_SHARED: [u8; __OFFLOAD_SHARED_BYTES];
            }
            // SAFETY: only the address is taken.
            #[allow(unused_unsafe)]
            unsafe {
                ::core::ptr::addr_of_mut!(__OFFLOAD_SHARED) as *mut u8
            }
        };
        // rustc places statics in amdgcn's global address space and optimizes accesses on that
        // assumption, so the array's address comes from a function of the link step, which
        // returns its LDS array's flat address; the static only carries the size.
        #[cfg(target_arch = "amdgpu")]
        let ptr: *mut u8 = {
            extern "C" {
                #[link_name = $crate::__offload_shared_symbol!()]
                static __OFFLOAD_SHARED: [u8; __OFFLOAD_SHARED_BYTES];
                #[link_name = $crate::__offload_shared_address_symbol!()]
                fn __offload_shared_address(size: *const u8) -> *mut u8;
            }
            // SAFETY: the link step defines the function without side effects; the static's
            // address is only passed, never read.
            #[allow(unused_unsafe)]
            unsafe {
                __offload_shared_address(::core::ptr::addr_of!(__OFFLOAD_SHARED) as *const u8)
            }
        };
        #[cfg(not(any(target_arch = "nvptx64", target_arch = "amdgpu")))]
        let ptr: *mut u8 = {
            static SITE: u8 = 0;
            $crate::__host_static_shared(&SITE, __OFFLOAD_SHARED_BYTES)
        };
        let (ptr, len): (*mut $t, usize) = (ptr as *mut $t, $n);
        // SAFETY: the block's own `[$t; $n]` of shared memory, 16-byte aligned.
        unsafe { $crate::SharedSlice::from_raw(ptr, len) }
    }};
}

/// The symbol of one `shared!` array: unique per use of the macro (crate, module, line, column).
/// On amdgcn the link step reads the array's size from its declaration.
#[doc(hidden)]
#[macro_export]
macro_rules! __offload_shared_symbol {
    () => {
        ::core::concat!(
            "__offload_shared_",
            ::core::module_path!(),
            "_",
            ::core::line!(),
            "_",
            ::core::column!()
        )
    };
}

/// The function that gives the address of one `shared!` array on amdgcn (the array's symbol and
/// `_address`).
#[doc(hidden)]
#[macro_export]
macro_rules! __offload_shared_address_symbol {
    () => {
        ::core::concat!(
            "__offload_shared_",
            ::core::module_path!(),
            "_",
            ::core::line!(),
            "_",
            ::core::column!(),
            "_address"
        )
    };
}
