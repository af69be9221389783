//! `gatehouse run`: one turn, from request to result.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

use serde_json::json;

use gatehouse::grants::{now_utc, GrantStore, NewGrant};
use gatehouse::manifest::{find_by_name, Manifest};
use gatehouse::policy::{ApprovalClass, Capability, DenyCode};
use gatehouse::sandbox::{
    execute, GuestResult, IsolationReport, Limits, OnDegraded, RunError, Sandbox, TurnContext,
};
use gatehouse::turn::{gate, new_turn_id, Gate, Pending, TurnInput};

use super::args::{RunArgs, SnapshotSources};
use super::commands::{build_snapshot, build_snapshot_with_manifests, parse_level};
use super::{out, out_json, CmdResult, Context, Exit, Failure};

fn find_manifest(ctx: &Context, executor: &str) -> Result<Manifest, Failure> {
    let path = Path::new(executor);
    if executor.contains('/') || executor.ends_with(".toml") {
        return Ok(Manifest::load(path)?);
    }
    let config = ctx.config()?;
    find_by_name(&config.executor_dirs, executor)?.ok_or_else(|| {
        Failure::invalid(format!(
            "no executor named `{executor}` in the executor directories ({}); give a manifest path instead",
            config.executor_dirs.iter().map(|d| format!("`{}`", d.display())).collect::<Vec<_>>().join(", ")
        ))
    })
}

/// The choice a person made for one pending capability.
enum Choice {
    Once,
    Remember,
    Deny,
}

fn ask(p: &Pending, executor: &str) -> Choice {
    let target = p.target.as_deref().unwrap_or("-");
    let critical = if p.capability.critical() {
        "a critical capability (it can change or destroy data)"
    } else {
        "a non-critical capability"
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "\nexecutor `{executor}` asks for `{}` on `{target}`",
        p.capability
    );
    let _ = writeln!(err, "  scope: {} on `{target}`; {critical}", p.capability);
    let _ = writeln!(err, "  why: {}", p.reason);
    let remember = p.capability.default_approval() != ApprovalClass::Always;
    let _ = if remember {
        write!(
            err,
            "  [o] allow once  [r] allow and remember (writes a grant)  [d] deny: "
        )
    } else {
        write!(
            err,
            "  [o] allow once  [d] deny (always-class: cannot be remembered): "
        )
    };
    let _ = err.flush();
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    match line.trim() {
        "o" | "once" => Choice::Once,
        "r" | "remember" if remember => Choice::Remember,
        _ => Choice::Deny,
    }
}

