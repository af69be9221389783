//! `gatehouse serve --mcp`: parse, open the host, hand it to the server.

use std::time::Duration;

use gatehouse::host::{Host, Limits};
use gatehouse::serve::{
    serve_http, serve_token, HttpOptions, ServeError, ServeHttpError, ServeOptions, Server,
};
use gatehouse::state::grants::parse_duration;

use super::args::ServeArgs;
use super::host::HostFlags;
use super::host::{gather_manifests, parse_level};
use super::{CmdResult, Context, Exit, Failure};

impl From<ServeError> for Failure {
    fn from(e: ServeError) -> Failure {
        Failure::of(&e, e.is_invalid_input())
    }
}

/// The server's host: the configuration, its executors and those named,
/// the workspace, the pending-approval queue on.
fn open_host(ctx: &Context, args: &ServeArgs) -> Result<Host, Failure> {
    let config = ctx.config()?;
    let workspace = ctx.workspace(args.workspace.as_deref())?;
    let manifests = gather_manifests(&config.executor_dirs, &args.executors)?;
    super::host::open(HostFlags {
        level: args.level.as_deref().map(parse_level).transpose()?,
        granted_by: ctx.env.login.clone(),
        approval_queue: true,
        ..HostFlags::of(ctx, config, workspace, manifests)
    })
}

pub fn run(ctx: &Context, args: ServeArgs) -> CmdResult {
    let timeout = parse_duration(&args.elicitation_timeout)?;
    let host = open_host(ctx, &args)?;
    let mut options = ServeOptions::new(&args.actor);
    options.elicitation = ctx.config()?.approvals.elicitation_under_serve();
    options.elicitation_timeout = Duration::from_secs(u64::try_from(timeout).unwrap_or(0));
    options.limits = Limits {
        deadline_ms: args.deadline_ms,
        ..Limits::default()
    };
    if let Some(n) = args.concurrency {
        if n == 0 {
            return Err(Failure::invalid(
                "`--concurrency` must be at least 1".to_string(),
            ));
        }
        options.concurrency = n;
    }
    if let Some(file) = &args.snapshot {
        // The snapshot the person verified is the one served: no grant
        // may be added by this server ("remember" is not offered).
        gatehouse::snapshot::verify(file, host.snapshot())?;
        host.freeze_allow_set();
        options.remember = false;
    }
    let frozen = args.snapshot.is_some();
    let served = host.snapshot().definition_hash();
    let served_policy = host.snapshot().policy_hash();
    let server = Server::new(host, options)?;
    tracing::info!(
        "serving {} tools to actor `{}`",
        server.tool_names().len(),
        args.actor
    );
    match args.listen {
        None => server.serve_stdio()?,
        Some(listen) => {
            // Refused before the token file is made.
            if !listen.ip().is_loopback() {
                return Err(ServeError::from(ServeHttpError::NotLoopback(listen)).into());
            }
            let token = if args.no_auth {
                None
            } else {
                Some(serve_token(&ctx.state.state_dir).map_err(ServeError::from)?)
            };
            serve_http(server, HttpOptions { listen, token })?;
        }
    }
    // The configuration and executor definitions served were frozen at
    // start: say whether the files still say the same.
    match open_host(ctx, &args).map(|h| h.snapshot()) {
        Ok(now) if now.definition_hash() != served => super::err(format!(
            "gatehouse: the configuration or executor definitions changed while serving (served {served}, now {}); the session kept the ones it started with",
            now.definition_hash()
        )),
        Ok(now) if now.policy_hash() != served_policy => super::err(format!(
            "gatehouse: the grants in force changed while serving (policy hash {served_policy} at start, {} now){}",
            now.policy_hash(),
            if frozen {
                "; this session used only the grants of its snapshot, less those revoked or expired"
            } else {
                ""
            }
        )),
        Ok(_) => tracing::info!(
            "the configuration, definitions and grants served are unchanged ({served}, {served_policy})"
        ),
        Err(f) => super::err(format!(
            "gatehouse: cannot reread the configuration after serving: {}",
            f.message
        )),
    }
    Ok(Exit::Ok)
}
