//! `memory:read` / `memory:write` → `gatehouse:executor/memory`, in the one
//! scope the plan grants. Linked only when one of the two is granted; a
//! call without its half of the grant returns `denied`, never traps.

use wasmtime::component::{HasData, Linker};

use super::bindings::gatehouse::executor::memory;
use super::bindings::gatehouse::executor::types::{Denial, Error};
use super::plan::MemoryGrant;
use crate::memory::{MemoryError, MemoryStore};
use crate::policy::snapshot::sha256_hex;
use crate::policy::DenyCode;
use crate::undo::{Operation, TurnJournal};

/// The memory a run may use.
pub struct MemoryBinding {
    pub store: MemoryStore,
    pub grant: MemoryGrant,
    /// Every write is journaled here before it is made.
    pub journal: Option<TurnJournal>,
    /// The most keys the scope may hold: a new key past it is refused
    /// with `LIMIT_MEMORY_KEYS` (a guest cannot grow the host's database
    /// without bound).
    pub max_keys: u64,
}

impl MemoryBinding {
    /// Journals `op` ahead of the write; a journal that cannot be written
    /// fails the write (nothing unjournaled is ever done).
    fn journal(&self, op: Operation) -> Result<(), Error> {
        match &self.journal {
            Some(j) => j
                .record(op)
                .map(|_| ())
                .map_err(|e| Error::Failed(format!("cannot journal the write: {e}"))),
            None => Ok(()),
        }
    }
}

fn denied(what: &str, need: &str, scope: &str) -> Error {
    Error::Denied(Denial {
        code: DenyCode::MemoryNotGranted.as_str().into(),
        reason: format!(
            "`{what}` needs `{need}` on scope `{scope}`, which this turn was not granted"
        ),
    })
}

fn failed(e: MemoryError) -> Error {
    match e {
        MemoryError::BadKey(_) | MemoryError::BadValue(_) => Error::InvalidInput(e.to_string()),
        MemoryError::Store { .. } => Error::Failed(e.to_string()),
    }
}

/// What the binding works on: the run's memory, when granted.
pub struct MemoryView<'a> {
    pub binding: Option<&'a MemoryBinding>,
}

impl MemoryView<'_> {
    fn memory_for(&self, op: &str, write: bool) -> Result<&MemoryBinding, Error> {
        let Some(m) = self.binding else {
            // Unreachable by construction (the interface is linked only with
            // a binding), answered as a denial rather than a panic.
            return Err(denied(op, "memory:read", "-"));
        };
        let ok = if write { m.grant.write } else { m.grant.read };
        if !ok {
            return Err(denied(
                op,
                if write { "memory:write" } else { "memory:read" },
                &m.grant.scope,
            ));
        }
        Ok(m)
    }
}

impl memory::Host for MemoryView<'_> {
    fn get(&mut self, key: String) -> Result<Option<String>, Error> {
        let m = self.memory_for("get", false)?;
        m.store.get(&m.grant.scope, &key).map_err(failed)
    }

    fn set(&mut self, key: String, value: String) -> Result<(), Error> {
        let m = self.memory_for("set", true)?;
        let scope = m.grant.scope.clone();
        let previous = m.store.get(&scope, &key).map_err(failed)?;
        if previous.is_none() && m.store.count(&scope).map_err(failed)? >= m.max_keys {
            return Err(Error::Denied(Denial {
                code: DenyCode::LimitMemoryKeys.as_str().into(),
                reason: format!(
                    "scope `{scope}` holds {} keys, its cap; `{key}` would be one more",
                    m.max_keys
                ),
            }));
        }
        m.journal(Operation::MemorySet {
            scope: scope.clone(),
            key: key.clone(),
            previous,
            value_sha256: sha256_hex(value.as_bytes()),
        })?;
        m.store.set(&scope, &key, &value).map_err(failed)
    }

    fn delete(&mut self, key: String) -> Result<bool, Error> {
        let m = self.memory_for("delete", true)?;
        let scope = m.grant.scope.clone();
        let previous = m.store.get(&scope, &key).map_err(failed)?;
        m.journal(Operation::MemoryDelete {
            scope: scope.clone(),
            key: key.clone(),
            previous,
        })?;
        m.store.delete(&scope, &key).map_err(failed)
    }

    fn list(&mut self, prefix: String) -> Result<Vec<String>, Error> {
        let m = self.memory_for("list", false)?;
        m.store.list(&m.grant.scope, &prefix).map_err(failed)
    }
}

struct HasMemory;

impl HasData for HasMemory {
    type Data<'a> = MemoryView<'a>;
}

/// Links `gatehouse:executor/memory`.
///
/// # Security
/// Gives the guest the memory of the binding's scope (read and/or write as
/// granted); link only with a binding built from the plan.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    getter: fn(&mut T) -> MemoryView<'_>,
) -> wasmtime::Result<()> {
    memory::add_to_linker::<T, HasMemory>(linker, getter)
}
