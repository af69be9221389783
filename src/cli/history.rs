//! `gatehouse history` and `gatehouse undo`.

use gatehouse::state::pg::SharedError;
use gatehouse::state::{StateError, Stores};
use gatehouse::undo::{History, HistoryError, UndoStatus};

use super::args::{HistoryArgs, HistoryCmd, UndoArgs};
use super::{out, out_json, CmdResult, Context, Exit, Failure};

impl From<HistoryError> for Failure {
    fn from(e: HistoryError) -> Failure {
        match e {
            HistoryError::NoSuchTurn(_) | HistoryError::OtherNode { .. } => {
                Failure::invalid(e.to_string())
            }
            // A prune refused over a broken chain: denied, as verify is.
            HistoryError::Chain(StateError::Broken { .. }) => {
                Failure::denied(gatehouse::util::chain(&e))
            }
            _ => Failure::error(gatehouse::util::chain(&e)),
        }
    }
}

impl From<StateError> for Failure {
    fn from(e: StateError) -> Failure {
        Failure::error(gatehouse::util::chain(&e))
    }
}

impl From<SharedError> for Failure {
    fn from(e: SharedError) -> Failure {
        Failure::error(gatehouse::util::chain(&e))
    }
}

/// `gatehouse history verify`: the audit chain recomputed.
fn verify(ctx: &Context) -> CmdResult {
    let store = Stores::new(&ctx.state)?.audit;
    let (checkpoint, rows) = store.rows()?;
    match gatehouse::state::verify(checkpoint.as_ref(), &rows) {
        Ok(whole) => {
            if ctx.json {
                out_json(&serde_json::json!({
                    "whole": true,
                    "records": whole.records,
                    "first": whole.first_seq,
                    "last": whole.last_seq,
                    "head": whole.head,
                }));
            } else {
                out(whole.to_string());
            }
            Ok(Exit::Ok)
        }
        Err(broken) => {
            if ctx.json {
                out_json(&serde_json::json!({
                    "whole": false,
                    "seq": broken.seq,
                    "turn": broken.turn,
                    "tamper": broken.how.as_str(),
                }));
                Ok(Exit::Denied)
            } else {
                Err(Failure::denied(format!(
                    "audit chain broken: {broken} (`{}`)",
                    match &ctx.state.database_url {
                        Some(url) => gatehouse::util::redact_url(url),
                        None => ctx.state.audit_chain.display().to_string(),
                    }
                )))
            }
        }
    }
}

/// This node's history: its directory, its audit log, and a fleet's
/// index when the state is a database.
fn history_of(ctx: &Context) -> Result<History, Failure> {
    let index = Stores::new(&ctx.state)?.fleet.map(|f| f.index);
    Ok(History::new(&ctx.state.history_dir)
        .with_audit_log(&ctx.state.state_dir.join("audit.jsonl"))
        .with_index(index))
}

pub fn history(ctx: &Context, args: HistoryArgs) -> CmdResult {
    match args.action {
        Some(HistoryCmd::Prune {
            older_than,
            dry_run,
        }) => return prune(ctx, &older_than, dry_run),
        Some(HistoryCmd::Verify) => return verify(ctx),
        None => {}
    }
    let h = history_of(ctx)?;
    if args.denials {
        for d in History::denials(&ctx.state.state_dir.join("denials.jsonl"))? {
            if args.turn.as_ref().is_none_or(|t| d["turn"] == t.as_str()) {
                out_json(&d);
            }
        }
        return Ok(Exit::Ok);
    }
    if let (Some(turn), true) = (&args.turn, args.decisions) {
        h.each_decision(turn, |d| out_json(&d))?;
        return Ok(Exit::Ok);
    }
    let turns = match &args.turn {
        Some(t) => vec![h.turn(t)?],
        None => h.turns()?,
    };
    for t in &turns {
        if ctx.json {
            out_json(t);
        } else {
            let node = t
                .node
                .as_deref()
                .map_or(String::new(), |n| format!("  on {n}"));
            out(format!(
                "{}  {:<14} {:<10} {}  {:>3} ops  {:<8} undo: {}{node}",
                t.record.turn,
                t.record.executor,
                t.record.actor,
                t.record.started_at,
                t.operations,
                t.record.status,
                t.record.undo
            ));
        }
    }
    Ok(Exit::Ok)
}

pub fn undo(ctx: &Context, args: UndoArgs) -> CmdResult {
    let h = history_of(ctx)?;
    let turn = match args.turn {
        Some(t) => t,
        None => h.last_undoable_turn()?.ok_or_else(|| {
            Failure::invalid(
                "there is no turn to undo: no turn in the history journaled an operation",
            )
        })?,
    };
    let memory = Stores::new(&ctx.state)?.memory;
    let report = h.undo(&turn, args.dry_run, &*memory)?;
    if ctx.json {
        out_json(&report);
    } else if report.already_undone {
        out(format!("turn `{turn}` is already undone; nothing to do"));
    } else {
        for s in &report.steps {
            let status = match s.status {
                UndoStatus::Done => "done",
                UndoStatus::Skipped => "skipped",
                UndoStatus::Failed => "failed",
                UndoStatus::WouldDo => "would do",
            };
            out(format!(
                "#{:<4} {:<8} {:<20} {}",
                s.seq, status, s.pattern, s.reason
            ));
        }
        out(format!(
            "turn `{turn}`: {} operation(s){}",
            report.steps.len(),
            if report.dry_run {
                ", dry run: nothing changed"
            } else {
                ""
            }
        ));
    }
    let failed = report.steps.iter().any(|s| s.status == UndoStatus::Failed);
    Ok(if failed { Exit::Error } else { Exit::Ok })
}

fn prune(ctx: &Context, older_than: &str, dry_run: bool) -> CmdResult {
    let secs = gatehouse::state::grants::parse_duration(older_than)
        .map_err(|e| Failure::invalid(format!("--older-than: {e}")))?;
    let cutoff = gatehouse::state::grants::now_utc().plus_seconds(-secs);
    let audit = ctx.state.state_dir.join("audit.jsonl");
    let denials = ctx.state.state_dir.join("denials.jsonl");
    let stores = Stores::new(&ctx.state)?;
    let report = gatehouse::undo::prune(
        &ctx.state.history_dir,
        &[
            (&audit, gatehouse::undo::LogKind::Audit),
            (&denials, gatehouse::undo::LogKind::Denials),
        ],
        Some(&*stores.audit),
        cutoff,
        dry_run,
    )?;
    // A fleet's index forgets the turns pruned (every node's that
    // finished before the cutoff: the owner prunes for the fleet).
    if let Some(fleet) = &stores.fleet {
        fleet.index.prune_before(&cutoff.to_string(), dry_run)?;
    }
    if ctx.json {
        out_json(&report);
    } else {
        out(format!(
            "{} {} turn(s), {} audit record(s) and {} denial record(s) from before {} ({} bytes){}",
            if dry_run { "would remove" } else { "removed" },
            report.turns,
            report.audit_records,
            report.denial_records,
            report.cutoff,
            report.bytes,
            if dry_run {
                "; dry run: nothing changed"
            } else {
                ""
            }
        ));
        out(format!(
            "{} {} audit chain record(s); `gatehouse history verify` checks the rest",
            if dry_run { "would remove" } else { "removed" },
            report.chain_records
        ));
        for s in &report.skipped {
            out(format!("kept: {s}"));
        }
    }
    Ok(Exit::Ok)
}
