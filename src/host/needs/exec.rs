//! `code:exec` on a program: the capability, then the program must be one
//! the manifest lists in `tools`, and one the actor may run (the tool
//! layers). Each command is screened again, with its arguments, when the
//! guest runs it; and when the capability needs a person's approval, a
//! component's is asked one command line at a time, before each runs
//! (a command executor's, whose argv is known, at the gate).

use super::{Asking, Need, Stop};
use crate::policy::{command::basename, DenyCode, RequestKind};
use crate::sandbox::bindings::exec::ExecPart;

pub(super) fn need(
    part: &mut ExecPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    // A component's command lines are known only when it runs them: a
    // person is asked about each one then (with its argv), not about the
    // capability at the gate (issue 46, item 7). A command executor's one
    // argv is shown with the gate's approval itself, asked once.
    let component = need.manifest.command.is_empty();
    let by_a_person = if component {
        asking.capability_per_line(need)?
    } else {
        asking.capability(need, None)?;
        false
    };
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
    if by_a_person && !part.ask_each.contains(&tool) {
        part.ask_each.push(tool.clone());
        part.approved = asking.approved_once.commands.clone();
    }
    if !part.tools.contains(&tool) {
        part.tools.push(tool);
    }
    Ok(())
}
