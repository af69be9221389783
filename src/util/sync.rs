//! Locks taken whether or not a holder panicked.
//!
//! A lock is poisoned when a thread panics while holding it. Every lock
//! these helpers take guards data that each update leaves whole (a cache
//! entry inserted, a set of roots extended, a snapshot swapped): a panic
//! cannot leave it half-written, so the data is used as it is rather
//! than failing every later turn. Where a poisoned value must not be
//! trusted (the network allow-set, a turn's journal), the caller matches
//! on the lock itself instead.

use std::sync::{
    Condvar, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
};
use std::time::Duration;

/// `mutex`, locked (see the module documentation for why a poisoned one
/// is used as it is).
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `lock`, locked for reading.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

/// `lock`, locked for writing.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `condvar` for at most `timeout` with `guard` released, and
/// returns it locked again (whether woken or timed out: the caller
/// rechecks its condition either way).
pub fn wait_timeout<'a, T>(
    condvar: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Duration,
) -> MutexGuard<'a, T> {
    match condvar.wait_timeout(guard, timeout) {
        Ok((guard, _)) => guard,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

/// How often the append-only logs and the audit chain's file are synced
/// to disk (see `undo::append::SYNC_EVERY` for why this often).
pub const LOG_SYNC_EVERY: Duration = Duration::from_millis(20);

/// Starts a thread named `name` that calls `sync` on `target` every
/// `period` for as long as `target` lives (a log's background sync). A
/// thread that cannot be started is warned of: the target then syncs only
/// when it is dropped.
pub fn every<T: Send + Sync + 'static>(
    period: Duration,
    name: &str,
    target: std::sync::Weak<T>,
    sync: fn(&T) -> Result<(), String>,
) {
    let spawned = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || loop {
            std::thread::sleep(period);
            match target.upgrade() {
                Some(t) => {
                    if let Err(e) = sync(&t) {
                        tracing::warn!("{e}");
                    }
                }
                None => return,
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start `{name}`: {e}; records are synced at shutdown");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_is_used_as_it_is() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let r = std::sync::Arc::new(RwLock::new(2));
        let (m2, r2) = (m.clone(), r.clone());
        let _ = std::thread::spawn(move || {
            let _m = m2.lock().unwrap();
            let _r = r2.write().unwrap();
            panic!("poison both");
        })
        .join();
        assert!(m.is_poisoned() && r.is_poisoned());
        *lock(&m) += 1;
        assert_eq!(*lock(&m), 2);
        *write(&r) += 1;
        assert_eq!(*read(&r), 3);
        let cv = Condvar::new();
        let g = wait_timeout(&cv, lock(&m), Duration::from_millis(1));
        assert_eq!(*g, 2);
    }
}
