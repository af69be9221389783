//! How a person is asked: the [`Approver`] trait and its implementations.
//!
//! A turn whose gate answers `approval_required` asks its approver *once*,
//! with the whole pending set, before anything is built; the approver
//! answers each item. Implementations here: [`TerminalApprover`] (a prompt
//! on `/dev/tty`, never the turn's stdin), [`NoOne`] (nobody to ask: the
//! turn ends with `APPROVAL_REQUIRED`) and [`Scripted`] (fixed answers, for
//! tests and scripts). The MCP server asks by elicitation through
//! [`super::Host::begin`] / [`super::Host::resume`].

use crate::terminal::{shown, Tty};
use std::collections::VecDeque;
use std::sync::Mutex;

use serde::Serialize;

pub use super::needs::Pending;

/// What a turn asks approval for.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRequest {
    /// The turn's id.
    pub turn: String,
    /// The executor the turn runs.
    pub executor: String,
    /// The actor it runs as.
    pub actor: String,
    /// Every capability of the turn that needs an approval.
    pub pending: Vec<Pending>,
    /// What the approval allows, beyond the capabilities: the executor's
    /// digest, the input (its first KiB and its size), a command's argv
    /// and the files it names. Every surface that asks shows them.
    pub shown: Shown,
}

/// What an approval shows of the turn it allows (guest- and
/// client-supplied text: shown escaped).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Shown {
    /// The component's sha256 (a command executor: of its argv).
    pub executor_sha256: String,
    /// The first [`crate::state::approvals::INPUT_SHOWN`] bytes of the input.
    pub input: String,
    /// The input's full size, in bytes.
    pub input_bytes: usize,
    /// A command executor's argv; empty for a component.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// The files the argv's words name, with their sha256, which the approval is bound to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<crate::state::approvals::FileArg>,
    /// The command lines (argv) a component's guest runs under a
    /// `code:exec` allowed once that this approval lets it run: "once"
    /// covers the command lines shown, no other.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<Vec<String>>,
}

impl Shown {
    /// The lines a person reads (unescaped: the caller escapes them).
    pub fn lines(&self) -> Vec<String> {
        let words = |argv: &[String]| -> String {
            let quoted: Vec<String> = argv.iter().map(|w| format!("`{w}`")).collect();
            quoted.join(" ")
        };
        let mut out = vec![format!("  executor sha256 {}", self.executor_sha256)];
        let cut = if self.input.len() < self.input_bytes {
            format!(
                " (first {} of {} bytes)",
                self.input.len(),
                self.input_bytes
            )
        } else {
            String::new()
        };
        out.push(format!("  input{cut}: {}", self.input));
        if !self.argv.is_empty() {
            out.push(format!("  runs: {}", words(&self.argv)));
        }
        for f in &self.files {
            out.push(format!("  file `{}` sha256 {}", f.path, f.sha256));
        }
        for argv in &self.commands {
            out.push(format!("  guest runs: {}", words(argv)));
        }
        out
    }
}

/// A person's answer for one pending capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "choice", rename_all = "snake_case")]
pub enum Choice {
    /// Allow it for this turn only.
    Once,
    /// Allow it and record a grant for the actor's identity, valid for
    /// `expires_in_secs` (`None`: until revoked). Refused for an
    /// `always`-class capability (the turn is then denied).
    Remember {
        /// How long the grant lasts, in seconds; `None`: until revoked.
        expires_in_secs: Option<u64>,
    },
    /// Refuse it: the turn ends with `APPROVAL_REFUSED`.
    Deny,
    /// No one can answer now: the turn ends with `APPROVAL_REQUIRED`.
    Queue,
}

impl Choice {
    /// The name the audit records.
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::Once => "allow_once",
            Choice::Remember { .. } => "allow_and_remember",
            Choice::Deny => "deny",
            Choice::Queue => "queue",
        }
    }
}

/// Asks a person about a turn's pending capabilities.
///
/// Called once per turn, on the turn's thread, before anything is built;
/// the answer has one [`Choice`] per pending item, in order (missing items
/// count as [`Choice::Queue`]). `Send + Sync` so that a host shared by the
/// threads of an async runtime can hold one; an implementation backed by
/// an async channel blocks on its runtime's handle from the (blocking)
/// turn thread, or the caller parks the turn with `Host::begin` and
/// finishes it with `Host::resume` instead.
pub trait Approver: Send + Sync {
    /// One [`Choice`] per item of `request.pending`, in order.
    fn ask(&self, request: &ApprovalRequest) -> Vec<Choice>;
}

/// Nobody to ask: every pending item is queued, so the turn ends with
/// `APPROVAL_REQUIRED` (exit 4 on the command line).
pub struct NoOne;

impl Approver for NoOne {
    fn ask(&self, request: &ApprovalRequest) -> Vec<Choice> {
        vec![Choice::Queue; request.pending.len()]
    }
}

