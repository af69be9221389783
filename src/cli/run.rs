//! `gatehouse run`: one turn, from request to result.

use std::io::IsTerminal;
use std::path::Path;

use serde_json::json;

use gatehouse::host::{
    Approver, EngineKind, GuestResult, Host, HostError, HostOptions, Limits, NoOne, OnDegraded,
    Step, TerminalApprover, TurnEnd, TurnOutcome, TurnRequest,
};
use gatehouse::manifest::{find_by_name, Manifest};
use gatehouse::policy::DenyCode;

use super::args::RunArgs;
use super::commands::{gather_manifests, parse_level};
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

/// The host of one `gatehouse run`: the configuration, the executor named
/// on the command line and those it may delegate to.
fn open_host(ctx: &Context, args: &RunArgs, manifest: &Manifest) -> Result<Host, Failure> {
    let config = ctx.config()?;
    let level = args.level.as_deref().map(parse_level).transpose()?;
    let on_degraded = match &args.on_degraded {
        Some(v) => Some(
            v.parse::<OnDegraded>()
                .map_err(|e| Failure::invalid(format!("`--on-degraded`: {e}")))?,
        ),
        None => None,
    };
    let workspace = ctx.workspace(args.workspace.as_deref())?;
    let extra: Vec<std::path::PathBuf> = std::iter::once(manifest.path.clone())
        .chain(args.with.iter().cloned())
        .collect();
    let manifests = gather_manifests(&config.executor_dirs, &extra)?;
    let mut options = HostOptions::new(config, ctx.state.clone(), workspace, manifests);
    options.home = ctx.env.home.clone();
    options.level = level;
    options.on_degraded = on_degraded;
    options.max_memory_bytes = args.memory_mib.saturating_mul(1 << 20);
    // One turn, then exit: the engine sized for one turn.
    options.engine = EngineKind::OneShot;
    options.granted_by = ctx.env.login.clone();
    Host::open(options).map_err(host_failure)
}

/// A host error as the command line reports it.
pub(super) fn host_failure(e: HostError) -> Failure {
    match e {
        HostError::Snapshot(e) => Failure::from(e),
        HostError::Grants(e) => Failure::from(e),
        e => Failure::error(gatehouse::config::chain(&e)),
    }
}

/// Who is asked: the person at the controlling terminal when there is
/// one (the prompt goes to `/dev/tty`, never through the turn's stdin),
/// else no one (the turn ends with `APPROVAL_REQUIRED`, exit 4).
pub(super) fn approver() -> Box<dyn Approver> {
    if std::io::stderr().is_terminal() && TerminalApprover::available() {
        Box::new(TerminalApprover)
    } else {
        Box::new(NoOne)
    }
}

pub fn run(ctx: &Context, args: RunArgs) -> CmdResult {
    let manifest = find_manifest(ctx, &args.executor)?;
    let limits = Limits {
        memory_bytes: args.memory_mib.saturating_mul(1 << 20),
        deadline_ms: args.deadline_ms,
        output_bytes: args.output_kib.saturating_mul(1 << 10),
        hostcalls: args.hostcalls,
        ..Limits::default()
    };
    let host = open_host(ctx, &args, &manifest)?;
    let mut request = TurnRequest::new(&manifest.name, &args.actor, &args.input);
    request.limits = limits;
    let outcome = host.run(request, approver().as_ref());
    report(ctx, &outcome)
}

/// Prints a turn's outcome and picks the exit code.
pub(super) fn report(ctx: &Context, outcome: &TurnOutcome) -> CmdResult {
    let base = json!({
        "turn": outcome.turn,
        "executor": outcome.executor,
        "actor": outcome.actor,
        "level": outcome.level,
        "decisions": outcome.decisions,
        "limits": outcome.limits,
    });
    let with_isolation = |mut v: serde_json::Value| {
        if let Some(i) = &outcome.isolation {
            v["isolation"] = json!(i);
        }
        if !outcome.approvals.is_empty() {
            v["approvals"] = json!(outcome.approvals);
        }
        v
    };
    match &outcome.end {
        TurnEnd::Refused { code, reason } => {
            if ctx.json {
                let mut v = with_isolation(base);
                v["code"] = json!(code);
                v["reason"] = json!(reason);
                if !outcome.pending.is_empty() {
                    v["pending"] = json!(outcome.pending);
                }
                out_json(&v);
            } else {
                print_steps(&outcome.decisions);
                if let Some(i) = &outcome.isolation {
                    out(super::isolation::line(i));
                }
                out(format!("{code}: {reason}"));
            }
            Ok(match code {
                DenyCode::ApprovalRequired => Exit::Approval,
                _ => Exit::Denied,
            })
        }
        TurnEnd::Invalid { message } => Err(Failure::invalid(message.clone())),
        TurnEnd::Failed { message } => Err(Failure::error(message.clone())),
        TurnEnd::Stopped { code, message } => {
            if ctx.json {
                let mut v = with_isolation(base);
                v["error"] = json!({"code": code, "message": message});
                out_json(&v);
            } else {
                print_steps(&outcome.decisions);
                out(format!("turn     {}", outcome.turn));
                if let Some(i) = &outcome.isolation {
                    out(super::isolation::line(i));
                }
            }
            Err(Failure {
                exit: Exit::Error,
                message: message.clone(),
            })
        }
        TurnEnd::Ran { run: report } => {
            let exit = match report.result {
                GuestResult::Ok { .. } => Exit::Ok,
                GuestResult::Err { .. } => Exit::Error,
            };
            if ctx.json {
                let mut v = with_isolation(base);
                v["run"] = serde_json::to_value(report).unwrap_or_default();
                out_json(&v);
                return Ok(exit);
            }
            let limits = outcome.limits;
            print_steps(&outcome.decisions);
            out(format!("turn     {}", outcome.turn));
            if let Some(i) = &outcome.isolation {
                out(super::isolation::line(i));
            }
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
            Ok(exit)
        }
    }
}

fn print_steps(steps: &[Step]) {
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
