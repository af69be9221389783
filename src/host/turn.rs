//! The pipeline of one turn: answers taken, the gate, the probe, the run,
//! and how each way of ending is recorded (see the module documentation of
//! [`super`] for what is written when). From the gate to the run's end a
//! top-level turn takes the one pipeline every turn takes
//! ([`Kind::pipeline`], with [`Kind::Top`]).

use std::sync::Arc;

use super::gate::Gate;
use super::pipeline::{Ended, Kind, Turn};
use super::{
    build_snapshot, Answer, ApprovalRequest, Choice, DenialRecord, Frozen, HostError, Inner,
    Pending, TurnEnd, TurnOutcome, TurnRequest,
};
use crate::manifest::Manifest;
use crate::policy::snapshot::sha256_hex;
use crate::policy::DenyCode;
use crate::sandbox::{EngineProfile, Limits, Sandbox};
use crate::state::approvals::{self as queue, TurnKey, Verdict};
use crate::state::grants::{now_utc, NewGrant};
use crate::state::KIND_DENIAL;
use crate::util::chain;

/// The grants database as `stat` sees it: size and modification time of
/// the file and of its write-ahead log (where SQLite commits first).
pub(super) type GrantsStamp = [Option<(u64, std::time::SystemTime)>; 2];

/// The grants database and its write-ahead log.
pub(super) struct GrantsPaths([std::path::PathBuf; 2]);

impl GrantsPaths {
    pub(super) fn each(&self) -> [&std::path::Path; 2] {
        [&self.0[0], &self.0[1]]
    }
}

/// The files of `state`'s grants database.
pub(super) fn grants_paths(state: &crate::config::StatePaths) -> GrantsPaths {
    let mut wal = state.grants_db.clone().into_os_string();
    wal.push("-wal");
    GrantsPaths([state.grants_db.clone(), wal.into()])
}

/// The [`GrantsStamp`] of `state`'s grants database now.
pub(super) fn grants_stamp(state: &crate::config::StatePaths) -> GrantsStamp {
    let of = |p: &std::path::Path| {
        std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.len(), m.modified().ok()?)))
    };
    let paths = grants_paths(state);
    let [db, wal] = paths.each();
    [of(db), of(wal)]
}

/// Where [`Inner::advance`] got to.
pub(super) enum Advance {
    Done(Box<TurnOutcome>),
    /// The gate needs approvals and none were given yet.
    Parked(Box<ApprovalRequest>),
}

/// A queued answer a turn took: its entry, and the command lines of a
/// `code:exec` allowed once that it approved.
pub(super) struct Taken {
    pub entry: String,
    pub commands: Vec<Vec<String>>,
}

/// What the answers given so far allow.
#[derive(Default)]
struct Answered {
    once: super::needs::Once,
    refused: Option<Pending>,
}

impl Inner {
    pub(super) fn frozen(&self) -> Arc<Frozen> {
        crate::util::read(&self.policy.snapshot).clone()
    }

    /// Rebuilds the snapshot when the grants database changed since it
    /// was built; a database that cannot be read keeps the snapshot
    /// (logged). With a watch on the database, its files are looked at
    /// only when the watch says they may have changed (a write, a rename,
    /// a new write-ahead log: see [`crate::util::watch`]); the check and
    /// the rebuild happen with the watcher held, so no turn runs ahead of
    /// a rebuild another turn is making.
    ///
    /// A fleet's grants that cannot be read fail it: the turn is refused
    /// (`STATE_UNAVAILABLE`) rather than decided on grants that may have
    /// been revoked meanwhile.
    pub(super) fn reread_grants(&self) -> Result<(), String> {
        if let Some(generation) = self.stores.grants.generation() {
            // No grants file to watch, but the watch also carries the
            // components': read it once for this turn, as below.
            if let Some(watcher) = &self.watcher {
                watcher.drain();
            }
            return self.reread_shared_grants(generation);
        }
        match (&self.watcher, self.policy.grants_key) {
            (Some(watcher), Some(key)) => {
                watcher.check(key, || self.reread_grants_now());
            }
            (Some(watcher), None) => {
                watcher.drain();
                self.reread_grants_now();
            }
            (None, _) => self.reread_grants_now(),
        }
        Ok(())
    }