/// Fixed answers, consumed in order across calls (tests, scripts). Counts
/// how often it was asked.
#[derive(Default)]
pub struct Scripted {
    answers: Mutex<VecDeque<Choice>>,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Scripted {
    /// Answers the pending items of successive requests with `answers`, in
    /// order; once they run out, [`Choice::Queue`].
    pub fn new(answers: impl IntoIterator<Item = Choice>) -> Scripted {
        Scripted {
            answers: Mutex::new(answers.into_iter().collect()),
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Every request asked so far.
    pub fn asked(&self) -> Vec<ApprovalRequest> {
        crate::util::lock(&self.asked).clone()
    }
}

impl Approver for Scripted {
    fn ask(&self, request: &ApprovalRequest) -> Vec<Choice> {
        crate::util::lock(&self.asked).push(request.clone());
        let mut answers = crate::util::lock(&self.answers);
        request
            .pending
            .iter()
            .map(|_| answers.pop_front().unwrap_or(Choice::Queue))
            .collect()
    }
}

/// A prompt on the controlling terminal (`/dev/tty`), read and written
/// directly: the turn's stdin and stdout stay the executor's. Without a
/// controlling terminal it answers like [`NoOne`].
pub struct TerminalApprover;

impl TerminalApprover {
    /// Whether a prompt can be shown: the process has a controlling
    /// terminal that opens for reading and writing.
    pub fn available() -> bool {
        Tty::open().is_some()
    }
}

/// Asks how long "allow and remember" remembers: a duration, `forever`,
/// or nothing for the default (a day, as everywhere). Asked again after an
/// answer it cannot read (three times at most, then the item is queued).
fn remember_how_long(tty: &mut Tty) -> Choice {
    for _ in 0..3 {
        tty.say("  remember for how long? 30s, 10m, 2h, 7d or `forever` (at most `[approvals] remember_max`, 7d by default) [24h]: ");
        let Ok(Some(line)) = tty.read_line(None) else {
            return Choice::Queue;
        };
        match crate::state::grants::remember_for(&line) {
            Ok(secs) => {
                return Choice::Remember {
                    expires_in_secs: secs.and_then(|s| u64::try_from(s).ok()),
                }
            }
            Err(e) => tty.say(&format!("  {}\n", shown(&e.to_string()))),
        }
    }
    Choice::Queue
}

impl Approver for TerminalApprover {
    /// One question for the whole pending set (issue 46, item 7): the
    /// turn, what it shows, every item, then one answer line, answered as
    /// a whole. "Allow and remember" is offered only when every item may
    /// be remembered.
    fn ask(&self, request: &ApprovalRequest) -> Vec<Choice> {
        let Some(mut tty) = Tty::open() else {
            return NoOne.ask(request);
        };
        let mut text = format!(
            "\nexecutor `{}` (actor `{}`, turn `{}`) asks for approval\n",
            shown(&request.executor),
            shown(&request.actor),
            request.turn
        );
        for line in request.shown.lines() {
            text.push_str(&shown(&line));
            text.push('\n');
        }
        for p in &request.pending {
            let target = shown(p.target.as_deref().unwrap_or("-"));
            let critical = if p.critical {
                "a critical capability (it can change or destroy data)"
            } else {
                "a non-critical capability"
            };
            text.push_str(&format!(
                "executor `{}` asks for `{}` on `{target}`\n",
                shown(&request.executor),
                p.capability
            ));
            if let Some(declared) = &p.declared_target {
                text.push_str(&format!(
                    "  declared as `{}`: a symbolic link on the way leads to `{target}`\n",
                    shown(declared)
                ));
            }
            if let Some(mount) = &p.mount {
                text.push_str(&format!(
                    "  in the guest its directory is mounted at `{}`\n",
                    shown(mount)
                ));
            }
            text.push_str(&format!(
                "  scope: {} on `{target}`; {critical}\n",
                p.capability
            ));
            text.push_str(&format!("  why: {}\n", shown(&p.reason)));
        }
        let rememberable = request.pending.iter().all(|p| p.rememberable);
        text.push_str(if rememberable {
            "[o] allow once  [r] allow and remember (writes a grant per item)  [d] deny: "
        } else {
            "[o] allow once  [d] deny (not rememberable): "
        });
        tty.say(&text);
        let choice = match tty.read_line(None) {
            Ok(None) | Err(_) => Choice::Queue,
            Ok(Some(line)) => match line.trim() {
                "o" | "once" => Choice::Once,
                "r" | "remember" if rememberable => remember_how_long(&mut tty),
                _ => Choice::Deny,
            },
        };
        vec![choice; request.pending.len()]
    }
}

impl crate::state::approvals::QueueEntry {
    /// What the entry shows of the turn it allows, as the approval that
    /// queued it showed it.
    pub fn shown(&self) -> Shown {
        Shown {
            executor_sha256: self.executor_sha256.clone(),
            input: self.input_preview.clone(),
            input_bytes: self.input_bytes,
            argv: self.argv.clone(),
            files: self.files.clone(),
            commands: self.commands.clone(),
        }
    }
}
