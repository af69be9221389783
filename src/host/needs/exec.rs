//! `code:exec` on a program: the capability, then the program must be one
//! the manifest lists in `tools`, and one the actor may run (the tool
//! layers). Each command is screened again, with its arguments, when the
//! guest runs it; and when a person allowed `code:exec` once, each
//! command line is asked about before it runs.

use super::{Asking, Need, Stop};
use crate::policy::{command::basename, Decision, DenyCode, RequestKind};
use crate::sandbox::bindings::exec::ExecPart;

pub(super) fn need(
    part: &mut ExecPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
    // Allowed by a person (once, or pending an answer) rather than by a
    // grant or the level: "once" covers one command line, the one shown.
    // A component's command lines are known only when it runs them, so
    // each is asked about then (a command executor's one argv is shown
    // with the approval itself).
    let by_a_person = matches!(
        asking.steps.last().map(|s| &s.decision),
        Some(Decision::ApprovalRequired { .. })
    );
    let tool = need.target.unwrap_or_default().to_string();
    if !need
        .manifest
        .tools
        .iter()
        .any(|t| t == &tool || basename(t) == tool)
    {
        return Err(Stop::new(
            DenyCode::TargetMismatch,
            format!("`code:exec` on `{tool}`: `{tool}` is not in the manifest's `tools`"),
        ));
    }
    asking.ask(RequestKind::Tool {
        tool: tool.clone(),
        command: None,
    })?;
    if by_a_person && need.manifest.command.is_empty() && !part.ask_each.contains(&tool) {
        part.ask_each.push(tool.clone());
        part.approved = asking.approved_once.commands.clone();
    }
    if !part.tools.contains(&tool) {
        part.tools.push(tool);
    }
    Ok(())
}