    /// [`Inner::reread_grants`] of a fleet's grants: the snapshot is
    /// rebuilt when their version moved since it was built. A database
    /// that cannot be asked keeps the snapshot (logged); the turn's audit,
    /// which needs the same database, refuses the turn then.
    fn reread_shared_grants(
        &self,
        generation: Result<u64, crate::state::grants::GrantError>,
    ) -> Result<(), String> {
        let now = generation.map_err(|e| format!("cannot read the grants: {}", chain(&e)))?;
        let mut seen = crate::util::lock(&self.policy.grants_generation);
        if *seen == Some(now) {
            return Ok(());
        }
        // Held while rebuilding: no turn decides ahead of a rebuild
        // another turn is making.
        self.refresh_snapshot()
            .map_err(|e| format!("cannot read the grants: {}", chain(&e)))?;
        *seen = Some(now);
        Ok(())
    }

    /// The end of a turn refused because the shared state could not be
    /// used: `STATE_UNAVAILABLE`, before anything ran.
    pub(super) fn unavailable(
        &self,
        request: &TurnRequest,
        id: &str,
        reason: String,
    ) -> TurnOutcome {
        let t = self.turn(request, id);
        self.refuse(t, DenyCode::StateUnavailable, reason, None)
    }

    fn reread_grants_now(&self) {
        let now = grants_stamp(&self.state);
        let changed = match self.policy.grants_stamp.lock() {
            Ok(s) => *s != now,
            Err(_) => true,
        };
        if changed {
            if let Err(e) = self.refresh_snapshot() {
                tracing::warn!("cannot reread the grants: {}", chain(&e));
            }
        }
    }

    fn refresh_snapshot(&self) -> Result<(), HostError> {
        // Stamped before reading: a change made while reading shows up as
        // a change at the next turn.
        let stamp = grants_stamp(&self.state);
        let mut snap = build_snapshot(
            &*self.stores.grants,
            &self.config,
            &self.state,
            &self.runtimes.manifests,
            &self.settings.workspace,
            self.settings.home.as_deref(),
            self.settings.level,
        )?;
        if let Some(frozen) = self.policy.allow_set.get() {
            // A frozen allow set only narrows: of its grants, those still
            // unrevoked (by id), each as it was frozen (a later expiry
            // recorded since does not lengthen it); nothing recorded since.
            snap.grants = frozen
                .iter()
                .filter(|g| snap.grants.iter().any(|now| now.id == g.id))
                .cloned()
                .collect();
        }
        *crate::util::write(&self.policy.snapshot) = Arc::new(Frozen::new(snap));
        *crate::util::lock(&self.policy.grants_stamp) = stamp;
        Ok(())
    }

    pub(super) fn profile(&self) -> EngineProfile {
        super::engine_profile(
            &self.config,
            self.settings.engine,
            self.settings
                .max_memory_bytes
                .max(Limits::default().memory_bytes),
        )
    }

    /// The engine, built and probed on first use.
    pub(super) fn sandbox(&self) -> Result<&Arc<Sandbox>, HostError> {
        self.sandbox
            .get_or_init(|| {
                Sandbox::with_profile(&self.state.cache_dir, &self.profile())
                    .map(|mut s| {
                        if let Some(w) = &self.watcher {
                            s.share_watcher(w.clone());
                        }
                        s.isolation().log();
                        Arc::new(s)
                    })
                    .map_err(Arc::new)
            })
            .as_ref()
            .map_err(|e| HostError::Engine(e.clone()))
    }

    pub(super) fn manifest(&self, name: &str) -> Option<&Manifest> {
        self.runtimes.manifests.iter().find(|m| m.name == name)
    }

