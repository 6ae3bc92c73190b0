//! The ownership loops name every output element they write, once and before writing it, while
//! a range of threads runs as one call with its outputs saved (`output_saving`); the ways that
//! name nothing end the call with `NeedsWholeBackup`. Tests of their own file: they reach every
//! view (`nd`, `ThreadSlice`, `WideSlice`), which themselves use `output_saving`.
use crate::index::host_context::{run_threads, ThreadRange};
use crate::nd::ArrayViewMut;
use crate::output_saving::{with_output_saving, NeedsWholeBackup};
use crate::{Dim3, Grid2, Grid3, GridOut2, GridOut3, ThreadSlice, WideSlice};
use core::cell::RefCell;
use std::vec;
use std::vec::Vec;

/// Consecutive threads `first..end` of one block of 7, as one call.
fn range(first: u64, end: u64) -> ThreadRange {
    ThreadRange {
        grid: Dim3::new(1, 1, 1),
        block: Dim3::new(7, 1, 1),
        first,
        end,
        warp_size: 32,
        as_one: true,
    }
}

/// Runs `body` on `out` (initially all `u32::MAX`) as the ranges `cuts` of 7 threads, each
/// saving what it names: every element must be named exactly once, while it still holds
/// its first value, and every written element must have been named. Under Miri, which checks
/// the unsafe saving and not the cutting, the finest cuts alone.
fn names_what_it_writes(len: usize, body: impl Fn(*mut u32, usize)) {
    let all: [&[u64]; 3] = [&[0, 7], &[0, 3, 7], &[0, 1, 2, 5, 6, 7]];
    for cuts in &all[if cfg!(miri) { 2 } else { 0 }..] {
        let mut out = vec![u32::MAX; len];
        let base = out.as_mut_ptr();
        let named = RefCell::new(vec![0u32; len]);
        for pair in cuts.windows(2) {
            let save = |address: *const u8, bytes: usize| {
                let first = (address as usize - base as usize) / 4;
                for i in first..first + bytes / 4 {
                    // SAFETY: within `out`, which the body does not write meanwhile.
                    assert_eq!(unsafe { *base.add(i) }, u32::MAX, "{i} named after a write");
                    named.borrow_mut()[i] += 1;
                }
            };
            with_output_saving(&save, || {
                run_threads(range(pair[0], pair[1]), true, || body(base, len))
            });
        }
        for (i, (&n, &v)) in named.borrow().iter().zip(&out).enumerate() {
            assert_eq!(n, 1, "{cuts:?}: element {i} named {n} times");
            assert_ne!(v, u32::MAX, "{cuts:?}: element {i} not written");
        }
    }
}

#[test]
fn ownership_loops_name_the_elements_they_write_before_writing() {
    names_what_it_writes(40, |out, len| {
        // SAFETY: `out` holds `len` elements, borrowed for the call.
        let mut out = unsafe { ThreadSlice::from_raw_parts(out, len) };
        let (mut low, mut high) = out.split_at(13);
        for (i, e) in low.iter_mine() {
            *e = i as u32;
        }
        for (i, e) in high.slice(..).iter_mine() {
            *e = i as u32;
        }
    });
    names_what_it_writes(35, |out, len| {
        // SAFETY: `out` holds `len` elements, borrowed for the call.
        let out = unsafe { ThreadSlice::from_raw_parts(out, len) };
        for (r, c, e) in ArrayViewMut::from_shape(out, [5, 7]).iter_mine() {
            *e = (r * 7 + c) as u32;
        }
    });
    // 16-byte chunks and unaligned ends: views from element 1 of allocations that 64-bit
    // allocators align to 16 bytes (any alignment is named alike), element 0 written apart.
    let input: Vec<u32> = (0..64).collect();
    names_what_it_writes(61, |out, len| {
        // SAFETY: as above; the two views do not overlap.
        let mut wide = unsafe { WideSlice::from_raw_parts(out.wrapping_add(1), len - 1) };
        wide.update_mine_wide(&input[1..len], |_, x| x);
        // SAFETY: as above.
        let mut first = unsafe { ThreadSlice::from_raw_parts(out, 1) };
        for (_, e) in first.iter_mine() {
            *e = 0;
        }
    });
}

