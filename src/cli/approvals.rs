//! `gatehouse approvals`: the pending-approval queue, answered by the
//! person.

use gatehouse::host::{QueueAnswer, QueueEntry, QueueError};
use gatehouse::state::approvals::ApprovalBackend;
use gatehouse::state::grants::{now_utc, remember_for};
use gatehouse::state::Stores;
use gatehouse::util::printable;

use super::args::{ApprovalsArgs, ApprovalsCmd};
use super::{out_json, CmdResult, Context, Exit, Failure};

impl From<QueueError> for Failure {
    fn from(e: QueueError) -> Failure {
        Failure::of(&e, e.is_invalid_input())
    }
}

pub fn run(ctx: &Context, args: ApprovalsArgs) -> CmdResult {
    let cmd = args.cmd;
    if let Some(socket) = &args.socket {
        return over_socket(socket, cmd);
    }
    let queue = Stores::new(&ctx.state)?.approvals;
    // A fleet's queue: the database's roles separate who may answer.
    let fleet = ctx.state.database_url.is_some();
    let now = now_utc();
    match cmd {
        ApprovalsCmd::List { all } => {
            let entries = queue.list(all, now)?;
            for e in &entries {
                out_json(e);
            }
            // The count and what was dropped go to stderr: stdout stays
            // one entry per line.
            let waiting = entries.iter().filter(|e| e.status == "pending").count();
            let mut summary = format!(
                "{} entr{} listed, newest first; {waiting} waiting for an answer",
                entries.len(),
                if entries.len() == 1 { "y" } else { "ies" }
            );
            for (actor, n) in queue.dropped()? {
                summary.push_str(&format!(
                    "; {n} older unanswered entr{} of actor `{actor}` dropped (at most {} wait per actor)",
                    if n == 1 { "y" } else { "ies" },
                    gatehouse::host::MAX_PENDING_PER_ACTOR
                ));
            }
            eprintln!("{}", printable(&summary));
            Ok(Exit::Ok)
        }
        ApprovalsCmd::Deny { id, yes } => {
            let entry = pending_entry(&*queue, &id)?;
            confirm_by_a_person(&entry, yes, fleet, "deny it?")?;
            let e = queue.answer(&id, QueueAnswer::Deny, ctx.env.login.as_deref(), now)?;
            out_json(&e);
            Ok(Exit::Ok)
        }
        ApprovalsCmd::Allow {
            id,
            remember,
            expires_in,
            yes,
        } => {
            let answer = if remember {
                let secs = remember_for(expires_in.as_deref().unwrap_or_default())?
                    .map(|s| u64::try_from(s).unwrap_or(0));
                // At most `[approvals] remember_max`, `forever` included:
                // only `grants add` records a grant for ever.
                let max = ctx.config()?.approvals;
                QueueAnswer::Remember {
                    expires_in_secs: Some(max.remembered_for(secs)),
                }
            } else {
                QueueAnswer::Once
            };
            let entry = pending_entry(&*queue, &id)?;
            confirm_by_a_person(
                &entry,
                yes,
                fleet,
                if remember {
                    "allow and remember (writes grants)?"
                } else {
                    "allow once?"
                },
            )?;
            let e = queue.answer(&id, answer, ctx.env.login.as_deref(), now)?;
            out_json(&e);
            Ok(Exit::Ok)
        }
    }
}

/// `approvals --socket PATH ...`: the daemon's queue, answered as this
/// process's account (the daemon reads it from the socket). Without
/// `--yes`, an answer is first shown and confirmed on the terminal.
fn over_socket(socket: &std::path::Path, cmd: ApprovalsCmd) -> CmdResult {
    use gatehouse::daemon::wire::ApprovalOp;
    let ask = |op: ApprovalOp| -> Result<serde_json::Value, Failure> {
        let reply = gatehouse::daemon::ask(socket, op)?;
        if !reply.ok {
            return Err(super::daemon::refused(&reply));
        }
        Ok(reply.result.unwrap_or_default())
    };
    let confirmed = |id: &str, yes: bool, question: &str| -> Result<(), Failure> {
        if yes {
            return Ok(());
        }
        let entry = ask(ApprovalOp::Get { id: id.to_string() })?;
        let entry: QueueEntry = serde_json::from_value(entry)
            .map_err(|_| Failure::error(format!("the daemon's entry `{id}` cannot be read")))?;
        confirm(
            &entry,
            question,
            "give `--yes` (over the socket, the daemon checks who answers)",
        )
    };
    let op = match cmd {
        ApprovalsCmd::List { all } => {
            let entries = ask(ApprovalOp::List { all })?;
            let entries = entries.as_array().cloned().unwrap_or_default();
            for e in &entries {
                out_json(e);
            }
            eprintln!(
                "{} entr{} listed, newest first",
                entries.len(),
                if entries.len() == 1 { "y" } else { "ies" }
            );
            return Ok(Exit::Ok);
        }
        ApprovalsCmd::Deny { id, yes } => {
            confirmed(&id, yes, "deny it?")?;
            ApprovalOp::Deny { id }
        }
        ApprovalsCmd::Allow {
            id,
            remember,
            expires_in,
            yes,
        } => {
            confirmed(
                &id,
                yes,
                if remember {
                    "allow and remember (writes grants)?"
                } else {
                    "allow once?"
                },
            )?;
            ApprovalOp::Allow {
                id,
                remember,
                expires_in,
            }
        }
    };
    out_json(&ask(op)?);
    Ok(Exit::Ok)
}