    /// Finishes a turn with the answers `given`; never parks it again.
    pub(super) fn answered(
        &self,
        request: &TurnRequest,
        id: &str,
        given: Vec<(Pending, Choice)>,
        queued: Option<&Taken>,
    ) -> TurnOutcome {
        match self.advance(request, id, given, queued) {
            Advance::Done(outcome) => *outcome,
            // Unreachable with answers given (the gate then ends the turn
            // itself); ended the same way rather than trusted.
            Advance::Parked(approval) => {
                let mut t = self.turn(request, id);
                t.pending = approval.pending;
                self.refuse(
                    t,
                    DenyCode::ApprovalRequired,
                    "the approvals given do not cover the turn".into(),
                    None,
                )
            }
        }
    }

    fn turn<'a>(&self, request: &'a TurnRequest, id: &'a str) -> Turn<'a> {
        Turn::new(request, id, self.frozen())
    }

    /// What a queued answer is matched on, for `request` under the
    /// current snapshot.
    pub(super) fn turn_key(&self, request: &TurnRequest) -> TurnKey {
        let frozen = self.frozen();
        let executor_sha256 = match self.manifest(&request.executor) {
            Some(m) if m.sha256.is_some() => m.sha256.clone().unwrap_or_default(),
            Some(m) if !m.command.is_empty() => {
                sha256_hex(crate::policy::snapshot::canonical_json(&m.command).as_bytes())
            }
            Some(m) => {
                crate::util::sha256_file(&m.component).unwrap_or_else(|_| "unreadable".into())
            }
            None => String::new(),
        };
        let argv: Vec<String> = match self.manifest(&request.executor) {
            Some(m) if !m.command.is_empty() => {
                m.command.iter().chain(&request.io.args).cloned().collect()
            }
            _ => Vec::new(),
        };
        let files = file_args(&argv, &self.settings.workspace);
        TurnKey {
            argv,
            files,
            commands: Vec::new(),
            actor: request.actor.clone(),
            identity: frozen
                .snapshot
                .actors
                .get(&request.actor)
                .and_then(|a| a.identity.clone()),
            executor: request.executor.clone(),
            executor_sha256,
            input_sha256: sha256_hex(request.input.as_bytes()),
            args_sha256: queue::args_sha256(&request.io.args),
            definition_hash: frozen.hashes.definition.clone(),
            policy_hash: frozen.hashes.policy.clone(),
        }
    }

    /// A parked turn answered from the pending-approval queue: an entry
    /// the person allowed (once) or denied that matches this turn
    /// exactly, consumed by it. `None`: the queue is off or holds no such
    /// answer (a queue that cannot be read counts as empty, logged).
    pub(super) fn answered_by_queue(
        &self,
        request: &TurnRequest,
        id: &str,
        approval: &ApprovalRequest,
    ) -> Option<TurnOutcome> {
        if !self.settings.approval_queue {
            return None;
        }
        let key = self.turn_key(request);
        let verdict = match self.stores.approvals.take(
            id,
            &key,
            &super::needs::queued(&approval.pending),
            now_utc(),
        ) {
            Ok(v) => v?,
            Err(e) => {
                tracing::warn!("turn `{id}`: cannot read the approval queue: {}", chain(&e));
                return None;
            }
        };
        match verdict {
            Verdict::Allowed {
                id: entry,
                commands,
            } => {
                let given = approval
                    .pending
                    .iter()
                    .map(|p| (p.clone(), Choice::Once))
                    .collect();
                // With the command lines the answer was given for (an
                // entry queued while a guest ran): this turn may run those.
                let taken = Taken {
                    entry: entry.clone(),
                    commands,
                };
                let mut outcome = self.answered(request, id, given, Some(&taken));
                outcome.pending_id = Some(entry);
                Some(outcome)
            }
            Verdict::Denied(entry) => {
                let mut t = self.turn(request, id);
                t.pending = approval.pending.clone();
                t.pending_id = Some(entry.clone());
                let reason = format!("pending approval `{entry}` was denied by the person asked");
                Some(self.refuse(t, DenyCode::ApprovalRefused, reason, None))
            }
        }
    }

