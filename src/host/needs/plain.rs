//! The need functions of the capabilities whose only rule is the
//! capability's own decision: their part is the target, or a flag.

use super::{Asking, Need, Stop};
use crate::policy::HostPattern;
use crate::sandbox::bindings::{
    clocks::ClocksPart, delegate::DelegatePart, env::EnvPart, human::HumanPart,
    network::NetworkPart,
};

/// `env:read` on a variable name.
pub(super) fn env(
    part: &mut EnvPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
    part.names.extend(need.target.map(str::to_string));
    Ok(())
}

/// `network:sites` on a host pattern.
pub(super) fn network(
    part: &mut NetworkPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
    part.hosts
        .extend(need.target.and_then(|t| HostPattern::parse(t).ok()));
    Ok(())
}

/// `delegate:call` on an executor (`EXECUTOR` or `ACTOR/EXECUTOR`): the
/// callee passes its own gate when it is called.
pub(super) fn delegate(
    part: &mut DelegatePart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
    part.callees.extend(need.target.map(str::to_string));
    Ok(())
}

/// `time:read`: real clocks.
pub(super) fn clocks(
    part: &mut ClocksPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
    part.real = true;
    Ok(())
}

/// `human:ask`: the turn's asker.
pub(super) fn human(
    part: &mut HumanPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
    part.granted = true;
    Ok(())
}
