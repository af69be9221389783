//! The one table of what a guest can be given: each binding gatehouse
//! provides, the WIT interfaces it serves, the capability it needs, and how
//! it is linked. It drives three things, so they cannot disagree: the
//! import check before instantiation ([`super::imports`]), what a run's
//! linker gets ([`granted`], [`link`]), and the key of a prepared instance
//! (the set of bindings linked).
//!
//! Interfaces that carry no authority on their own form the baseline of
//! `compute:pure` and are always linked: `wasi:io`, stdio into capped
//! pipes, `exit`, the terminal queries, `random`, the clocks (frozen
//! without `time:read`), `wasi:cli/environment` (empty without `env:read`)
//! and `wasi:filesystem` (which reaches nothing without a preopen).
//! Everything else is linked only with its capability; an interface that is
//! not in the table is not provided at all.

use serde::Serialize;
use wasmtime::component::Linker;

use super::bindings::{config, delegate, exec, fs, http, human, log, memory, network, wasi};
use super::deadline_io;
use super::plan::Plan;
use super::state::HostState;
use crate::policy::Capability;

/// Whether an interface needs a grant, and which.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Authority {
    /// Always linked.
    Baseline,
    /// Linked only when one of these capabilities is granted.
    Needs(&'static [Capability]),
    /// gatehouse has no host for it.
    Unsupported,
}

/// One binding: a capability's host side.
pub struct Binding {
    /// What the run report calls it.
    pub name: &'static str,
    /// The interfaces it serves (`package/name`, no version); a trailing
    /// `*` matches any name with that prefix.
    pub interfaces: &'static [&'static str],
    /// Whether the interfaces need a grant, and which.
    pub authority: Authority,
    /// What it lets a guest do, in plain words (`gatehouse wit --table`,
    /// the README).
    pub about: &'static str,
    /// For a baseline binding, the capabilities that give it something to
    /// reach (a preopen, a variable, a real clock): a guest without the
    /// import cannot use them (`manifest check` warns).
    pub filled_by: &'static [Capability],
    link: fn(&mut Linker<HostState>) -> wasmtime::Result<()>,
}

impl Binding {
    fn serves(&self, interface: &str) -> bool {
        self.interfaces.iter().any(|i| match i.strip_suffix('*') {
            Some(prefix) => interface.starts_with(prefix),
            None => *i == interface,
        })
    }

    /// Whether `plan` allows it.
    pub fn allowed_by(&self, plan: &Plan) -> bool {
        match self.authority {
            Authority::Baseline => true,
            Authority::Needs(caps) => caps.iter().any(|c| plan.grants(*c)),
            Authority::Unsupported => false,
        }
    }
}

use Capability as C;

/// Every binding, in linking order.
pub static BINDINGS: &[Binding] = &[
    Binding {
        name: "wasi:io",
        interfaces: &["wasi:io/error", "wasi:io/poll", "wasi:io/streams"],
        authority: Authority::Baseline,
        about: "streams, pollables and their errors: the plumbing of every other interface",
        filled_by: &[],
        link: |l| deadline_io::add_to_linker(l, HostState::io_view, HostState::table_mut),
    },
    Binding {
        name: "wasi:clocks",
        interfaces: &["wasi:clocks/wall-clock", "wasi:clocks/monotonic-clock"],
        authority: Authority::Baseline,
        about: "wall and monotonic clocks; frozen (the epoch, never advancing) without `time:read`",
        filled_by: &[C::TimeRead],
        link: wasi::link_clocks,
    },
    Binding {
        name: "wasi:random",
        interfaces: &[
            "wasi:random/random",
            "wasi:random/insecure",
            "wasi:random/insecure-seed",
        ],
        authority: Authority::Baseline,
        about: "random bytes and hash seeds",
        filled_by: &[],
        link: wasi::link_random,
    },
    Binding {
        name: "wasi:cli/{exit,stdin,stdout,stderr,terminal-*}",
        interfaces: &[
            "wasi:cli/exit",
            "wasi:cli/stdin",
            "wasi:cli/stdout",
            "wasi:cli/stderr",
            "wasi:cli/terminal-*",
        ],
        authority: Authority::Baseline,
        about: "exit with a status; stdin (a command's input), stdout and stderr into capped pipes; no terminal",
        filled_by: &[],
        link: wasi::link_stdio,
    },
    Binding {
        // Every Rust guest imports it (std's runtime does), so the
        // authority is in its contents: no variables without `env:read`,
        // and only the granted ones with it; arguments only for commands.
        name: "wasi:cli/environment",
        interfaces: &["wasi:cli/environment"],
        authority: Authority::Baseline,
        about: "arguments (a command's argv) and environment variables: none without `env:read`, only the granted ones with it",
        filled_by: &[C::EnvRead],
        link: wasi::link_environment,
    },
    Binding {
        // Reaches nothing without a preopen; preopens come only from fs
        // grants, and `types` goes through the journaling layer.
        name: "wasi:filesystem",
        interfaces: &["wasi:filesystem/types", "wasi:filesystem/preopens"],
        authority: Authority::Baseline,
        about: "files and directories beneath the preopens; there are none without `fs:read` or `fs:write`",
        filled_by: &[C::FsRead, C::FsWrite],
        link: fs::add_to_linker,
    },
    Binding {
        name: "gatehouse:executor/log",
        interfaces: &["gatehouse:executor/log", "gatehouse:executor/types"],
        authority: Authority::Baseline,
        about: "structured log lines kept with the turn",
        filled_by: &[],
        link: log::add_to_linker,
    },
    Binding {
        name: "gatehouse:executor/memory",
        interfaces: &["gatehouse:executor/memory"],
        authority: Authority::Needs(&[C::MemoryRead, C::MemoryWrite]),
        about: "get, set, delete and list keys in the host's memory, in the one granted scope",
        filled_by: &[],
        link: memory::add_to_linker,
    },
    Binding {
        name: "gatehouse:executor/human",
        interfaces: &["gatehouse:executor/human"],
        authority: Authority::Needs(&[C::HumanAsk]),
        about: "ask the person behind the turn a question",
        filled_by: &[],
        link: human::add_to_linker,
    },
    Binding {
        name: "gatehouse:executor/delegate",
        interfaces: &["gatehouse:executor/delegate"],
        authority: Authority::Needs(&[C::DelegateCall]),
        about: "run another executor by name (`EXECUTOR`, or `ACTOR/EXECUTOR` to delegate to another actor), as its own turn",
        filled_by: &[],
        link: delegate::add_to_linker,
    },
    Binding {
        name: "gatehouse:executor/exec",
        interfaces: &["gatehouse:executor/exec"],
        authority: Authority::Needs(&[C::CodeExec]),
        about: "run a granted host command in the OS sandbox",
        filled_by: &[],
        link: exec::add_to_linker,
    },
    Binding {
        name: "wasi:sockets",
        interfaces: &["wasi:sockets/*"],
        authority: Authority::Needs(&[C::NetworkSites]),
        about: "resolve the granted host names and connect to the addresses they resolved to",
        filled_by: &[],
        link: network::add_to_linker,
    },
    Binding {
        name: "wasi:http",
        interfaces: &["wasi:http/outgoing-handler", "wasi:http/types"],
        authority: Authority::Needs(&[C::NetworkSites]),
        about: "HTTP requests that a `network:sites` grant covers (scheme, host, port, path, method), decided one by one, with TLS on the host and providers' credentials added by the host",
        filled_by: &[C::ProviderAccess],
        link: http::add_to_linker,
    },
    Binding {
        name: "wasi:config",
        interfaces: &["wasi:config/store"],
        authority: Authority::Needs(&[C::ConfigRead]),
        about: "read the granted names of the host's `[values]`; a name not granted reads as absent",
        filled_by: &[],
        link: config::add_to_linker,
    },
];

