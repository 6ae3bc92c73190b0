//! A clear report instead of a bare SIGSEGV when a GPU thread overflows its stack on the host.
//!
//! The scheduler's coroutine stacks (corosensei's `DefaultStack`) have a PROT_NONE guard page
//! below them, so an overflow faults there, on the overflowed stack. A SIGSEGV and SIGBUS handler,
//! installed once and run on an alternate signal stack (every thread that runs GPU threads has
//! one: std's, or one made here where there is none), compares the fault's address with the guard
//! page of the stack that its thread runs now, which the scheduler records in a thread-local at
//! each switch to a GPU thread (and the kernel and block in another, once per block). On a match
//! it writes which kernel overflowed and how to raise `OFFLOAD_HOST_STACK` to stderr, with
//! write(2) alone (no allocation, no lock), and aborts, as std does for its own threads. Any
//! other fault goes to the handler installed before ours (std's, which reports its threads'
//! overflows), or takes the default action.
//!
//! Linux only: elsewhere, and under Miri (which runs no coroutine), an overflow stays a crash
//! without a message.

#[cfg(not(all(target_os = "linux", not(miri))))]
pub use elsewhere::{on_stack, running_block, GuardPage};
#[cfg(all(target_os = "linux", not(miri)))]
pub use linux::{on_stack, running_block, GuardPage};

#[cfg(all(target_os = "linux", not(miri)))]
mod linux {
    use corosensei::stack::{DefaultStack, Stack};
    use offload_kernel::Dim3;
    use std::cell::{Cell, OnceCell};
    use std::ffi::{c_int, c_void};
    use std::ptr::{null, null_mut};
    use std::sync::{Once, OnceLock};
    use std::thread::LocalKey;

    /// The guard page below a GPU thread's stack: the page at this address (corosensei's
    /// guard page is the lowest page of the stack's mapping).
    #[derive(Clone, Copy)]
    pub struct GuardPage(usize);

    impl GuardPage {
        pub fn of(stack: &DefaultStack) -> Self {
            GuardPage(stack.limit().get())
        }
    }

    /// The block that an OS thread runs now, as the report names it.
    #[derive(Clone, Copy)]
    struct Block {
        kernel: &'static str,
        index: Dim3,
        stack_bytes: usize,
    }

    std::thread_local! {
        // The handler reads these two: `const`-initialised `Cell`s of plain data, whose access
        // neither allocates nor registers a destructor.
        static BLOCK: Cell<Option<Block>> = const { Cell::new(None) };
        /// The guard page's address of the stack that this thread runs a GPU thread on now;
        /// 0 for none. (Set at each switch, so a bare address: cheaper than the whole record.)
        static GUARD: Cell<usize> = const { Cell::new(0) };
        /// The alternate signal stack made for this thread, where it had none.
        static ALT_STACK: OnceCell<Option<AltStack>> = const { OnceCell::new() };
    }

    /// Runs `run`, which runs block `index` of `kernel` on GPU threads' stacks of `stack_bytes`
    /// bytes, on a thread made ready to report their overflows.
    pub fn running_block<R>(
        kernel: &'static str,
        index: Dim3,
        stack_bytes: usize,
        run: impl FnOnce() -> R,
    ) -> R {
        prepare_thread();
        let block = Block {
            kernel,
            index,
            stack_bytes,
        };
        let _restore = Restore(&BLOCK, BLOCK.replace(Some(block)));
        run()
    }

    /// Runs `run`, which switches to a GPU thread on the stack of `guard`: a fault in `guard`
    /// meanwhile is that thread's overflow.
    pub fn on_stack<R>(guard: GuardPage, run: impl FnOnce() -> R) -> R {
        let _restore = Restore(&GUARD, GUARD.replace(guard.0));
        run()
    }

