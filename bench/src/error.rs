//! `BenchError`: why a bench could not run to the end. (A run that ends
//! with a failed verification is not an error: its report says so.)

use strand_client::ClientError;

/// Why a bench stopped.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The flags do not describe a runnable bench.
    #[error("invalid options: {0}")]
    Options(String),
    /// The `strand-server` binary is not where it was looked for.
    #[error("{0}")]
    ServerBinary(String),
    /// The local cluster could not be started or controlled.
    #[error("cluster: {0}")]
    Cluster(String),
    /// An SDK call failed for good.
    #[error("{context}: {source}")]
    Client {
        /// What the bench was doing.
        context: String,
        /// The SDK's error.
        source: ClientError,
    },
    /// Writing an output file failed.
    #[error("{0}")]
    Output(String),
}

impl BenchError {
    /// An SDK failure while doing `context`.
    pub fn client(context: impl Into<String>, source: ClientError) -> BenchError {
        BenchError::Client {
            context: context.into(),
            source,
        }
    }
}