/// The binding that serves `interface` (`package/name`, no version).
pub fn binding_of(interface: &str) -> Option<&'static Binding> {
    BINDINGS.iter().find(|b| b.serves(interface))
}

/// What `interface` needs.
pub fn authority(interface: &str) -> Authority {
    binding_of(interface).map_or(Authority::Unsupported, |b| b.authority)
}

/// The bindings `plan` allows, in table order: what a run links, and the
/// key of its prepared instance.
pub fn granted(plan: &Plan) -> Vec<&'static Binding> {
    BINDINGS.iter().filter(|b| b.allowed_by(plan)).collect()
}

/// The bindings `plan` allows as a bit set (bit `i`: `BINDINGS[i]`): the
/// key of a component's prepared instance.
pub fn granted_mask(plan: &Plan) -> u32 {
    BINDINGS
        .iter()
        .enumerate()
        .filter(|(_, b)| b.allowed_by(plan))
        .fold(0, |mask, (i, _)| mask | (1 << i))
}

/// The names of the bindings in `mask` (see [`granted_mask`]), for the
/// run report.
pub fn names(mask: u32) -> Vec<std::borrow::Cow<'static, str>> {
    BINDINGS
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, b)| std::borrow::Cow::Borrowed(b.name))
        .collect()
}

/// Links `bindings` into `linker`.
///
/// # Security
/// Each binding hands the guest what the store's state for it holds; link
/// only the bindings of [`granted`] for the plan the state is built from.
pub fn link(linker: &mut Linker<HostState>, bindings: &[&'static Binding]) -> wasmtime::Result<()> {
    for b in bindings {
        (b.link)(linker)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_fits_the_bit_set_of_a_prepared_instance() {
        assert!(BINDINGS.len() <= 32);
    }

    #[test]
    fn every_interface_has_one_binding_and_authority_follows_the_table() {
        let mut seen = std::collections::BTreeSet::new();
        for b in BINDINGS {
            for i in b.interfaces {
                assert!(seen.insert(*i), "`{i}` is served twice");
            }
        }
        assert_eq!(authority("wasi:io/poll"), Authority::Baseline);
        assert_eq!(authority("wasi:cli/terminal-stdout"), Authority::Baseline);
        assert_eq!(
            authority("wasi:sockets/ip-name-lookup"),
            Authority::Needs(&[C::NetworkSites])
        );
        assert_eq!(
            authority("gatehouse:executor/memory"),
            Authority::Needs(&[C::MemoryRead, C::MemoryWrite])
        );
        assert_eq!(
            authority("wasi:http/outgoing-handler"),
            Authority::Needs(&[C::NetworkSites])
        );
        assert_eq!(
            authority("wasi:http/incoming-handler"),
            Authority::Unsupported
        );
        assert_eq!(authority("wasi:cli/run"), Authority::Unsupported);
    }
}
