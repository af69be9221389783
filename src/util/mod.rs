//! Small helpers every layer shares: locks that survive a panicking
//! holder, the one streaming file digest, the string and error helpers
//! of every message, the no-follow directory openers (undo, exec) and
//! the file watcher (the host's grants, the sandbox's components).
//!
//! A leaf: it names nothing else in the crate, so any layer may use it
//! without an edge to another (the layering test in `tests/it/purity.rs`
//! holds it to that). The pure policy core does not use it: it names no
//! other module at all.

pub mod hash;
pub(crate) mod identity;
pub(crate) mod nofollow;
pub mod sqlite;
pub mod sync;
pub mod text;
pub mod watch;

pub use hash::{sha256_file, sha256_reader};
pub use sync::{lock, read, wait_timeout, write};
pub use text::{chain, lower, printable, redact_url, IoCause, Lowered};
