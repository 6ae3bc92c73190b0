//! What a [`crate::Stream`] handle does with the launches queued on it: [`Runs`] them (every
//! stream), or [`Records`] them into a graph (the handle [`crate::Stream::record_graph`] gives its
//! body). The mode decides how long a kernel's `enqueue` borrows a `DeviceVec` (and views of
//! one): a running stream for the call only, since the vector waits for the queued work before
//! it is freed; a recording one for the graph's lifetime `'g`, since every replay of the graph
//! uses the vector again, so that dropping it while the graph lives does not compile.

use std::marker::PhantomData;

/// A stream handle's mode: [`Runs`] or [`Records`] (see the module docs).
pub trait StreamMode: sealed::Mode {}

/// The mode of a stream that runs what is queued on it.
pub enum Runs {}

/// The mode of the handle that records launches into a graph of lifetime `'g`.
pub struct Records<'g> {
    /// Invariant: the recording handle cannot be taken for a shorter-lived graph's, which would
    /// let `enqueue` borrow a `DeviceVec` for less than the graph lives.
    _graph: PhantomData<&'g mut &'g ()>,
}

/// A mode whose `enqueue` accepts device data borrowed for `'v`: [`Runs`] any, [`Records<'g>`]
/// data that outlives the graph.
pub trait Borrows<'v>: StreamMode {}

impl StreamMode for Runs {}
impl StreamMode for Records<'_> {}
impl<'v> Borrows<'v> for Runs {}
impl<'g, 'v: 'g> Borrows<'v> for Records<'g> {}

pub(crate) mod sealed {
    /// Only the runtime's modes; `RECORDS` tells the runtime which one a handle has.
    pub trait Mode {
        const RECORDS: bool;
    }

    impl Mode for super::Runs {
        const RECORDS: bool = false;
    }

    impl Mode for super::Records<'_> {
        const RECORDS: bool = true;
    }
}
