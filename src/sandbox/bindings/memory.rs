//! `memory:read` / `memory:write` → `gatehouse:executor/memory`, in the one
//! scope the plan grants. Linked only when one of the two is granted; a
//! call without its half of the grant returns `denied`, never traps. The
//! database is opened at the first call, so a run that never uses its
//! memory never opens it.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use wasmtime::component::{HasData, Linker};

use super::wit::gatehouse::executor::memory;
use super::wit::gatehouse::executor::types::{Denial, Error};
use super::{Open, OpenError, Prepare, PrepareError, Unit};
use crate::policy::snapshot::sha256_hex;
use crate::policy::DenyCode;
use crate::sandbox::HostState;
use crate::state::memory::{MemoryBackend, MemoryError};
use crate::undo::{Operation, TurnJournal};

/// The memory namespace a turn may use, and how (neither read nor write,
/// and nothing linked, without a grant).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MemoryPart {
    /// The memory scope granted.
    pub scope: String,
    /// Whether `memory:read` was granted on it.
    pub read: bool,
    /// Whether `memory:write` was granted on it.
    pub write: bool,
}

/// The memory a run may use.
pub struct MemoryState {
    /// The host's memory store (its SQLite file is opened at the first
    /// call of any run; a fleet's is its database).
    db: Arc<dyn MemoryBackend>,
    /// The scope and how it may be used.
    pub grant: MemoryPart,
    /// Every write is journaled here before it is made.
    pub journal: Option<TurnJournal>,
    /// The most keys the scope may hold: a new key past it is refused
    /// with `LIMIT_MEMORY_KEYS` (a guest cannot grow the host's database
    /// without bound).
    pub max_keys: u64,
}

impl MemoryState {
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
        MemoryError::Store { .. } | MemoryError::Shared(_) => Error::Failed(e.to_string()),
    }
}

/// What the binding works on: the run's memory.
pub struct MemoryView<'a> {
    /// The run's memory state.
    pub state: &'a MemoryState,
}

impl MemoryView<'_> {
    fn memory_for(&self, op: &str, write: bool) -> Result<&MemoryState, Error> {
        let m = self.state;
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
        m.db.get(&m.grant.scope, &key).map_err(failed)
    }

    fn set(&mut self, key: String, value: String) -> Result<(), Error> {
        let m = self.memory_for("set", true)?;
        let scope = &m.grant.scope;
        // The cap and the journal see the scope under its write lock: no
        // other writer (another run, another host of the fleet) comes
        // between them and the write.
        let mut refused = None;
        let written =
            m.db.set_if(scope, &key, &value, &mut |previous, count| {
                if previous.is_none() && count >= m.max_keys {
                    refused = Some(Error::Denied(Denial {
                        code: DenyCode::LimitMemoryKeys.as_str().into(),
                        reason: format!(
                            "scope `{scope}` holds {} keys, its cap; `{key}` would be one more",
                            m.max_keys
                        ),
                    }));
                    return false;
                }
                let journaled = m.journal(Operation::MemorySet {
                    scope: scope.clone(),
                    key: key.clone(),
                    previous: previous.map(String::from),
                    value_sha256: sha256_hex(value.as_bytes()),
                });
                match journaled {
                    Ok(()) => true,
                    Err(e) => {
                        refused = Some(e);
                        false
                    }
                }
            })
            .map_err(failed)?;
        match refused {
            Some(e) => Err(e),
            None if written => Ok(()),
            None => Err(Error::Failed(format!("`{key}` was not written"))),
        }
    }

    fn delete(&mut self, key: String) -> Result<bool, Error> {
        let m = self.memory_for("delete", true)?;
        let scope = &m.grant.scope;
        let mut refused = None;
        let deleted =
            m.db.delete_if(
                scope,
                &key,
                &mut |previous| match m.journal(Operation::MemoryDelete {
                    scope: scope.clone(),
                    key: key.clone(),
                    previous: previous.map(String::from),
                }) {
                    Ok(()) => true,
                    Err(e) => {
                        refused = Some(e);
                        false
                    }
                },
            )
            .map_err(failed)?;
        match (refused, deleted) {
            (Some(e), _) => Err(e),
            (None, Some(existed)) => Ok(existed),
            (None, None) => Err(Error::Failed(format!("`{key}` was not deleted"))),
        }
    }

    fn list(&mut self, prefix: String) -> Result<Vec<String>, Error> {
        let m = self.memory_for("list", false)?;
        m.db.list(&m.grant.scope, &prefix).map_err(failed)
    }
}

struct HasMemory;

impl HasData for HasMemory {
    type Data<'a> = MemoryView<'a>;
}

/// The memory unit.
pub struct Memory;

impl Unit for Memory {
    type Part = MemoryPart;
    type State = MemoryState;
    /// The host's memory store (the stores').
    type Runtime = Arc<dyn MemoryBackend>;

    /// The part's scope in the host's memory database, each write
    /// journaled into the turn's journal.
    ///
    /// # Security
    /// Hands the guest the part's scope, read and/or write as granted.
    fn open(cx: &Open<'_>) -> Result<Arc<dyn MemoryBackend>, OpenError> {
        Ok(cx.stores.memory.clone())
    }

    fn prepare(
        part: &MemoryPart,
        db: &Arc<dyn MemoryBackend>,
        cx: &mut Prepare<'_>,
    ) -> Result<MemoryState, PrepareError> {
        Ok(MemoryState {
            db: db.clone(),
            grant: part.clone(),
            journal: cx.services.journal.clone(),
            max_keys: cx.plan.limits().memory_keys,
        })
    }

    fn describe(part: &MemoryPart, _: &MemoryState, out: &mut Vec<Cow<'static, str>>) {
        if part.read || part.write {
            out.push(Cow::Owned(format!(
                "memory scope `{}`{}{}",
                part.scope,
                if part.read { ", read" } else { "" },
                if part.write { ", write" } else { "" }
            )));
        }
    }
}

/// Links `gatehouse:executor/memory`.
///
/// # Security
/// Gives the guest the memory of the state's scope (read and/or write as
/// granted); the table links it only when the plan grants memory.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    memory::add_to_linker::<HostState, HasMemory>(linker, |s| MemoryView { state: &s.memory })
}
