//! Shared memory that every thread of a block reads and writes safely: each element an
//! [`Atomic`](crate::Atomic).
//!
//! A [`SharedSlice`](crate::SharedSlice) is plain memory, so reading it is `unsafe` even in a
//! read-only phase after a barrier: on a GPU, `barrier.sync` matches the barriers of different
//! call sites, so a thread that took another path can still be writing while this one reads, and
//! no type or closure scope can rule that out. An array declared with [`shared_atomic!`] has no
//! plain access at all: every load and store is a relaxed atomic, which never races, whatever
//! the threads do. The block barrier ([`sync_threads`](crate::sync_threads)) is what gives the
//! values meaning: what a thread stored before it, every thread of the block loads after it.
//!
//! The price is that loads are not merged into 16-byte vector loads, nor kept in registers across
//! other atomics; tight inner loops over shared memory (a tiled GEMM) keep `SharedSlice`.

/// Declare a static shared array whose elements are atomics: `let tile =
/// offload::shared_atomic!([f32; 256]);` gives every block 256 `Atomic<f32>` as a
/// `&[Atomic<f32>]`: `tile[i].load()`, `tile[i].store(v)`, `tile[i].fetch_add(v)` and the rest of
/// [`Atomic`](crate::Atomic)'s operations (`i32`, `u32`, `i64`, `u64`, `f32`, `f64`), all safe.
/// Each use of the macro is one array, reached by no other name; contents are undefined when a
/// block starts (zero on the host backend), so store before loading.
#[macro_export]
macro_rules! shared_atomic {
    ([$t:ty; $n:expr]) => {{
        let cells = $crate::shared!([$t; $n]);
        // SAFETY: the block's own `[$t; $n]` of shared memory, aligned for `$t` (hence for its
        // atomic), valid for the launch; no other handle to it exists (`cells` stays here), so
        // every access goes through `Atomic`.
        unsafe { $crate::Atomic::<$t>::slice_from_raw(cells.as_ptr(), cells.len()) }
    }};
}
