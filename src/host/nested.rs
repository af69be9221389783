//! The narrow services the host gives a run (see
//! [`crate::sandbox::services`]): the `tool` layers bound to the actor, and
//! delegation as a nested turn: the delegation decision, then the same
//! pipeline as every turn ([`Kind::Nested`]), with its decisions in the
//! caller's audit.

use std::path::PathBuf;
use std::sync::Arc;

use super::audit::TurnAudit;
use super::gate::Step;
use super::pipeline::{Call, Ended, Kind, Turn};
use super::roots::WriteRoots;
use super::{Frozen, TurnEnd, TurnRequest};
use crate::config::{ProviderDef, ValueSource};
use crate::manifest::Manifest;
use crate::policy::{decide, Decision, DenyCode, Request, RequestKind};
use crate::sandbox::services::{
    CommandScreen, HttpClient, NestedError, NestedTurn, ProviderSecret,
};
use crate::sandbox::{GuestResult, OnDegraded, Plan, RunServices, Sandbox};
use crate::undo::TurnJournal;
use crate::util::identity::FileIdentity;

/// What the services of one turn (and its nested turns) are bound to.
#[derive(Clone)]
pub(super) struct Scope {
    pub manifests: Arc<Vec<Manifest>>,
    pub providers: Arc<[ProviderDef]>,
    pub http: Arc<HttpClient>,
    pub on_degraded: OnDegraded,
    pub memory: Arc<dyn crate::state::memory::MemoryBackend>,
    pub frozen: Arc<Frozen>,
    pub sandbox: Arc<Sandbox>,
    pub audit: Arc<TurnAudit>,
    pub request: TurnRequest,
    /// The id of the turn these services run (`<caller>.<callee>` when
    /// nested).
    pub turn: String,
    /// The host's write-root lock, which a delegated turn enters too.
    pub write_roots: Arc<WriteRoots>,
    /// The write roots this turn and its callers hold: a callee may use
    /// what lies within them without waiting for itself.
    pub held: Vec<PathBuf>,
}

/// What every run's services are built from (see [`services`]).
pub(super) struct Base<'a> {
    pub http: &'a Arc<HttpClient>,
    /// The host's watch, read at this turn's start: a provider's value
    /// file it says is unchanged is not looked at again.
    pub watcher: Option<&'a crate::util::watch::Watcher>,
    pub providers: &'a [ProviderDef],
    pub memory: Arc<dyn crate::state::memory::MemoryBackend>,
    pub frozen: &'a Arc<Frozen>,
    pub audit: &'a Arc<TurnAudit>,
    pub request: &'a TurnRequest,
    /// Who is asked about each command line of a `code:exec` allowed
    /// once (a top-level turn's; a nested turn takes no approvals).
    pub commands: Option<Arc<dyn crate::sandbox::services::CommandApproval>>,
}

/// The services of a run of `plan` at `depth`, journaled into `journal`:
/// only what the plan can use. The command screen is bound to the actor
/// only for a plan that may run a command (`code:exec`, a command
/// executor), delegation (and the `Scope` it keeps, made by `scope`) only
/// for one allowed `delegate:call`; any other plan gets a screen that
/// refuses every command and no delegation, which its run never asks for
/// (the `exec` and `delegate` interfaces are not linked for it).
pub(super) fn services(
    base: Base<'_>,
    plan: &Plan,
    depth: u32,
    journal: Option<TurnJournal>,
    scope: impl FnOnce() -> Scope,
) -> RunServices {
    let screen: Arc<dyn CommandScreen> =
        if plan.parts().exec.tools.is_empty() && !plan.runnable().is_command() {
            Arc::new(NoCommands)
        } else {
            Arc::new(ActorScreen {
                frozen: base.frozen.clone(),
                actor: base.request.actor.clone(),
            })
        };
    let nested: Option<Arc<dyn NestedTurn>> = if plan.parts().delegate.callees.is_empty() {
        None
    } else {
        Some(Arc::new(Nested(scope())))
    };
    RunServices {
        memory: base.memory,
        depth,
        journal,
        audit: base.audit.clone(),
        screen,
        cancel: base.request.cancel.clone(),
        asker: base.request.asker.clone(),
        commands: base.commands,
        nested,
        // The granted variables' values, read here (the host's edge), not
        // in the sandbox.
        env: plan
            .parts()
            .env
            .names
            .iter()
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
            .collect(),
        http: base.http.clone(),
        // The providers' values, read here too, and only for the
        // providers the plan was allowed.
        secrets: plan
            .parts()
            .http
            .providers
            .iter()
            .filter_map(|p| base.providers.iter().find(|d| d.name == p.name))
            .map(|d| ProviderSecret::new(d.name.clone(), read_value(d, base.watcher)))
            .collect(),
    }
}