    /// Puts back what a thread-local held before (a launch from within a GPU thread nests),
    /// also when a GPU thread panics.
    struct Restore<T: Copy + 'static>(&'static LocalKey<Cell<T>>, T);

    impl<T: Copy + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            self.0.set(self.1);
        }
    }

    const SIGNALS: [c_int; 2] = [libc::SIGSEGV, libc::SIGBUS];

    /// The actions of `SIGNALS` before ours, for the faults that are not ours.
    static PREVIOUS: [OnceLock<libc::sigaction>; 2] = [OnceLock::new(), OnceLock::new()];

    /// Makes this thread ready to run GPU threads: the handler installed (once per process), and
    /// an alternate signal stack to run it on (once per thread).
    fn prepare_thread() {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            PAGE.get_or_init(page_size);
            for (&signal, previous) in SIGNALS.iter().zip(&PREVIOUS) {
                install(signal, previous);
            }
        });
        // (Not while the thread's locals are being destroyed: no alternate stack is made then.)
        let _ = ALT_STACK.try_with(|alt| {
            alt.get_or_init(AltStack::where_missing);
        });
    }

    /// Installs `on_fault` for `signal`, the action before it kept in `previous`. If the action
    /// cannot be read, the signal is left as it is.
    fn install(signal: c_int, previous: &OnceLock<libc::sigaction>) {
        // SAFETY: all zeroes is a valid `sigaction` (SIG_DFL, an empty mask, no flags).
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: with a null new action, sigaction only writes the current one into `old`.
        if unsafe { libc::sigaction(signal, null(), &mut old) } != 0 {
            return;
        }
        // Kept before ours goes in, so that `on_fault` finds it (`install` runs once).
        let _ = previous.set(old);
        // SAFETY: as above.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_fault as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `action` is a valid action whose handler has the SA_SIGINFO signature; the
        // old action is not asked for (null).
        unsafe { libc::sigaction(signal, &action, null_mut()) };
    }

    /// The handler: reports and aborts on a fault in the guard page of the running GPU
    /// thread's stack, forwards anything else. Async-signal-safe: reads a thread-local and
    /// statics already set, writes with write(2).
    extern "C" fn on_fault(signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
        // SAFETY: the kernel hands an SA_SIGINFO handler a valid `siginfo_t`; for a fault
        // (si_code > 0, not sent by a process) of SIGSEGV or SIGBUS it holds the address.
        let (from_kernel, address) = unsafe { ((*info).si_code > 0, (*info).si_addr() as usize) };
        let guard = GUARD.get();
        // `PAGE` is set before any `GUARD`.
        let page = PAGE.get().copied().unwrap_or(0);
        if from_kernel && guard != 0 && (guard..guard + page).contains(&address) {
            if let Some(block) = BLOCK.get() {
                report(&block);
            }
            // SAFETY: abort has no precondition.
            unsafe { libc::abort() };
        }
        // SAFETY: the arguments are this handler's own, for the signal they came with.
        unsafe { forward(signal, info, context, from_kernel) };
    }

    /// Hands a signal that is not ours to the action before ours, as if ours were not there.
    ///
    /// # Safety
    /// The arguments are those of a call of `on_fault` by the kernel.
    unsafe fn forward(
        signal: c_int,
        info: *mut libc::siginfo_t,
        context: *mut c_void,
        from_kernel: bool,
    ) {
        let index = SIGNALS.iter().position(|&s| s == signal).unwrap_or(0);
        let Some(previous) = PREVIOUS[index].get() else {
            return die_by_default(signal);
        };
        match previous.sa_sigaction {
            // A fault cannot be ignored: the kernel takes the default action then, as here.
            libc::SIG_IGN if !from_kernel => {}
            libc::SIG_DFL | libc::SIG_IGN => die_by_default(signal),
            handler if previous.sa_flags & libc::SA_SIGINFO != 0 => {
                // SAFETY: a handler installed with SA_SIGINFO has this signature.
                let handler: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                    unsafe { std::mem::transmute(handler) };
                handler(signal, info, context)
            }
            handler => {
                // SAFETY: a handler installed without SA_SIGINFO has this signature.
                let handler: extern "C" fn(c_int) = unsafe { std::mem::transmute(handler) };
                handler(signal)
            }
        }
    }

    /// Resets `signal` to its default action and raises it again: blocked while its handler
    /// runs, it is delivered, and ends the process, as soon as the handler returns.
    fn die_by_default(signal: c_int) {
        // SAFETY: all zeroes is SIG_DFL with an empty mask and no flags.
        let default: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a valid action; sigaction and raise are async-signal-safe.
        unsafe {
            libc::sigaction(signal, &default, null_mut());
            libc::raise(signal);
        }
    }

    /// "offload: a GPU thread of kernel `k` (block (1, 0, 0)) has overflowed its stack of 131072
    /// bytes on the host backend; raise OFFLOAD_HOST_STACK (bytes per GPU thread), e.g.
    /// OFFLOAD_HOST_STACK=262144", on stderr.
    fn report(block: &Block) {
        let mut message = Message::default();
        message.text("offload: a GPU thread of kernel `");
        message.text(block.kernel);
        message.text("` (block (");
        message.number(block.index.x.into());
        message.text(", ");
        message.number(block.index.y.into());
        message.text(", ");
        message.number(block.index.z.into());
        message.text(")) has overflowed its stack of ");
        message.number(block.stack_bytes as u64);
        message.text(
            " bytes on the host backend; raise OFFLOAD_HOST_STACK (bytes per GPU thread), \
             e.g. OFFLOAD_HOST_STACK=",
        );
        message.number(block.stack_bytes as u64 * 2);
        message.text("\n");
        message.write_to_stderr();
    }

    /// A message built in place, as a signal handler must (no allocation).
    struct Message {
        bytes: [u8; 512],
        len: usize,
    }

    impl Default for Message {
        fn default() -> Self {
            Message {
                bytes: [0; 512],
                len: 0,
            }
        }
    }

    impl Message {
        /// Appends `text`, cut at the buffer's end.
        fn text(&mut self, text: &str) {
            let n = text.len().min(self.bytes.len() - self.len);
            self.bytes[self.len..self.len + n].copy_from_slice(&text.as_bytes()[..n]);
            self.len += n;
        }

        fn number(&mut self, mut value: u64) {
            let mut digits = [0u8; 20];
            let mut start = digits.len();
            loop {
                start -= 1;
                digits[start] = b'0' + (value % 10) as u8;
                value /= 10;
                if value == 0 {
                    break;
                }
            }
            // ASCII digits.
            self.text(std::str::from_utf8(&digits[start..]).unwrap_or("?"));
        }

        fn write_to_stderr(&self) {
            let mut rest = &self.bytes[..self.len];
            while !rest.is_empty() {
                // SAFETY: `rest` is valid for reads of its length.
                let written =
                    unsafe { libc::write(libc::STDERR_FILENO, rest.as_ptr().cast(), rest.len()) };
                if written <= 0 {
                    return;
                }
                rest = &rest[written as usize..];
            }
        }
    }

    /// An alternate signal stack made for a thread that had none, taken down when the thread
    /// ends. A `DefaultStack`: mapped memory, touched only as deep as a handler goes, with a
    /// guard page below.
    struct AltStack(DefaultStack);

    /// Room for `on_fault` and for the handler it forwards to (std's formats a message).
    const ALT_STACK_BYTES: usize = 64 * 1024;

    impl AltStack {
        fn where_missing() -> Option<AltStack> {
            // SAFETY: all zeroes is a valid `stack_t`.
            let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
            // SAFETY: with a null new stack, sigaltstack only writes the current one.
            if unsafe { libc::sigaltstack(null(), &mut current) } != 0
                || current.ss_flags & libc::SS_DISABLE == 0
            {
                return None;
            }
            let stack = DefaultStack::new(ALT_STACK_BYTES).ok()?;
            let alt = AltStack(stack);
            let new = alt.stack_t();
            // SAFETY: `new` is mapped, writable memory that lives as long as `alt`, whose drop
            // takes it out of use first.
            (unsafe { libc::sigaltstack(&new, null_mut()) } == 0).then_some(alt)
        }

        /// The usable part: above the guard page, up to the base.
        fn stack_t(&self) -> libc::stack_t {
            let bottom = self.0.limit().get() + page_size();
            // SAFETY: as above.
            let mut stack: libc::stack_t = unsafe { std::mem::zeroed() };
            stack.ss_sp = bottom as *mut c_void;
            stack.ss_size = self.0.base().get() - bottom;
            stack
        }
    }

    impl Drop for AltStack {
        fn drop(&mut self) {
            // SAFETY: as above.
            let mut current: libc::stack_t = unsafe { std::mem::zeroed() };
            // SAFETY: reads the current alternate stack only.
            let read = unsafe { libc::sigaltstack(null(), &mut current) };
            if read != 0 || current.ss_sp != self.stack_t().ss_sp {
                return;
            }
            // SAFETY: all zeroes is a valid `stack_t`; SS_DISABLE takes ours out of use (no
            // handler runs on it now: this is the thread's exit).
            let mut disable: libc::stack_t = unsafe { std::mem::zeroed() };
            disable.ss_flags = libc::SS_DISABLE;
            // SAFETY: as above.
            unsafe { libc::sigaltstack(&disable, null_mut()) };
        }
    }

    /// The page size, for the handler (set at its installation).
    static PAGE: OnceLock<usize> = OnceLock::new();

    fn page_size() -> usize {
        // SAFETY: sysconf has no precondition.
        unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
    }
}

/// Where a stack overflow cannot be told from other faults here: the crash stays as it was.
#[cfg(not(all(target_os = "linux", not(miri))))]
mod elsewhere {
    use corosensei::stack::DefaultStack;
    use offload_kernel::Dim3;

    #[derive(Clone, Copy)]
    pub struct GuardPage;

    impl GuardPage {
        pub fn of(_stack: &DefaultStack) -> Self {
            GuardPage
        }
    }

    pub fn running_block<R>(
        _kernel: &'static str,
        _index: Dim3,
        _stack_bytes: usize,
        run: impl FnOnce() -> R,
    ) -> R {
        run()
    }

    pub fn on_stack<R>(_guard: GuardPage, run: impl FnOnce() -> R) -> R {
        run()
    }
}

/// Each test runs this test binary again, with only itself, as a child that does the test's
/// launch; the test then checks how the child ended and what it wrote to stderr.
#[cfg(all(test, target_os = "linux", not(miri)))]
mod tests {
    use crate::backend::code::Code;
    use crate::backend::host::{scheduler, HostBackend};
    use crate::backend::interface::Backend;
    use crate::backend::limits::Shape;
    use crate::backend::packed::PackedArgs;
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
}
