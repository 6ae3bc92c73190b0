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
