//! `gatehouse approvals`: the pending-approval queue, answered by the
//! person.

use gatehouse::config::printable;
use gatehouse::host::grants::{now_utc, parse_duration};
use gatehouse::host::{ApprovalQueue, QueueAnswer, QueueEntry, QueueError};

use super::args::ApprovalsCmd;
use super::{out_json, CmdResult, Context, Exit, Failure};

impl From<QueueError> for Failure {
    fn from(e: QueueError) -> Failure {
        Failure::of(&e, e.is_invalid_input())
    }
}

pub fn run(ctx: &Context, cmd: ApprovalsCmd) -> CmdResult {
    let queue = ApprovalQueue::new(&ctx.state);
    let now = now_utc();
    match cmd {
        ApprovalsCmd::List { all } => {
            for e in queue.list(all, now)? {
                out_json(&e);
            }
            Ok(Exit::Ok)
        }
        ApprovalsCmd::Deny { id } => {
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
                let secs = expires_in
                    .as_deref()
                    .map(parse_duration)
                    .transpose()?
                    .map(|s| u64::try_from(s).unwrap_or(0));
                QueueAnswer::Remember {
                    expires_in_secs: secs,
                }
            } else {
                QueueAnswer::Once
            };
            let entry = queue
                .get(&id)?
                .ok_or_else(|| Failure::from(QueueError::NoSuchEntry(id.clone())))?;
            if !yes {
                confirm(&entry, remember)?;
            }
            let e = queue.answer(&id, answer, ctx.env.login.as_deref(), now)?;
            out_json(&e);
            Ok(Exit::Ok)
        }
    }
}

/// Shows the entry on `/dev/tty` and asks; anything but `y` or `yes`
/// leaves it pending.
fn confirm(e: &QueueEntry, remember: bool) -> Result<(), Failure> {
    // As `run` decides whether to prompt: a terminal on stderr and a
    // controlling terminal that opens.
    let mut tty = gatehouse::terminal::Tty::interactive().ok_or_else(|| {
        Failure::invalid(format!(
            "there is no terminal to confirm on: give `--yes` to allow `{}` without asking",
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
    tty.say(if remember {
        "allow and remember (writes grants)? [y/N]: "
    } else {
        "allow once? [y/N]: "
    });
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
