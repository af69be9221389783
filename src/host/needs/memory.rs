//! `memory:read` / `memory:write`: the capability, then the scope rule; an
//! executor uses one scope.

use super::{Asking, Need, Stop};
use crate::policy::{Access, Capability, DenyCode, RequestKind};
use crate::sandbox::bindings::memory::MemoryPart;

pub(super) fn need(
    part: &mut MemoryPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
    let scope = need.target.unwrap_or_default().to_string();
    let write = need.cap == Capability::MemoryWrite;
    asking.ask(RequestKind::Memory {
        scope: scope.clone(),
        access: if write { Access::Write } else { Access::Read },
    })?;
    if (part.read || part.write) && part.scope != scope {
        return Err(Stop::new(
            DenyCode::TargetMismatch,
            format!(
                "an executor may use one memory scope, not `{}` and `{scope}`",
                part.scope
            ),
        ));
    }
    part.scope = scope;
    if write {
        part.write = true;
    } else {
        part.read = true;
    }
    Ok(())
}