/// Two wide outputs name their chunks and ends each: views 32 elements apart (alike modulo 16
/// bytes) with 5 and 2 unaligned elements, element 0 written apart.
#[test]
fn two_wide_outputs_name_the_elements_they_write_before_writing() {
    let input: Vec<u32> = (0..64).collect();
    names_what_it_writes(65, |out, len| {
        // SAFETY: `out` holds `len` elements, borrowed for the call; the views do not overlap.
        let (mut low, mut high) = unsafe {
            (
                WideSlice::from_raw_parts(out.wrapping_add(1), 32),
                WideSlice::from_raw_parts(out.wrapping_add(33), len - 33),
            )
        };
        low.map_mine_wide_with(&mut high, (&input[1..], &input[..]), |(x, y)| (x, y));
        // SAFETY: as above.
        let mut first = unsafe { ThreadSlice::from_raw_parts(out, 1) };
        for (_, e) in first.iter_mine() {
            *e = 0;
        }
    });
}

/// The host walk of `#[grid]` outputs names the rows it writes: strips cut by the ranges (13
/// points wide: 4 chunk columns, 40 rows, 7 threads: strips of 23 rows) and, in 3D, strips of
/// planes whose runs of items end inside rows.
#[test]
fn grid_outputs_name_the_points_they_write_before_writing() {
    let input: Vec<u32> = (0..13 * 40).collect();
    names_what_it_writes(13 * 40, |out, len| {
        let grid = Grid2::new(&input, 13, 40);
        // SAFETY: `out` holds `len` elements, borrowed for the call.
        let mut tiles =
            unsafe { GridOut2::from_thread_slice(ThreadSlice::from_raw_parts(out, len), 13, 40) };
        tiles.stencil(
            &grid,
            |p| p.at(1, 1) + p.at(-1, 0),
            |x, y| (y * 13 + x) as u32,
        );
    });
    names_what_it_writes(6 * 3 * 20, |out, len| {
        let grid = Grid3::new(&input, 6, 3, 20);
        // SAFETY: as above.
        let mut tiles =
            unsafe { GridOut3::from_thread_slice(ThreadSlice::from_raw_parts(out, len), 6, 3, 20) };
        tiles.stencil(
            &grid,
            |p| p.at(0, 0, 1),
            |x, y, z| ((z * 3 + y) * 6 + x) as u32,
        );
    });
}

/// Raw pointers, `at` and kernels that may not run as one call name no elements: the call
/// unwinds with `NeedsWholeBackup` while saving, and runs as usual otherwise.
#[test]
fn unnamed_ways_into_an_output_need_a_whole_backup() {
    let mut out = vec![0u32; 8];
    let (ptr, len) = (out.as_mut_ptr(), out.len());
    let ways: [&dyn Fn(); 3] = [
        &|| {
            // SAFETY: `out` is borrowed for the calls.
            let _ = unsafe { ThreadSlice::from_raw_parts(ptr, len) }.as_mut_ptr();
        },
        // SAFETY: as above; one thread at a time.
        &|| *unsafe { ThreadSlice::from_raw_parts(ptr, len).at(3) } = 1,
        &|| {},
    ];
    for (k, way) in ways.iter().enumerate() {
        let may_run_as_one = k < 2;
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_output_saving(&|_, _| {}, || run_threads(range(0, 7), may_run_as_one, way))
        }));
        assert!(unwound.unwrap_err().is::<NeedsWholeBackup>(), "way {k}");
        run_threads(range(0, 7), may_run_as_one, way);
    }
}