pub fn run(ctx: &Context, args: RunArgs) -> CmdResult {
    let manifest = find_manifest(ctx, &args.executor)?;
    let sources = SnapshotSources {
        workspace: args.workspace.clone(),
        level: args.level.clone(),
        executors: std::iter::once(manifest.path.clone())
            .chain(args.with.iter().cloned())
            .collect(),
    };
    if let Some(l) = &args.level {
        parse_level(l)?;
    }
    let limits = Limits {
        memory_bytes: args.memory_mib.saturating_mul(1 << 20),
        deadline_ms: args.deadline_ms,
        output_bytes: args.output_kib.saturating_mul(1 << 10),
        hostcalls: args.hostcalls,
        ..Limits::default()
    };
    let turn_id = new_turn_id(now_utc());
    let mut approved: Vec<(Capability, Option<String>)> = Vec::new();
    let (mut snapshot, manifests) = build_snapshot_with_manifests(ctx, &sources)?;
    // The isolation report of the engine this turn would build, before
    // anything is built: the gate applies the switch with it.
    let config = ctx.config()?;
    let on_degraded = match &args.on_degraded {
        Some(v) => v
            .parse::<OnDegraded>()
            .map_err(|e| Failure::invalid(format!("`--on-degraded`: {e}")))?,
        None => config.on_degraded,
    };
    let profile = super::isolation::engine_profile(&config, limits.memory_bytes);
    let isolation = gatehouse::sandbox::isolation::probe(&profile);
    isolation.log();
    // The choices a person made, for the audit log.
    let mut choices: Vec<serde_json::Value> = Vec::new();
    let (steps, plan) = loop {
        let g = gate(TurnInput {
            snapshot: &snapshot,
            actor: &args.actor,
            manifest: &manifest,
            turn_id: turn_id.clone(),
            limits,
            approved_once: &approved,
            isolation: &isolation,
            on_degraded,
        });
        match g {
            Gate::Ready { steps, plan } => break (steps, plan),
            Gate::Denied {
                steps,
                code,
                reason,
            } => {
                report_denied(ctx, &turn_id, &steps, code, &reason, &isolation);
                return Ok(Exit::Denied);
            }
            Gate::ApprovalRequired { steps, pending } => {
                if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
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
                    let reason = format!(
                        "approval needed for {} and there is no terminal to ask",
                        what.join(", ")
                    );
                    if ctx.json {
                        out_json(
                            &json!({"turn": turn_id, "decisions": steps, "pending": pending, "code": DenyCode::ApprovalRequired, "reason": reason, "isolation": isolation}),
                        );
                    } else {
                        print_steps(&steps);
                        out(super::isolation::line(&isolation));
                        out(format!("APPROVAL_REQUIRED: {reason}"));
                    }
                    return Ok(Exit::Approval);
                }
                let mut remembered = false;
                for p in &pending {
                    match ask(p, &manifest.name) {
                        Choice::Once => {
                            choices.push(json!({"approval": {"capability": p.capability, "target": p.target, "choice": "allow_once"}}));
                            approved.push((p.capability, p.target.clone()))
                        }
                        Choice::Remember => {
                            choices.push(json!({"approval": {"capability": p.capability, "target": p.target, "choice": "allow_and_remember"}}));
                            let identity = snapshot
                                .actors
                                .get(&args.actor)
                                .and_then(|a| a.identity.clone())
                                .ok_or_else(|| {
                                    Failure::error(
                                        "the actor has no identity to remember a grant for",
                                    )
                                })?;
                            let store = GrantStore::open(&ctx.state.grants_db)?;
                            store.record(
                                &NewGrant {
                                    identity,
                                    capability: p.capability.as_str().into(),
                                    target: p.target.clone().unwrap_or_default(),
                                    expires_at: None,
                                    granted_by: ctx.env.login.clone(),
                                },
                                now_utc(),
                            )?;
                            remembered = true;
                        }
                        Choice::Deny => {
                            choices.push(json!({"approval": {"capability": p.capability, "target": p.target, "choice": "deny"}}));
                            // A person's refusal is logged (the policy's own
                            // denials touch nothing).
                            let journal = open_history(
                                ctx,
                                &turn_id,
                                &manifest.name,
                                &args.actor,
                                &snapshot,
                                &steps,
                                &choices,
                            )?;
                            journal
                                .finish(DenyCode::ApprovalRefused.as_str(), now_utc())
                                .map_err(|e| Failure::error(e.to_string()))?;
                            report_denied(
                                ctx,
                                &turn_id,
                                &steps,
                                DenyCode::ApprovalRefused,
                                &format!("`{}` was refused by the person asked", p.capability),
                                &isolation,
                            );
                            return Ok(Exit::Denied);
                        }
                    }
                }
                if remembered {
                    snapshot = build_snapshot(ctx, &sources)?;
                }
            }
        }
    };
    let sandbox = Sandbox::with_profile(&ctx.state.cache_dir, &profile)
        .map_err(|e| Failure::error(format!("cannot start the engine: {e}")))?;
    // The engine as built, read back, is what the run reports; were it
    // weaker than its profile, the switch applies again before any run.
    let isolation = sandbox.isolation().clone();
    let needs: Vec<Capability> = plan.allowed().iter().map(|a| a.capability).collect();
    if let Some(reason) = isolation.refusal(on_degraded, &needs) {
        report_denied(
            ctx,
            &turn_id,
            &steps,
            DenyCode::IsolationDegraded,
            &reason,
            &isolation,
        );
        return Ok(Exit::Denied);
    }
    let journal = open_history(
        ctx,
        &turn_id,
        &manifest.name,
        &args.actor,
        &snapshot,
        &steps,
        &choices,
    )?;
    let context = TurnContext::new(
        turn_id.clone(),
        args.actor.clone(),
        snapshot.clone(),
        manifests,
        ctx.state.state_dir.join("memory.db"),
    )
    .journaled(Some(journal.clone()))
    .on_degraded(on_degraded);
    let result = execute(&std::sync::Arc::new(sandbox), &plan, &args.input, &context);
    let status = match &result {
        Ok(r) if matches!(r.result, GuestResult::Ok { .. }) => "ok".to_string(),
        Ok(_) => "error".to_string(),
        Err(e) => e
            .code()
            .map(|c| c.as_str().to_string())
            .unwrap_or_else(|| "error".into()),
    };
    journal
        .finish(&status, now_utc())
        .map_err(|e| Failure::error(e.to_string()))?;
    let base = json!({
        "turn": turn_id,
        "executor": manifest.name,
        "actor": args.actor,
        "level": snapshot.level.as_str(),
        "decisions": steps,
        "limits": limits,
        "isolation": isolation,
    });
    match result {
        Ok(report) => {
            let exit = match report.result {
                GuestResult::Ok { .. } => Exit::Ok,
                GuestResult::Err { .. } => Exit::Error,
            };
            if ctx.json {
                let mut v = base;
                v["run"] = serde_json::to_value(&report).unwrap_or_default();
                out_json(&v);
            } else {
                print_steps(&steps);
                out(format!("turn     {turn_id}"));
                out(super::isolation::line(&isolation));
                out(format!(
                    "limits   memory {} MiB, deadline {} ms, output {} KiB per stream, {} hostcalls, {} resources",
                    limits.memory_bytes >> 20,
                    limits.deadline_ms,
                    limits.output_bytes >> 10,
                    limits.hostcalls,
                    limits.resources
                ));
                out(format!("linked   {}", report.linked.join(", ")));
                out(format!(
                    "cache    {}",
                    if report.cache_hit {
                        "hit (no compilation)"
                    } else {
                        "miss (compiled)"
                    }
                ));
                for l in &report.log {
                    out(format!("log      [{}] {}", l.level, l.message));
                }
                for c in &report.commands {
                    out(format!("command  {}", c.summary()));
                }
                match &report.result {
                    GuestResult::Ok { output } => out(format!("output   {output}")),
                    GuestResult::Err { error } => out(format!("error    {error}")),
                }
                if !report.stderr.is_empty() {
                    out(format!("stderr   {}", report.stderr.trim_end()));
                }
            }
            Ok(exit)
        }
        Err(e) => {
            let exit = match &e {
                RunError::Refused { .. } => Exit::Denied,
                RunError::Load(_) => Exit::Invalid,
                _ => Exit::Error,
            };
            if ctx.json {
                let mut v = base;
                v["error"] = json!({"code": e.code(), "message": e.to_string()});
                out_json(&v);
            } else {
                print_steps(&steps);
                out(format!("turn     {turn_id}"));
                out(super::isolation::line(&isolation));
            }
            Err(Failure {
                exit,
                message: e.to_string(),
            })
        }
    }
}

