//! Turns that may write the same place run one after the other.
//!
//! A turn's write roots are its read-write preopens (canonical). Before
//! its guest starts, a turn waits until no running turn of this host has
//! a write root equal to, inside or above one of its own, so undo's
//! "never destroys newer data" holds when a server runs calls in
//! parallel: a turn's journal never interleaves with another's on the
//! same files. Turns that only read, or write elsewhere, run at once.
//!
//! A delegated turn enters too: a callee's write roots that lie within a
//! root its caller (or a caller further up) already holds are its own to
//! use, and the others are waited for, up to what is left of its
//! deadline (two calls that wait on each other's roots end at their
//! deadlines, not never).

use std::path::PathBuf;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::sandbox::CancelHandle;
use crate::util::{lock, wait_timeout};

/// The write roots of the running turns.
#[derive(Default)]
pub(super) struct WriteRoots {
    active: Mutex<Vec<PathBuf>>,
    freed: Condvar,
}

/// Held while a turn runs: its roots are released when it drops.
pub(super) struct Held<'a> {
    owner: &'a WriteRoots,
    roots: Vec<PathBuf>,
    /// Whether the turn had to wait for another turn's roots.
    waited: bool,
}

fn overlap(a: &std::path::Path, b: &std::path::Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

impl WriteRoots {
    /// Waits until none of `roots` overlaps a running turn's, then holds
    /// them. `None` when `cancel` is set while waiting.
    pub(super) fn enter(&self, roots: Vec<PathBuf>, cancel: &CancelHandle) -> Option<Held<'_>> {
        self.enter_within(roots, &[], cancel, None).ok()
    }

    /// [`WriteRoots::enter`] as the turn pipeline enters, for a turn of
    /// either kind: the roots within one of `held` (those a delegated
    /// turn's callers hold: none for a top-level turn) are its own and not
    /// waited for; the wait ends when `cancel` is set, or at `until` (a
    /// delegated turn's deadline; a top-level turn waits as long as it
    /// takes).
    pub(super) fn enter_within(
        &self,
        roots: Vec<PathBuf>,
        held: &[PathBuf],
        cancel: &CancelHandle,
        until: Option<Instant>,
    ) -> Result<Held<'_>, Waited> {
        let roots: Vec<PathBuf> = roots
            .into_iter()
            .filter(|r| !held.iter().any(|h| r.starts_with(h)))
            .collect();
        if roots.is_empty() {
            return Ok(Held {
                owner: self,
                roots,
                waited: false,
            });
        }
        let mut active = lock(&self.active);
        let mut waited = false;
        while active
            .iter()
            .any(|held| roots.iter().any(|r| overlap(r, held)))
        {
            if cancel.is_cancelled() {
                return Err(Waited::Cancelled);
            }
            if until.is_some_and(|u| Instant::now() >= u) {
                return Err(Waited::Deadline);
            }
            // Woken when a turn ends; the timeout only rechecks the cancel
            // switch.
            waited = true;
            active = wait_timeout(&self.freed, active, Duration::from_millis(50));
        }
        active.extend(roots.iter().cloned());
        Ok(Held {
            owner: self,
            roots,
            waited,
        })
    }
}

/// Why a turn stopped waiting for its write roots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Waited {
    Cancelled,
    Deadline,
}

impl Held<'_> {
    /// The roots this guard holds.
    pub(super) fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Whether the turn waited for another turn's roots before it got
    /// them (time passed since the turn began: the component may have
    /// changed meanwhile).
    pub(super) fn waited(&self) -> bool {
        self.waited
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.roots.is_empty() {
            return;
        }
        let mut active = lock(&self.owner.active);
        for r in &self.roots {
            if let Some(i) = active.iter().position(|a| a == r) {
                active.swap_remove(i);
            }
        }
        drop(active);
        self.owner.freed.notify_all();
    }
}