    /// Queues what `pending` needs, for a turn that ends with
    /// `APPROVAL_REQUIRED`; the entry's id, or `None` (the queue is off or
    /// cannot be written, logged).
    fn enqueue(&self, request: &TurnRequest, id: &str, pending: &[Pending]) -> Option<String> {
        if !self.settings.approval_queue || pending.is_empty() {
            return None;
        }
        let key = self.turn_key(request);
        match self.stores.approvals.enqueue(
            id,
            &key,
            &super::needs::queued(pending),
            &request.input,
            now_utc(),
        ) {
            Ok(entry) => Some(entry.id),
            Err(e) => {
                tracing::warn!("turn `{id}`: cannot queue the approval: {}", chain(&e));
                None
            }
        }
    }

    /// The turn as far as it can go with the answers `given`.
    pub(super) fn advance(
        &self,
        request: &TurnRequest,
        id: &str,
        given: Vec<(Pending, Choice)>,
        queued: Option<&Taken>,
    ) -> Advance {
        let mut t = self.turn(request, id);
        let Some(manifest) = self.manifest(&request.executor) else {
            let message = format!(
                "no executor named `{}` is known to this host",
                request.executor
            );
            return Advance::Done(Box::new(t.end(TurnEnd::Invalid { message })));
        };
        let answered = match self.take_answers(&mut t, &given, queued) {
            Ok(a) => a,
            Err(message) => return Advance::Done(Box::new(t.end(TurnEnd::Failed { message }))),
        };
        if let Some(p) = answered.refused {
            let reason = format!(
                "`{}` on `{}` was refused by the person asked",
                p.capability,
                p.target.as_deref().unwrap_or("-")
            );
            return Advance::Done(Box::new(self.refuse(
                t,
                DenyCode::ApprovalRefused,
                reason,
                None,
            )));
        }
        match Kind::Top(self).pipeline(&mut t, manifest, &answered.once, now_utc()) {
            Ended::Approval(pending) if given.is_empty() => {
                Advance::Parked(Box::new(self.question(request, id, pending)))
            }
            Ended::Approval(pending) => {
                Advance::Done(Box::new(self.unanswered(t, request, id, &given, pending)))
            }
            Ended::Refused { code, reason } => {
                Advance::Done(Box::new(self.refuse(t, code, reason, None)))
            }
            Ended::RunRefused {
                code,
                reason,
                digest,
            } => Advance::Done(Box::new(self.refuse(t, code, reason, digest))),
            Ended::Failed(message) => Advance::Done(Box::new(t.end(TurnEnd::Failed { message }))),
            Ended::Ran(end) => Advance::Done(Box::new(t.end(end))),
        }
    }

    /// The question a turn that needs `pending` puts to the person.
    fn question(&self, request: &TurnRequest, id: &str, pending: Vec<Pending>) -> ApprovalRequest {
        let key = self.turn_key(request);
        ApprovalRequest {
            turn: id.to_string(),
            executor: request.executor.clone(),
            actor: request.actor.clone(),
            pending,
            shown: super::Shown {
                executor_sha256: key.executor_sha256,
                input: queue::input_preview(&request.input),
                input_bytes: request.input.len(),
                argv: key.argv,
                files: key.files,
                commands: Vec::new(),
            },
        }
    }

    /// The end of turn `t`, which still needs `pending` after the person
    /// was asked about `given`: `APPROVAL_REQUIRED`, the whole set asked
    /// about queued (a retry of the same turn needs all of it again).
    fn unanswered(
        &self,
        mut t: Turn<'_>,
        request: &TurnRequest,
        id: &str,
        given: &[(Pending, Choice)],
        pending: Vec<Pending>,
    ) -> TurnOutcome {
        let what: Vec<String> = pending
            .iter()
            .map(|p| {
                format!(
                    "`{}` on `{}`",
                    p.capability,
                    p.target.as_deref().unwrap_or("-")
                )
            })
            .collect();
        let mut reason = format!("approval needed for {} and no one gave it", what.join(", "));
        let asked: Vec<Pending> = given.iter().map(|(p, _)| p.clone()).collect();
        t.pending_id = self.enqueue(request, id, &asked);
        if let Some(entry) = &t.pending_id {
            reason.push_str(&format!(
                "; queued as pending approval `{entry}`, which a person can answer with `gatehouse approvals`"
            ));
        }
        t.pending = pending;
        self.refuse(t, DenyCode::ApprovalRequired, reason, None)
    }

