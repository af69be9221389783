//! `code:exec` on a program: the capability, then the program must be one
//! the manifest lists in `tools`, and one the actor may run (the tool
//! layers). Each command is screened again, with its arguments, when the
//! guest runs it.

use super::{Asking, Need, Stop};
use crate::policy::{command::basename, DenyCode, RequestKind};
use crate::sandbox::bindings::exec::ExecPart;

pub(super) fn need(
    part: &mut ExecPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
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
    if !part.tools.contains(&tool) {
        part.tools.push(tool);
    }
    Ok(())
}
