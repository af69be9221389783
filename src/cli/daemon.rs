//! `gatehouse daemon` and `gatehouse connect`: parse, then hand over to
//! the library's daemon and its client.

use std::time::Duration;

use gatehouse::daemon::wire::{Narrow, Reply};
use gatehouse::daemon::{ClientError, Daemon, DaemonError, DaemonOptions};
use gatehouse::host::Limits;
use gatehouse::state::grants::parse_duration;
use gatehouse::state::Stores;

use super::args::{ConnectArgs, DaemonArgs};
use super::host::{gather_manifests, parse_level, HostFlags};
use super::{CmdResult, Context, Exit, Failure};

impl From<DaemonError> for Failure {
    fn from(e: DaemonError) -> Failure {
        Failure::of(&e, e.is_invalid_input())
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        Failure::error(gatehouse::util::chain(&e))
    }
}

/// A refusal of the daemon as the command line reports it: exit 3 for
/// the caller's input, else 2.
pub(super) fn refused(reply: &Reply) -> Failure {
    let message = match &reply.code {
        Some(code) => format!(
            "refused: {code}: {}",
            reply.message.as_deref().unwrap_or_default()
        ),
        None => format!(
            "refused: {}",
            reply.message.as_deref().unwrap_or("(no reason given)")
        ),
    };
    if reply.invalid_input {
        Failure::invalid(message)
    } else {
        Failure::denied(message)
    }
}

pub fn daemon(ctx: &Context, args: DaemonArgs) -> CmdResult {
    let config = ctx.config()?;
    let timeout = parse_duration(&args.elicitation_timeout)?;
    if args.concurrency == Some(0) {
        return Err(Failure::invalid("`--concurrency` must be at least 1"));
    }
    // Every executor is loaded once, at start: a definition that does not
    // load stops the daemon here, not at an agent's first call.
    let manifests = gather_manifests(&config.executor_dirs, &[])?;
    let template = HostFlags {
        granted_by: ctx.env.login.clone(),
        approval_queue: true,
        ..HostFlags::of(ctx, config.clone(), String::new(), manifests)
    };
    let open = move |workspace: &str, level| {
        super::host::open(HostFlags {
            workspace: workspace.to_string(),
            level: Some(level),
            ..template.clone()
        })
        .map_err(|f| f.message)
    };
    let queue = Stores::new(&ctx.state)?.approvals;
    let mut options = DaemonOptions::new(&args.socket);
    options.limits = Limits {
        deadline_ms: args.deadline_ms,
        ..Limits::default()
    };
    options.elicitation_timeout = Duration::from_secs(u64::try_from(timeout).unwrap_or(0));
    if let Some(n) = args.concurrency {
        options.concurrency = n;
    }
    if let Some(listen) = args.listen.filter(|l| !l.ip().is_loopback()) {
        return Err(Failure::invalid(
            gatehouse::serve::ServeHttpError::NotLoopback(listen).to_string(),
        ));
    }
    options.http = args.listen.map(|listen| gatehouse::daemon::DaemonHttp {
        listen,
        tokens: ctx.state.state_dir.join("daemon-tokens"),
    });
    if ctx.env.listen_fds {
        use std::os::fd::FromRawFd;
        // Descriptor 3 must be the socket handed over: anything else (a
        // launcher that set the variables but closed it, so that a file
        // this process opened took its number) is refused, not taken.
        let is_socket = std::fs::read_link("/proc/self/fd/3")
            .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            return Err(Failure::invalid(
                "`LISTEN_FDS` says a socket was handed over, but descriptor 3 is not one",
            ));
        }
        // SAFETY: systemd's socket activation passes this process (its
        // LISTEN_PID) its listening sockets from descriptor 3 on
        // (sd_listen_fds(3)); nothing else in this process owns
        // descriptor 3, and it is taken once, here.
        options.inherited = Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(3) });
    }
    Daemon::new(config, options, Box::new(open), queue)?.run()?;
    Ok(Exit::Ok)
}

pub fn connect(args: ConnectArgs) -> CmdResult {
    let level = args.level.as_deref().map(parse_level).transpose()?;
    let workspace = match &args.workspace {
        None => None,
        Some(dir) => Some(
            std::path::absolute(dir)
                .map_err(|e| Failure::io("resolve", dir, &e))?
                .display()
                .to_string(),
        ),
    };
    let connected = gatehouse::daemon::connect(
        &args.socket,
        Narrow {
            workspace,
            level: level.map(|l| l.to_string()),
        },
    )?;
    if !connected.reply.ok {
        return Err(refused(&connected.reply));
    }
    tracing::info!(
        "connected as actor `{}` in `{}` at {}",
        connected.reply.actor.as_deref().unwrap_or_default(),
        connected.reply.workspace.as_deref().unwrap_or_default(),
        connected.reply.level.as_deref().unwrap_or_default()
    );
    gatehouse::daemon::relay(connected, std::io::stdin(), std::io::stdout().lock())?;
    Ok(Exit::Ok)
}