fn print_steps(steps: &[gatehouse::turn::Step]) {
    for s in steps {
        let answer = match &s.decision {
            gatehouse::policy::Decision::Deny { code, .. } => format!("denied {code}"),
            d => d.outcome().to_string(),
        };
        let approval = s.approval.map(|a| format!(" ({a})")).unwrap_or_default();
        out(format!(
            "decision {:<11} {answer}{approval}: {}",
            s.request.kind.name(),
            s.decision.reason()
        ));
    }
}

fn report_denied(
    ctx: &Context,
    turn: &str,
    steps: &[gatehouse::turn::Step],
    code: DenyCode,
    reason: &str,
    isolation: &IsolationReport,
) {
    if ctx.json {
        out_json(
            &json!({"turn": turn, "decisions": steps, "code": code, "reason": reason, "isolation": isolation}),
        );
    } else {
        print_steps(steps);
        out(super::isolation::line(isolation));
        out(format!("{code}: {reason}"));
    }
}

/// Creates the turn's history directory with its record and audit log:
/// every decision, every approval choice, and the snapshot's hashes.
fn open_history(
    ctx: &Context,
    turn_id: &str,
    executor: &str,
    actor: &str,
    snapshot: &gatehouse::policy::Snapshot,
    steps: &[gatehouse::turn::Step],
    choices: &[serde_json::Value],
) -> Result<gatehouse::undo::TurnJournal, Failure> {
    let record = gatehouse::undo::TurnRecord {
        turn: turn_id.to_string(),
        executor: executor.to_string(),
        actor: actor.to_string(),
        level: snapshot.level.as_str().to_string(),
        started_at: now_utc(),
        finished_at: None,
        status: "running".into(),
        undo: "none".into(),
    };
    let identity = snapshot.actors.get(actor).and_then(|a| a.identity.clone());
    let hashes =
        json!({"definitionHash": snapshot.definition_hash(), "policyHash": snapshot.policy_hash()});
    let mut lines: Vec<serde_json::Value> = steps
        .iter()
        .map(|s| json!({"turn": turn_id, "actor": actor, "identity": identity, "request": s.request, "decision": s.decision, "approval": s.approval, "snapshot": hashes}))
        .collect();
    lines.extend(choices.iter().map(|c| {
        let mut c = c.clone();
        c["turn"] = json!(turn_id);
        c["actor"] = json!(actor);
        c["identity"] = json!(identity);
        c["snapshot"] = hashes.clone();
        c
    }));
    gatehouse::undo::TurnJournal::create(&ctx.state.history_dir, &record, &lines)
        .map_err(|e| Failure::error(e.to_string()))
}
