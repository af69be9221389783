//! The one error type of manifest loading, validation and verification.

use std::path::PathBuf;

use crate::policy::DenyCode;

/// Why a manifest could not be loaded, validated, verified or resolved.
///
/// Messages are lowercase, name the manifest file first and put every piece
/// of user input in backticks, so a person can find the line to fix.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// A file or directory could not be read (other than a missing
    /// component, which is [`ManifestError::ComponentMissing`]).
    #[error("cannot read `{}`: {}", path.display(), crate::util::lower(&source.to_string()))]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The text is not TOML, or does not have the shape of a manifest (an
    /// unknown field, a missing required field, a value of the wrong type).
    /// `detail` is toml's message, prefixed with the line and column when
    /// toml knows where the problem is.
    #[error("`{file}`: {detail}")]
    Toml {
        /// The manifest file, as shown in messages.
        file: String,
        /// toml's message.
        detail: String,
    },

    /// A field has a well-typed but invalid value.
    #[error("`{file}`: field `{field}`: {reason}")]
    Invalid {
        /// The manifest file, as shown in messages.
        file: String,
        /// The field's path in the manifest, e.g. `capabilities[1].name`.
        field: String,
        /// What is wrong with the value.
        reason: String,
    },

    /// The component file the manifest names does not exist.
    #[error("`{file}`: field `component`: `{}` does not exist", component.display())]
    ComponentMissing {
        /// The manifest file, as shown in messages.
        file: String,
        /// The component path it names, resolved against the manifest's directory.
        component: PathBuf,
    },

    /// The component's sha256 is not the digest the manifest pins.
    #[error(
        "DIGEST_MISMATCH: component `{}` has sha256 `{actual}`, but its manifest pins `{expected}`",
        component.display()
    )]
    DigestMismatch {
        /// The component file.
        component: PathBuf,
        /// The sha256 its manifest pins.
        expected: String,
        /// The file's sha256.
        actual: String,
    },

    /// Two manifests in the searched directories declare the same name.
    /// Refused rather than picking one, so which code runs never depends on
    /// directory order.
    #[error(
        "executor `{name}` is defined by two manifests: `{}` and `{}`",
        first.display(),
        second.display()
    )]
    DuplicateName {
        /// The executor name both declare.
        name: String,
        /// The first manifest found.
        first: PathBuf,
        /// The second manifest.
        second: PathBuf,
    },
}

impl ManifestError {
    /// Whether the error is the user's input being wrong (a parse, validation
    /// or verification failure) rather than the host failing to read a file.
    /// Callers map `true` to their validation-failure exit code.
    pub fn is_invalid_input(&self) -> bool {
        !matches!(self, ManifestError::Io { .. })
    }

    /// The policy deny code this error stands for, if any.
    pub fn deny_code(&self) -> Option<DenyCode> {
        match self {
            ManifestError::DigestMismatch { .. } => Some(DenyCode::DigestMismatch),
            _ => None,
        }
    }
}
