//! Runs the GPU threads of one block on the calling OS thread, each as a stackful coroutine
//! (corosensei), so that a thread waiting at a barrier or in a warp-wide operation suspends and
//! lets the others of its block run.
//!
//! The scheduler runs every runnable thread in order of linear index until it returns or
//! suspends, then releases a group: first any warp whose running threads all wait in a warp
//! operation, else the whole block once all its running threads wait at a block barrier.
//! Threads that returned count as arrived. Threads waiting at different kinds of barrier that
//! can never meet are a deadlock on a GPU; here they are a panic naming where each thread waits.
//!
//! Threads run on "runners", coroutines that run threads one after the other: a block without
//! barriers costs one coroutine, its threads plain calls; a thread that suspends keeps its
//! runner, and the next thread starts on a new one. Stacks are reused across blocks. A thread
//! that overflows its stack hits the stack's guard page, which `stack_overflow` reports.

use crate::plugins::host::stack_overflow::{self, GuardPage};
use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use offload_kernel::host_block::{with_block, with_suspend, BlockResources, Group};
use offload_kernel::host_context::{with_thread, ThreadContext};
use offload_kernel::Dim3;
use std::cell::{Cell, RefCell};
use std::sync::OnceLock;

/// Stack bytes of each GPU thread on the host when `OFFLOAD_HOST_STACK` does not say: four times
/// more in unoptimised builds, whose frames keep every local in its own slot (examples' bf16
/// GEMM on the host overflowed 128 KiB in a debug build, a crash without a message, and needs
/// 256 KiB). Untouched stack pages cost no memory.
pub const DEFAULT_THREAD_STACK: usize = if cfg!(debug_assertions) {
    512 * 1024
} else {
    128 * 1024
};

/// Stack size of each GPU thread run by the host backend: `OFFLOAD_HOST_STACK` (bytes), else
/// [`DEFAULT_THREAD_STACK`]. Kernels with deep call chains or large locals may need more; a
/// thread that overflows its stack aborts the process with a message that says so (on Linux;
/// elsewhere it crashes without one).
pub fn thread_stack_bytes() -> usize {
    static BYTES: OnceLock<usize> = OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("OFFLOAD_HOST_STACK")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_THREAD_STACK)
    })
}

std::thread_local! {
    /// Stacks of finished GPU threads, reused by the next ones on this worker.
    static STACKS: RefCell<Vec<DefaultStack>> = const { RefCell::new(Vec::new()) };
}

fn take_stack() -> DefaultStack {
    STACKS.with(|s| s.borrow_mut().pop()).unwrap_or_else(|| {
        DefaultStack::new(thread_stack_bytes())
            .unwrap_or_else(|e| panic!("no memory for a GPU thread's stack on the host: {e}"))
    })
}

fn return_stack(stack: DefaultStack) {
    STACKS.with(|s| s.borrow_mut().push(stack));
}

/// A coroutine that runs GPU threads one after the other; it yields the group its current
/// thread waits for, and that thread's index.
type Runner = Coroutine<(), (Group, usize), (), DefaultStack>;

/// A runner parked while its current thread waits for `group`.
struct Parked {
    runner: Runner,
    guard: GuardPage,
    group: Group,
    runnable: bool,
}

