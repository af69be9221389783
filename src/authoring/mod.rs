//! For people who write executors: what a component imports and which
//! capability each import needs ([`inspect`]), whether a manifest covers
//! its component ([`coverage`]), the WIT package guests are written
//! against ([`wit`]), a ready guest crate ([`template`]) and the JSON
//! Schema of `executor.toml` ([`schema`]).
//!
//! What an interface needs is never written here: it comes from the one
//! table of bindings (`crate::sandbox::table`), and what a capability
//! means from the registry (`crate::policy::REGISTRY`).

pub mod coverage;
pub mod inspect;
pub mod schema;
pub mod template;
pub mod wit;
mod write;

use std::path::PathBuf;

/// Why an authoring command could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum AuthoringError {
    /// A file the command needs does not exist.
    #[error("`{}` does not exist", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read `{}`", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file or directory could not be written.
    #[error("cannot write `{}`", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a component or core module gatehouse can read.
    #[error("`{}` is not a webassembly component or module: {reason}", path.display())]
    NotWasm {
        /// The file.
        path: PathBuf,
        /// Why it could not be read as WebAssembly.
        #[source]
        reason: NotWasm,
    },
    /// `gatehouse new` was given a name no executor or crate may have.
    #[error("invalid executor name `{name}`: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A file to write, or a directory on the way to it below the
    /// directory given, is a symbolic link (security round 2, item 6).
    #[error("`{}` is a symbolic link: refusing to write through it (remove it or give another directory)", path.display())]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// `gatehouse new` refuses to write into a directory that holds files.
    #[error("directory `{}` exists and is not empty: give a new or empty directory", dir.display())]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
    },
}

/// Why a file is not WebAssembly gatehouse can read.
#[derive(Debug, thiserror::Error)]
pub enum NotWasm {
    /// It starts with neither a module's nor a component's header.
    #[error("it does not start with a webassembly header")]
    NoHeader,
    /// It is a WIT package.
    #[error("it is a wit package, not a component")]
    WitPackage,
    /// A core module's imports could not be read.
    #[error(transparent)]
    Module(wasmparser::BinaryReaderError),
    /// The preview 1 adapter refuses the module.
    #[error("the preview 1 adapter refuses it: {0}")]
    Adapter(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The component could not be decoded.
    #[error(transparent)]
    Decode(Box<dyn std::error::Error + Send + Sync>),
}

impl AuthoringError {
    /// Whether the error is the user's input being wrong (exit 3) rather
    /// than the host failing (exit 1).
    pub fn is_invalid_input(&self) -> bool {
        !matches!(
            self,
            AuthoringError::Read { .. } | AuthoringError::Write { .. }
        )
    }
}
