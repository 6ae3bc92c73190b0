//! Which public types cross threads. A regression here is a compile error of this file.
//!
//! - `Device`, `Launch`, `Error`, `LaunchReport`, `ImageSet`, `Kernel`: `Send + Sync`. Several
//!   threads may launch on one device at once (tests/concurrency.rs in offload-examples runs 8).
//! - `KernelArg` (generated code's argument descriptor) is neither: it holds the raw addresses of
//!   one launch's borrowed arguments and lives only inside that launch call.

use offload::__private::{Kernel, KernelArg};
use offload::{Device, Error, ImageSet, Launch, LaunchReport};

fn send_sync<T: Send + Sync>() {}

#[test]
fn runtime_types_are_send_and_sync() {
    send_sync::<Device>();
    send_sync::<Launch<'static>>();
    send_sync::<Error>();
    send_sync::<LaunchReport>();
    send_sync::<ImageSet>();
    send_sync::<Kernel>();
}

/// `KernelArg` must stay `!Send`: moving one to another thread could outlive the launch's
/// borrows. Checked by trait resolution: the blanket impl below applies to `KernelArg` only if it
/// is not `Send`, which makes `IS_SEND` false; checked at compile time.
#[test]
fn kernel_args_stay_on_the_launching_thread() {
    trait NotSend {
        const IS_SEND: bool = false;
    }
    impl<T: ?Sized> NotSend for T {}
    struct Probe<T: ?Sized>(std::marker::PhantomData<T>);
    #[allow(dead_code)]
    impl<T: ?Sized + Send> Probe<T> {
        const IS_SEND: bool = true;
    }
    const { assert!(!Probe::<KernelArg<'static>>::IS_SEND) };
    const { assert!(Probe::<Device>::IS_SEND, "the probe itself works") };
}