/// Run the threads of block `block_idx` of `kernel` (of a `grid` of `block`-sized blocks, with
/// `dynamic_shared` bytes of dynamic shared memory, in warps of `warp_size` threads): `thread`
/// runs one GPU thread, its ids set.
///
/// A runner takes the next thread that has not started whenever its thread returns, so a block
/// without barriers runs on a single runner, its threads as plain calls one after the other.
/// When a thread suspends, its runner parks with it and a new runner goes on with the next.
pub fn run_block(
    kernel: &'static str,
    block_idx: Dim3,
    grid: Dim3,
    block: Dim3,
    dynamic_shared: usize,
    warp_size: u32,
    thread: &(dyn Fn() + Sync),
) {
    let count = block.count() as usize;
    let resources = BlockResources::new(count, dynamic_shared);
    let context = |t: usize| ThreadContext {
        thread_idx: Dim3::from_linear(t as u64, block),
        block_idx,
        block_dim: block,
        grid_dim: grid,
        warp_size,
    };
    // Miri cannot switch stacks: there the threads run as plain calls, one after the other, and
    // a barrier or warp operation panics for want of a scheduler to suspend to. (scripts/miri
    // covers the launch path with kernels that need neither.)
    if cfg!(miri) {
        with_block(&resources, || {
            (0..count).for_each(|t| with_thread(context(t), thread))
        });
        return;
    }
    let next_unstarted = Cell::new(0);
    let runner_body = |yielder: &Yielder<(), (Group, usize)>, ()| {
        let current = Cell::new(0);
        let suspend = |group| yielder.suspend((group, current.get()));
        with_suspend(&suspend, || loop {
            let t = next_unstarted.get();
            if t == count {
                break;
            }
            next_unstarted.set(t + 1);
            current.set(t);
            with_thread(context(t), thread);
        })
    };
    let mut parked: Vec<Option<Parked>> = (0..count).map(|_| None).collect();
    let run = || loop {
        while next_unstarted.get() < count {
            let stack = take_stack();
            let guard = GuardPage::of(&stack);
            // SAFETY: the runner borrows locals of this function; every runner is finished or
            // dropped (unwinding its stack) before they go out of scope.
            let mut runner = unsafe { Coroutine::with_stack_unchecked(stack, runner_body) };
            let outcome = stack_overflow::on_stack(guard, || runner.resume(()));
            park(&mut parked, runner, guard, outcome);
        }
        for t in 0..count {
            if let Some(Parked {
                mut runner,
                guard,
                runnable: true,
                ..
            }) = parked[t].take_if(|p| p.runnable)
            {
                let outcome = stack_overflow::on_stack(guard, || {
                    with_thread(context(t), || runner.resume(()))
                });
                park(&mut parked, runner, guard, outcome);
            }
        }
        if !release(&mut parked, warp_size as usize) {
            break;
        }
    };
    stack_overflow::running_block(kernel, block_idx, thread_stack_bytes(), || {
        with_block(&resources, run)
    });
}

/// Keep a runner whose thread suspended; recycle the stack of one that ran out of threads.
fn park(
    parked: &mut [Option<Parked>],
    runner: Runner,
    guard: GuardPage,
    outcome: CoroutineResult<(Group, usize), ()>,
) {
    match outcome {
        CoroutineResult::Yield((group, t)) => {
            parked[t] = Some(Parked {
                runner,
                guard,
                group,
                runnable: false,
            })
        }
        CoroutineResult::Return(()) => return_stack(runner.into_stack()),
    }
}

/// Mark the next group to go on as runnable (every thread has started and is parked or has
/// returned). `false` when every thread has returned.
fn release(parked: &mut [Option<Parked>], warp_size: usize) -> bool {
    let waiting_for = |p: &Option<Parked>| p.as_ref().map(|p| p.group);
    let mut released = false;
    for warp in parked.chunks_mut(warp_size) {
        let waits: Vec<Option<Group>> = warp.iter().map(waiting_for).collect();
        if waits.contains(&Some(Group::Warp)) && waits.iter().all(|w| w != &Some(Group::Block)) {
            set_runnable(warp);
            released = true;
        }
    }
    if released {
        return true;
    }
    let waits: Vec<Option<Group>> = parked.iter().map(waiting_for).collect();
    if waits.iter().all(Option::is_none) {
        return false;
    }
    if waits.iter().all(|w| w != &Some(Group::Warp)) {
        set_runnable(parked);
        return true;
    }
    panic!(
        "deadlock in a block: threads wait at a block barrier while others of their block wait \
         in a warp operation ({})",
        describe(&waits)
    );
}

fn set_runnable(parked: &mut [Option<Parked>]) {
    for p in parked.iter_mut().flatten() {
        p.runnable = true;
    }
}