    /// The turn's end when the gate denies it with no approvals given;
    /// `None` otherwise (an unknown executor is left to `advance`).
    /// Whether the gate denies `request` now, writing nothing: the quick
    /// check before [`Inner::refused_by_gate`], which writes the denial.
    pub(super) fn gate_denies(&self, request: &TurnRequest, id: &str) -> bool {
        let t = self.turn(request, id);
        let Some(manifest) = self.manifest(&request.executor) else {
            return false;
        };
        matches!(
            t.gate(
                manifest,
                &super::needs::Once::default(),
                now_utc(),
                &self.runtimes.units,
            ),
            Gate::Denied { .. }
        )
    }

    pub(super) fn refused_by_gate(&self, request: &TurnRequest, id: &str) -> Option<TurnOutcome> {
        let mut t = self.turn(request, id);
        let manifest = self.manifest(&request.executor)?;
        match t.gate(
            manifest,
            &super::needs::Once::default(),
            now_utc(),
            &self.runtimes.units,
        ) {
            Gate::Denied {
                steps,
                code,
                reason,
            } => {
                t.decisions = steps;
                Some(self.refuse(t, code, reason, None))
            }
            Gate::ApprovalRequired { .. } | Gate::Ready { .. } => None,
        }
    }

    /// Records the answers `given`: "allow once" for this turn, "allow and
    /// remember" as a grant (the snapshot is then rebuilt), the first
    /// refusal. Fails only when a grant cannot be recorded.
    fn take_answers(
        &self,
        t: &mut Turn<'_>,
        given: &[(Pending, Choice)],
        queued: Option<&Taken>,
    ) -> Result<Answered, String> {
        let mut answered = Answered::default();
        if let Some(q) = queued {
            answered.once.commands = q.commands.clone();
        }
        let mut remembered = false;
        for (p, choice) in given {
            let mut answer = Answer {
                capability: p.capability,
                target: p.target.clone(),
                choice: choice.as_str(),
                grant: None,
                queued: queued.map(|q| q.entry.clone()),
            };
            match choice {
                Choice::Once => answered.once.items.push(p.clone()),
                Choice::Remember { expires_in_secs } if p.rememberable => {
                    let id = self
                        .remember(&t.frozen, &t.request.actor, t.id, p, *expires_in_secs)
                        .map_err(|e| format!("cannot remember the approval: {}", chain(&e)))?;
                    answer.grant = Some(id);
                    remembered = true;
                }
                // An always-class capability cannot be remembered: the
                // answer is taken as a refusal, never as a grant.
                Choice::Remember { .. } | Choice::Deny => {
                    answered.refused.get_or_insert_with(|| p.clone());
                }
                Choice::Queue => {}
            }
            t.approvals.push(answer);
        }
        if remembered {
            self.refresh_snapshot()
                .map_err(|e| format!("cannot reload the grants: {}", chain(&e)))?;
            t.frozen = self.frozen();
        }
        Ok(answered)
    }

