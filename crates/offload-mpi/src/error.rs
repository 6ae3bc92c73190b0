//! What the exchanges and reductions report.

/// An error of `offload-mpi`; nothing was sent or received when it is returned before the
/// transfer started (bad arguments), otherwise the ranks may be out of step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// offload failed (a copy between the device and the host, a stream).
    #[error(transparent)]
    Offload(#[from] offload::Error),
    /// An NCCL call returned an error.
    #[error("NCCL: {call} failed: {message}")]
    Nccl {
        /// The NCCL function.
        call: &'static str,
        /// NCCL's description of the error.
        message: String,
    },
    /// An argument is not usable: a part out of the vector's bounds, a peer that is no rank,
    /// a stream or vector of another device. Nothing was sent.
    #[error("{what}: {reason}")]
    InvalidArgument {
        /// The operation.
        what: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