/// The entry `id`, still waiting for an answer.
fn pending_entry(queue: &dyn ApprovalBackend, id: &str) -> Result<QueueEntry, Failure> {
    let entry = queue
        .get(id)?
        .ok_or_else(|| Failure::from(QueueError::NoSuchEntry(id.to_string())))?;
    if entry.status != "pending" {
        return Err(Failure::from(QueueError::AlreadyAnswered {
            id: id.to_string(),
            status: entry.status,
        }));
    }
    Ok(entry)
}

/// An answer must come from a person, not from the agent whose request
/// is waiting: it is confirmed at the controlling terminal (`y`), or given
/// with `--yes` by another OS account than the one that queued the entry
/// (an agent's shell runs as the server's account; a person answering from
/// their own account is not it). A terminal is not proof of a person (an
/// agent can make a pseudo-terminal); the separation that holds is the
/// second account (`docs/src/guide/mcp.md`, "Running the server under its
/// own account").
///
/// In a fleet (`fleet`: the queue is a shared database) user ids of
/// different machines mean nothing; the separation is the database's
/// role instead (only the approver's role may answer: a node's
/// credentials are refused by the database itself), so `--yes` is taken
/// whatever the account.
fn confirm_by_a_person(
    entry: &QueueEntry,
    yes: bool,
    fleet: bool,
    question: &str,
) -> Result<(), Failure> {
    let another_account = entry
        .queued_uid
        .is_some_and(|uid| uid != gatehouse::host::current_uid());
    if yes && (fleet || another_account) {
        return Ok(());
    }
    confirm(
        entry,
        question,
        "an answer comes from a person at a terminal, or with `--yes` from another OS account than the one that queued it",
    )
}

/// Shows the entry (the local queue's, or a daemon's) on `/dev/tty` and
/// asks `question`; anything but `y` or `yes` leaves it pending. Without
/// a terminal, refused with `no_terminal` (how to answer instead).
fn confirm(e: &QueueEntry, question: &str, no_terminal: &str) -> Result<(), Failure> {
    let mut tty = gatehouse::terminal::Tty::interactive().ok_or_else(|| {
        Failure::invalid(format!(
            "there is no terminal to confirm `{}` on: {no_terminal}",
            e.id
        ))
    })?;
    let who = e
        .identity
        .as_ref()
        .map(|i| format!(" ({}:{})", i.channel, i.sender_id))
        .unwrap_or_default();
    let mut text = format!(
        "pending approval `{}`: actor `{}`{who} runs executor `{}` (sha256 {})\n  input sha256 {}\n",
        e.id, e.actor, e.executor, e.executor_sha256, e.input_sha256
    );
    // The digest is on the first line already.
    for line in e.shown().lines().into_iter().skip(1) {
        text.push_str(&line);
        text.push('\n');
    }
    for i in &e.items {
        text.push_str(&format!(
            "  `{}` on `{}`{}: {}\n",
            i.capability,
            i.target.as_deref().unwrap_or("-"),
            if i.critical { " (critical)" } else { "" },
            i.reason
        ));
    }
    tty.say(&printable_block(&text));
    tty.say(&format!("{question} [y/N]: "));
    let line = tty.read_line(None).ok().flatten().unwrap_or_default();
    match line.trim() {
        "y" | "yes" => Ok(()),
        _ => Err(Failure::error(format!(
            "not confirmed: `{}` stays pending",
            e.id
        ))),
    }
}

/// Each line escaped (see [`printable`]), the newlines kept.
fn printable_block(text: &str) -> String {
    text.lines().map(|l| printable(l) + "\n").collect()
}