/// The value of provider `def`, from the host's environment or a file that
/// only its owner may read. With `watcher` (read at this turn's start), a
/// file read before is looked at again only when the watch says it may
/// have changed: a write, a rename over it, a `chmod` (see
/// [`crate::util::watch`]).
fn read_value(
    def: &ProviderDef,
    watcher: Option<&crate::util::watch::Watcher>,
) -> Result<String, String> {
    match &def.value {
        ValueSource::Env(var) => std::env::var(var).map_err(|_| {
            format!(
                "provider `{}`: the variable `{var}` is not set on the host",
                def.name
            )
        }),
        ValueSource::File(path) => {
            use std::os::unix::fs::PermissionsExt;
            // Watched before it is looked at: a change after this is seen.
            // A key this watcher gave is re-armed by its own check; a path
            // it could not watch is not tried again (a `stat` every turn).
            let mut watch = None;
            if let Some(w) = watcher {
                let key = match secret_files::watched(path, w.id()) {
                    Some((value, Some(key))) => {
                        if w.check_drained(key, || ()).is_none() {
                            return Ok(value);
                        }
                        Some(key)
                    }
                    Some((_, None)) => None,
                    None => w.watch(&[path]),
                };
                watch = Some((w.id(), key));
            }
            let shown = path.display();
            let meta = std::fs::metadata(path).map_err(|e| {
                format!(
                    "provider `{}`: `{shown}`: {}",
                    def.name,
                    crate::util::lower(&e.to_string())
                )
            })?;
            if meta.permissions().mode() & 0o077 != 0 {
                return Err(format!(
                    "provider `{}`: `{shown}` may be read by others (mode {:o}); make it 0600",
                    def.name,
                    meta.permissions().mode() & 0o777
                ));
            }
            let stamp = FileIdentity::of(&meta);
            if let Some(value) = secret_files::get(path, &stamp, watch) {
                return Ok(value);
            }
            let value = std::fs::read_to_string(path)
                .map(|v| v.trim_end_matches(['\n', '\r']).to_string())
                .map_err(|e| {
                    format!(
                        "provider `{}`: `{shown}`: {}",
                        def.name,
                        crate::util::lower(&e.to_string())
                    )
                })?;
            secret_files::put(path, stamp, &value, watch);
            Ok(value)
        }
    }
}

/// The provider values read from files, each kept while its file's
/// [`FileIdentity`] holds: a turn then costs one `stat` of the file (its
/// mode is checked at every turn) instead of an open and reads, or
/// nothing while the host's watch says the file is unchanged. Process
/// memory the values are in anyway while turns use them.
mod secret_files {
    use std::path::{Path, PathBuf};
    use std::sync::Mutex;

    use super::FileIdentity;
    use crate::util::watch::WatchKey;

    struct Kept {
        path: PathBuf,
        stamp: FileIdentity,
        value: String,
        /// The watcher that looked at the path before the value was read,
        /// and its key (`None`: it cannot watch the path).
        watch: Option<(u64, Option<WatchKey>)>,
    }

    static READ: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

