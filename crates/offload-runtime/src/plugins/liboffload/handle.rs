//! The one wrapper of liboffload's opaque handles.

/// A liboffload handle. liboffload's entry points may be called from any thread, so handles may
/// move between threads; what they point at is liboffload's.
pub(crate) struct Handle<T>(pub *mut T);

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}

// SAFETY: liboffload's API is thread-safe; a handle is an opaque token passed back to it.
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above; sharing a handle only passes the token to liboffload.
unsafe impl<T> Sync for Handle<T> {}
