//! The report of `stack_overflow`, end to end. Each test runs this test binary again, with only
//! itself, as a child that does the test's launch; the test then checks how the child ended and
//! what it wrote to stderr.

use crate::plugins::code::Code;
use crate::plugins::host::{scheduler, HostBackend};
use crate::plugins::interface::Backend;
use crate::plugins::limits::Shape;
use crate::plugins::packed::PackedArgs;
use offload_kernel::{sync_threads, Dim3};
use std::hint::black_box;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

/// Set in a child to the name of the test it runs.
const CHILD: &str = "OFFLOAD_STACK_OVERFLOW_TEST_CHILD";

/// In the child of `test`: runs `body` and returns `None`. Otherwise runs the child, with
/// `env` added, and returns how it went.
fn in_a_child(test: &str, env: &[(&str, &str)], body: impl FnOnce()) -> Option<Output> {
    if std::env::var(CHILD).is_ok_and(|t| t == test) {
        body();
        return None;
    }
    // The harness names tests by their path without the crate's name.
    let module = module_path!().split_once("::").unwrap().1;
    let child = Command::new(std::env::current_exe().unwrap())
        .args([&format!("{module}::{test}"), "--exact", "--nocapture"])
        .env(CHILD, test)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    Some(child)
}

fn stderr(child: &Output) -> String {
    String::from_utf8_lossy(&child.stderr).into_owned()
}

/// Recursion `n` calls deep, with 256 bytes of locals per call that the optimiser keeps.
fn recurse(n: u64) -> u64 {
    let frame = black_box([n; 32]);
    if n == 0 {
        return 0;
    }
    frame[(n % 32) as usize] + recurse(black_box(n - 1))
}

/// Launches `thread` as kernel `name` on the host backend: 2 blocks of 64 threads, run by
/// the block scheduler (no range build).
fn launch(name: &'static str, thread: unsafe fn(&PackedArgs)) {
    let host = HostBackend::new();
    let image = host
        .load_image(&Code::Host {
            name,
            thread,
            threads: None,
            independent: true,
        })
        .unwrap();
    let entry = host.find_entry(image, name).unwrap();
    let shape = Shape {
        grid: Dim3::new(2, 1, 1),
        block: Dim3::new(64, 1, 1),
        dynamic_shared: 0,
    };
    // SAFETY: the threads read no parameters.
    unsafe { host.launch(entry, shape, &PackedArgs::default()) }.unwrap();
}

/// Waits at a barrier, then recurses far deeper than any stack.
unsafe fn bottomless(_: &PackedArgs) {
    sync_threads();
    black_box(recurse(1 << 24));
}

/// Waits at a barrier and recurses a little.
unsafe fn shallow(_: &PackedArgs) {
    sync_threads();
    black_box(recurse(16));
    sync_threads();
}

#[test]
fn an_overflow_aborts_naming_the_kernel_and_the_setting() {
    let env = [("OFFLOAD_HOST_STACK", "65536")];
    let test = "an_overflow_aborts_naming_the_kernel_and_the_setting";
    let Some(child) = in_a_child(test, &env, || launch("bottomless", bottomless)) else {
        return;
    };
    let stderr = stderr(&child);
    assert_eq!(child.status.signal(), Some(libc::SIGABRT), "{stderr}");
    // Either block may overflow first.
    let message = |block: u32| {
        format!(
            "offload: a GPU thread of kernel `bottomless` (block ({block}, 0, 0)) has \
             overflowed its stack of 65536 bytes on the host backend; raise \
             OFFLOAD_HOST_STACK (bytes per GPU thread), e.g. OFFLOAD_HOST_STACK=131072\n"
        )
    };
    assert!(
        stderr.contains(&message(0)) || stderr.contains(&message(1)),
        "{stderr}"
    );
}

#[test]
fn a_kernel_within_its_stack_runs_as_before() {
    let env = [("OFFLOAD_HOST_STACK", "65536")];
    let test = "a_kernel_within_its_stack_runs_as_before";
    let Some(child) = in_a_child(test, &env, || launch("shallow", shallow)) else {
        return;
    };
    assert!(child.status.success(), "{}", stderr(&child));
}

/// On a thread without an alternate signal stack, one is made: the handler cannot run on
/// the overflowed stack.
#[test]
fn a_thread_without_an_alternate_stack_gets_one() {
    let env = [("OFFLOAD_HOST_STACK", "65536")];
    let test = "a_thread_without_an_alternate_stack_gets_one";
    let body = || {
        // SAFETY: all zeroes is a valid `stack_t`.
        let mut disable: libc::stack_t = unsafe { std::mem::zeroed() };
        disable.ss_flags = libc::SS_DISABLE;
        // SAFETY: takes std's alternate stack of this thread out of use (no handler runs on
        // it now).
        let disabled = unsafe { libc::sigaltstack(&disable, std::ptr::null_mut()) };
        assert_eq!(disabled, 0);
        // `run_block` runs the block on this thread, unlike a launch (rayon's workers).
        let thread = || {
            sync_threads();
            black_box(recurse(1 << 24));
        };
        let (one, block) = (Dim3::new(1, 1, 1), Dim3::new(32, 1, 1));
        scheduler::run_block("direct", Dim3::new(0, 0, 0), one, block, 0, 32, &thread);
    };
    let Some(child) = in_a_child(test, &env, body) else {
        return;
    };
    let stderr = stderr(&child);
    assert_eq!(child.status.signal(), Some(libc::SIGABRT), "{stderr}");
    assert!(
        stderr.contains("kernel `direct` (block (0, 0, 0)) has overflowed"),
        "{stderr}"
    );
}

/// After a launch installed the handler, std still reports an overflow of its own threads.
#[test]
fn std_still_reports_its_threads_overflows() {
    let test = "std_still_reports_its_threads_overflows";
    let body = || {
        launch("shallow", shallow);
        std::thread::Builder::new()
            .name("deep".into())
            .stack_size(256 * 1024)
            .spawn(|| black_box(recurse(1 << 24)))
            .unwrap()
            .join()
            .unwrap();
    };
    let Some(child) = in_a_child(test, &[], body) else {
        return;
    };
    let stderr = stderr(&child);
    assert_eq!(child.status.signal(), Some(libc::SIGABRT), "{stderr}");
    // "thread 'deep' (1234) has overflowed its stack" in newer std.
    assert!(
        stderr.contains("thread 'deep'") && stderr.contains("has overflowed its stack"),
        "{stderr}"
    );
    assert!(!stderr.contains("offload:"), "{stderr}");
}

/// Where the action before the handler was the default one, another fault still ends the
/// process by SIGSEGV, without a message.
#[test]
fn other_faults_take_the_default_action() {
    let test = "other_faults_take_the_default_action";
    let body = || {
        // SAFETY: all zeroes is SIG_DFL with an empty mask; std's handler is replaced by the
        // default action, as in a process that std's runtime did not start.
        let default: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a valid action.
        unsafe { libc::sigaction(libc::SIGSEGV, &default, std::ptr::null_mut()) };
        launch("shallow", shallow);
        // SAFETY: maps a fresh page that no one can read: reading it faults (that is the test).
        unsafe {
            let page = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(page, libc::MAP_FAILED);
            black_box(std::ptr::read_volatile(page.cast::<u8>()));
        }
    };
    let Some(child) = in_a_child(test, &[], body) else {
        return;
    };
    let stderr = stderr(&child);
    assert_eq!(child.status.signal(), Some(libc::SIGSEGV), "{stderr}");
    assert!(!stderr.contains("offload:"), "{stderr}");
}