    /// The value kept for `path` and its key in watcher `watcher` (`None`:
    /// that watcher cannot watch it), when that watcher looked at it.
    pub(super) fn watched(path: &Path, watcher: u64) -> Option<(String, Option<WatchKey>)> {
        crate::util::lock(&READ)
            .iter()
            .find(|k| k.path == path)
            .and_then(|k| match k.watch {
                Some((w, key)) if w == watcher => Some((k.value.clone(), key)),
                _ => None,
            })
    }

    /// The value read from `path` when its stamp was `stamp`, now under
    /// `watch` (armed before the stamp was taken).
    pub(super) fn get(
        path: &Path,
        stamp: &FileIdentity,
        watch: Option<(u64, Option<WatchKey>)>,
    ) -> Option<String> {
        let mut read = crate::util::lock(&READ);
        let kept = read
            .iter_mut()
            .find(|k| k.path == path && k.stamp == *stamp)?;
        kept.watch = watch;
        Some(kept.value.clone())
    }

    /// Keeps `value`, read from `path` at `stamp` under `watch` (replacing
    /// what was kept for it).
    pub(super) fn put(
        path: &Path,
        stamp: FileIdentity,
        value: &str,
        watch: Option<(u64, Option<WatchKey>)>,
    ) {
        let mut read = crate::util::lock(&READ);
        read.retain(|k| k.path != path);
        read.push(Kept {
            path: path.to_path_buf(),
            stamp,
            value: value.to_string(),
            watch,
        });
    }
}

/// The screen of a plan that may run no command.
struct NoCommands;

impl CommandScreen for NoCommands {
    fn screen(&self, tool: &str, _command: &str) -> Result<(), (DenyCode, String)> {
        Err((
            DenyCode::ToolNotGranted,
            format!("`{tool}`: this turn was allowed no command"),
        ))
    }
}

/// The `tool` layers of the policy, bound to one actor and snapshot.
struct ActorScreen {
    frozen: Arc<Frozen>,
    actor: String,
}

impl CommandScreen for ActorScreen {
    fn screen(&self, tool: &str, command: &str) -> Result<(), (DenyCode, String)> {
        let request = Request::new(
            &self.actor,
            RequestKind::Tool {
                tool: tool.to_string(),
                command: Some(command.to_string()),
            },
        );
        match decide(
            &self.frozen.snapshot,
            &request,
            crate::state::grants::now_utc(),
        ) {
            Decision::Allow { .. } => Ok(()),
            Decision::Deny { code, reason } => Err((code, reason)),
            Decision::ApprovalRequired { reason, .. } => Err((DenyCode::ApprovalRequired, reason)),
        }
    }
}

/// Delegation: a callee runs as a nested turn, through the same pipeline
/// ([`Kind::pipeline`]) and snapshot, under the caller's limits (its deadline what is left of the
/// caller's) and cancel switch, its decisions in the caller's audit. A
/// callee named `EXECUTOR` runs as the caller's own actor; one named
/// `ACTOR/EXECUTOR` is a delegation to ACTOR, which the policy's
/// `delegation` kind decides first (`DELEGATION_NOT_ALLOWED` when ACTOR is
/// not in the caller's `delegates_to`, `UNKNOWN_TARGET` when it is not
/// defined), and the callee is then gated and run as ACTOR: its skills,
/// workspaces, grants (its identity) and tools. The level is the
/// snapshot's one level (actors carry none). An approval it would need
/// cannot be asked from inside a call: it comes back as
/// `APPROVAL_REQUIRED`.
struct Nested(Scope);