    /// Records a grant for the actor's identity from an "allow and
    /// remember" answer.
    fn remember(
        &self,
        frozen: &Frozen,
        actor: &str,
        turn: &str,
        p: &Pending,
        expires_in_secs: Option<u64>,
    ) -> Result<i64, HostError> {
        let identity = frozen
            .snapshot
            .actors
            .get(actor)
            .and_then(|a| a.identity.clone())
            .unwrap_or_default();
        let now = now_utc();
        // However long the answer said, at most `[approvals]
        // remember_max`: only `grants add` records a grant for ever.
        let expires_in_secs = Some(self.config.approvals.remembered_for(expires_in_secs));
        // The answer and its grant together: on a fleet's database a
        // node's role records a grant only as the grant of an answer.
        let grant = self.stores.grants.remember(
            &NewGrant {
                identity,
                capability: p.capability.as_str().into(),
                target: p.target.clone().unwrap_or_default(),
                expires_at: expires_in_secs
                    .map(|s| now.plus_seconds(i64::try_from(s).unwrap_or(i64::MAX))),
                granted_by: self.settings.granted_by.clone(),
            },
            turn,
            expires_in_secs,
            now,
        )?;
        Ok(grant.id)
    }

    /// Ends a turn before any guest code ran: exactly one line in the
    /// denial log. `component_sha256`: the digest when it was computed,
    /// else the one the manifest pins.
    fn refuse(
        &self,
        t: Turn<'_>,
        code: DenyCode,
        reason: String,
        component_sha256: Option<String>,
    ) -> TurnOutcome {
        let request = t.request;
        let identity = t
            .frozen
            .snapshot
            .actors
            .get(&request.actor)
            .and_then(|a| a.identity.clone());
        let line = DenialRecord {
            time: now_utc(),
            turn: t.id.to_string(),
            actor: request.actor.clone(),
            channel: identity.as_ref().map(|i| i.channel.clone()),
            sender: identity.as_ref().map(|i| i.sender_id.clone()),
            executor: request.executor.clone(),
            component_sha256: component_sha256.or_else(|| {
                self.manifest(&request.executor)
                    .and_then(|m| m.sha256.clone())
            }),
            input_sha256: sha256_hex(request.input.as_bytes()),
            input_bytes: request.input.len(),
            args: request.io.args.clone(),
            code,
            reason: reason.clone(),
            pending_id: t.pending_id.clone(),
            hashes: (*t.frozen.hashes).clone(),
        };
        // One encoding: the chain's body is the log's line, byte for byte.
        match serde_json::to_string(&line) {
            Ok(mut body) => {
                // The log's line with its newline; the chain's body the
                // same bytes without it.
                body.push('\n');
                if let Err(e) = self.logs.denials.append_terminated(body.as_bytes()) {
                    tracing::warn!(
                        "turn `{}`: the denial was not recorded: {}",
                        t.id,
                        chain(&e)
                    );
                }
                let time = line.time.to_string();
                let body = &body[..body.len() - 1];
                if let Err(e) = self
                    .stores
                    .audit
                    .append_json(KIND_DENIAL, t.id, &time, body)
                {
                    tracing::warn!(
                        "turn `{}`: the denial was not recorded in the audit chain: {}",
                        t.id,
                        chain(&e)
                    );
                }
            }
            Err(e) => tracing::warn!(
                "turn `{}`: the denial was not recorded: cannot encode it: {e}",
                t.id
            ),
        }
        t.end(TurnEnd::Refused { code, reason })
    }
}

/// The words of `argv` that name a regular file in `workspace` (the
/// command runs there), each with the file's sha256 now: what an approval
/// of the command is bound to. A word that names nothing there, a
/// directory, or a file outside the workspace binds nothing (the files a
/// script imports stay unbound; README says so).
pub(super) fn file_args(argv: &[String], workspace: &str) -> Vec<queue::FileArg> {
    let root = std::path::Path::new(workspace);
    let mut out = Vec::new();
    for arg in argv.iter().skip(1) {
        if arg.is_empty() || arg.starts_with('-') {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(root.join(arg)) else {
            continue;
        };
        if !real.starts_with(root) || !real.is_file() {
            continue;
        }
        let Ok(sha256) = crate::undo::journal::sha256_file(&real) else {
            continue;
        };
        out.push(queue::FileArg {
            arg: arg.clone(),
            path: real.display().to_string(),
            sha256,
        });
    }
    out
}