/// "threads 0-31 in a warp operation, 32-63 at a block barrier"
fn describe(waits: &[Option<Group>]) -> String {
    let label = |w: &Option<Group>| match w {
        Some(Group::Warp) => "in a warp operation",
        Some(Group::Block) => "at a block barrier",
        None => "returned",
    };
    let mut parts = Vec::new();
    let mut start = 0;
    for end in 1..=waits.len() {
        if end == waits.len() || waits[end] != waits[start] {
            parts.push(format!("{}-{} {}", start, end - 1, label(&waits[start])));
            start = end;
        }
    }
    format!("threads {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_kernel::host_block::exchange;
    use offload_kernel::{sync_threads, thread_idx};
    use std::sync::Mutex;

    /// One block of `threads` threads along x, the whole grid, in warps of `warp_size` lanes.
    fn run_one_block(threads: u32, warp_size: u32, thread: &(dyn Fn() + Sync)) {
        let block = Dim3::new(threads, 1, 1);
        run_block(
            "test",
            Dim3::new(0, 0, 0),
            Dim3::new(1, 1, 1),
            block,
            0,
            warp_size,
            thread,
        );
    }

    /// What each thread of such a block reads from its right neighbour in its warp (wrapping;
    /// the last warp may be short), each lane offering ten times its index.
    fn right_neighbours(threads: u32, warp_size: u32) -> Vec<u64> {
        let seen = Mutex::new(vec![0u64; threads as usize]);
        let thread = || {
            let t = thread_idx().x as u64;
            let right = exchange(Group::Warp, t * 10, |lanes| {
                lanes[(t as usize + 1) % lanes.len()].unwrap()
            });
            seen.lock().unwrap()[t as usize] = right;
        };
        run_one_block(threads, warp_size, &thread);
        seen.into_inner().unwrap()
    }

    /// Every thread logs before and after a barrier: no "after" comes before the last "before".
    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot switch stacks")]
    fn barrier_separates_phases() {
        let log = Mutex::new(Vec::new());
        let thread = || {
            let t = thread_idx().x;
            log.lock().unwrap().push((0, t));
            sync_threads();
            log.lock().unwrap().push((1, t));
        };
        run_one_block(70, 32, &thread);
        let log = log.into_inner().unwrap();
        assert_eq!(log.len(), 140);
        assert!(log[..70].iter().all(|&(phase, _)| phase == 0));
        assert!(log[70..].iter().all(|&(phase, _)| phase == 1));
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot switch stacks")]
    fn warp_exchange_sees_the_lanes_of_its_warp() {
        let seen = right_neighbours(40, 32);
        assert_eq!(seen[0], 10);
        assert_eq!(seen[31], 0);
        assert_eq!(seen[32], 330);
        assert_eq!(seen[39], 320);
    }

    /// The same block in 64-lane warps (AMD's wavefronts): one warp of 64 and a short one of 16.
    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot switch stacks")]
    fn warps_of_64_lanes() {
        let seen = right_neighbours(80, 64);
        assert_eq!(seen[31], 320);
        assert_eq!(seen[63], 0);
        assert_eq!(seen[64], 650);
        assert_eq!(seen[79], 640);
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot switch stacks")]
    fn returned_threads_count_as_arrived() {
        let after = Mutex::new(0);
        let thread = || {
            if thread_idx().x % 2 == 0 {
                return;
            }
            sync_threads();
            *after.lock().unwrap() += 1;
        };
        run_one_block(64, 32, &thread);
        assert_eq!(after.into_inner().unwrap(), 32);
    }

    #[test]
    #[cfg_attr(miri, ignore = "Miri cannot switch stacks")]
    fn mismatched_barriers_are_a_deadlock_panic() {
        let thread = || {
            if thread_idx().x < 16 {
                exchange(Group::Warp, 0, |_| ());
            } else {
                sync_threads();
            }
        };
        let panic = std::panic::catch_unwind(|| run_one_block(32, 32, &thread)).unwrap_err();
        let message = panic.downcast_ref::<String>().unwrap();
        assert!(
            message.contains("threads 0-15 in a warp operation, 16-31 at a block barrier"),
            "{message}"
        );
    }
}