impl NestedTurn for Nested {
    fn call(
        &self,
        executor: &str,
        input: &str,
        depth: u32,
        left: std::time::Duration,
        journal: Option<TurnJournal>,
    ) -> Result<String, NestedError> {
        let scope = &self.0;
        // The callee gets what is left of its caller's deadline, no more.
        let mut limits = scope.request.limits;
        limits.deadline_ms = limits
            .deadline_ms
            .min(u64::try_from(left.as_millis()).unwrap_or(u64::MAX))
            .max(1);
        let turn = format!("{}.{executor}", scope.turn);
        let now = crate::state::grants::now_utc();
        // `ACTOR/EXECUTOR` delegates to ACTOR, as the policy's `delegation`
        // kind decides; a bare `EXECUTOR` runs as the caller's own actor.
        let (actor, name) = match executor.split_once('/') {
            Some((target, name)) => {
                let request = Request::new(
                    &scope.request.actor,
                    RequestKind::Delegation {
                        target: target.to_string(),
                    },
                );
                let decision = decide(&scope.frozen.snapshot, &request, now);
                let denied = match &decision {
                    Decision::Allow { .. } => None,
                    Decision::Deny { code, reason } => Some((*code, reason.clone())),
                    Decision::ApprovalRequired { reason, .. } => {
                        Some((DenyCode::ApprovalRequired, reason.clone()))
                    }
                };
                scope.audit.record_nested_gate(
                    &turn,
                    &scope.frozen.tail(&scope.request.actor),
                    &[Step {
                        request,
                        decision,
                        approval: None,
                    }],
                );
                if let Some((code, reason)) = denied {
                    return Err(NestedError::Denied {
                        code,
                        reason: format!("`{executor}`: {reason}"),
                    });
                }
                (target.to_string(), name)
            }
            None => (scope.request.actor.clone(), executor),
        };
        let Some(manifest) = scope.manifests.iter().find(|m| m.name == name) else {
            return Err(NestedError::Denied {
                code: DenyCode::UnknownRequest,
                reason: format!("executor `{name}` is not known to this turn"),
            });
        };
        // The callee's request: the call's input and no streams, under the
        // caller's limits (its deadline what is left of the caller's),
        // cancel switch and asker, as the actor it runs as (its command
        // screen and its own delegations are bound to that actor).
        let request = TurnRequest {
            executor: name.to_string(),
            actor,
            input: input.to_string(),
            limits,
            cancel: scope.request.cancel.clone(),
            io: crate::sandbox::RunIo::default(),
            asker: scope.request.asker.clone(),
            progress: None,
            // A delegated turn takes no approvals: nobody is asked.
            approver: None,
        };
        let mut t = Turn::new(&request, &turn, scope.frozen.clone());
        let kind = Kind::Nested(Call {
            scope,
            callee: executor,
            depth,
            journal,
            left,
        });
        answer(
            executor,
            kind.pipeline(&mut t, manifest, &super::gate::Once::default(), now),
        )
    }
}

/// What the caller's guest gets of a nested turn that ended `ended`: the
/// callee's output, or why there is none, naming the callee as `callee`.
fn answer(callee: &str, ended: Ended) -> Result<String, NestedError> {
    let failed = |message: String| Err(NestedError::Failed(format!("`{callee}`: {message}")));
    match ended {
        Ended::Approval(pending) => {
            let what: Vec<String> = pending
                .iter()
                .map(|p| format!("`{}`", p.capability))
                .collect();
            Err(NestedError::Denied {
                code: DenyCode::ApprovalRequired,
                reason: format!(
                    "`{callee}` needs an approval for {} that cannot be asked inside a call",
                    what.join(", ")
                ),
            })
        }
        Ended::Refused { code, reason } => Err(NestedError::Denied { code, reason }),
        Ended::RunRefused { code, reason, .. } => Err(NestedError::Denied {
            code,
            reason: format!("`{callee}`: {code}: {reason}"),
        }),
        Ended::Failed(message) => failed(message),
        Ended::Ran(TurnEnd::Ran { run }) => match run.result {
            GuestResult::Ok { output } => Ok(output),
            GuestResult::Err { error } => Err(NestedError::Failed(format!(
                "`{callee}` returned an error: {error}"
            ))),
        },
        Ended::Ran(
            TurnEnd::Stopped {
                code: Some(code),
                message: reason,
                ..
            }
            | TurnEnd::Refused { code, reason },
        ) => Err(NestedError::Denied {
            code,
            reason: format!("`{callee}`: {reason}"),
        }),
        Ended::Ran(
            TurnEnd::Stopped { message, .. }
            | TurnEnd::Invalid { message }
            | TurnEnd::Failed { message },
        ) => failed(message),
    }
}
