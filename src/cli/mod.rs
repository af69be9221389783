//! The command line. Flags are parsed raw by clap into [`args`], resolved
//! once into a [`Context`] (configuration, state paths, workspace), then a
//! subcommand runs against the library. The library knows nothing of this.

mod approvals;
mod args;
mod authoring;
mod commands;
mod conformance;
mod daemon;
mod demo;
mod history;
mod host;
mod isolation;
mod run;
mod serve;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Parser;

use gatehouse::config::{resolve_path, ConfigError, HostConfig, HostEnv, StatePaths};
use gatehouse::policy::ResolvedPath;
use gatehouse::util::{lower, printable};

pub use args::Cli;

/// Distinct exit codes, as documented in `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    Error,
    Denied,
    Invalid,
    Approval,
    /// Once guest code started, `gatehouse run` exits as `wasmtime run`
    /// would: the guest's own status, 134 for a trap or a limit, 130 for
    /// an interrupt.
    Guest(i32),
}

impl Exit {
    /// The process's exit status.
    pub fn code(self) -> i32 {
        match self {
            Exit::Ok => 0,
            Exit::Error => 1,
            Exit::Denied => 2,
            Exit::Invalid => 3,
            Exit::Approval => 4,
            Exit::Guest(n) => n,
        }
    }
}

/// A failure that ends the command: its message and exit code.
#[derive(Debug, Clone)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

impl Failure {
    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure {
            exit: Exit::Invalid,
            message: message.into(),
        }
    }

    pub fn error(message: impl Into<String>) -> Failure {
        Failure {
            exit: Exit::Error,
            message: message.into(),
        }
    }

    /// An I/O error on a file of the command's (exit 1): "cannot `action`
    /// `path`: the OS's reason", lowercased as every message is.
    pub fn io(action: &str, path: &Path, e: &std::io::Error) -> Failure {
        Failure::error(format!(
            "cannot {action} `{}`: {}",
            path.display(),
            lower(&e.to_string())
        ))
    }

    pub fn denied(message: impl Into<String>) -> Failure {
        Failure {
            exit: Exit::Denied,
            message: message.into(),
        }
    }
}

impl Failure {
    /// `e` with its causes: invalid input (exit 3) when `invalid`, else an
    /// error (exit 1).
    pub fn of(e: &(dyn std::error::Error + 'static), invalid: bool) -> Failure {
        Failure {
            exit: if invalid { Exit::Invalid } else { Exit::Error },
            message: gatehouse::util::chain(e),
        }
    }
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Failure {
        Failure::of(&e, e.is_invalid_input())
    }
}

pub type CmdResult = Result<Exit, Failure>;

/// What every subcommand may need, resolved once from flags and environment.
pub struct Context {
    pub env: HostEnv,
    pub config_flag: Option<PathBuf>,
    pub state: StatePaths,
    pub json: bool,
    /// The configuration, read at most once: at start-up when the state
    /// may follow its `[state] database_url`, else at the first command
    /// that asks.
    loaded: std::cell::OnceCell<Result<HostConfig, Failure>>,
}

impl Context {
    /// The host configuration (read on demand: `policy table` needs none).
    pub fn config(&self) -> Result<HostConfig, Failure> {
        self.loaded
            .get_or_init(|| {
                Ok(HostConfig::discover(
                    self.config_flag.as_deref(),
                    &self.env,
                )?)
            })
            .clone()
    }

    /// The canonical turn workspace: `dir`, else the current directory.
    pub fn workspace(&self, dir: Option<&Path>) -> Result<String, Failure> {
        let dir = match dir {
            Some(d) => d.to_path_buf(),
            None => std::env::current_dir().map_err(|e| {
                Failure::error(format!(
                    "cannot read the current directory: {}",
                    lower(&e.to_string())
                ))
            })?,
        };
        if !dir.is_dir() {
            return Err(Failure::invalid(format!(
                "PATH_RESOLUTION_FAILED: workspace `{}` is not a directory",
                dir.display()
            )));
        }
        match resolve_path(&dir) {
            ResolvedPath::Resolved(p) => Ok(p),
            ResolvedPath::Failed { input, reason } => Err(Failure::invalid(format!(
                "PATH_RESOLUTION_FAILED: workspace `{input}`: {reason}"
            ))),
        }
    }
}

/// Writes one line of human-readable text to stdout, every control
/// character in it escaped (see [`printable`]): a guest's output, log
/// lines, argv or file names cannot move the cursor, clear the screen or
/// start a line of their own. The newline that ends the line is the only
/// one written. A closed pipe (`| head`) is not an error.
pub fn out(line: impl AsRef<str>) {
    write_line(&printable(line.as_ref()));
}

/// Writes one line of human-readable text to stderr, escaped like
/// [`out`].
pub fn err(line: impl AsRef<str>) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{}", printable(line.as_ref()));
}

/// Writes a value as one JSON line, exact (JSON escapes what it must).
pub fn out_json(value: &impl serde::Serialize) {
    write_line(&serde_json::to_string(value).unwrap_or_default());
}

fn write_line(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
}

/// Logs through `tracing` to stderr at the level `GATEHOUSE_LOG` (else
/// `RUST_LOG`) names: `error`, `warn`, `info`, `debug`, `trace`, or `off`
/// (anything else: `info`). Without either, warnings and errors: what
/// went wrong beside a turn (an audit line or a denial not recorded, a
/// log not synced) must not go unseen.
fn init_tracing() {
    let value = ["GATEHOUSE_LOG", "RUST_LOG"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()));
    let level = match value.as_deref() {
        None => tracing::Level::WARN,
        Some("off") => return,
        Some(v) => v.parse::<tracing::Level>().unwrap_or(tracing::Level::INFO),
    };
    // Plain text, on a terminal too: the crate is built without its
    // `ansi` feature (asking for colours would panic).
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            // Asked-for help and version are success; everything else,
            // including a bare `gatehouse` that shows help, is a usage
            // error (exit 3, not clap's 2, which means "denied" here).
            let exit = match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Exit::Ok,
                _ => Exit::Invalid,
            };
            let _ = e.print();
            return exit.code();
        }
    };
    init_tracing();
    let env = HostEnv::from_process();
    let mut state = env.state_paths();
    if let Some(dir) = &cli.state_dir {
        state = StatePaths {
            database_url: state.database_url.take(),
            ..StatePaths::under(dir, env.grants_db.clone(), env.history_dir.clone())
        };
    }
    // `[state] database_url` of the configuration, where the environment
    // named none: every command's stores follow it. A configuration that
    // does not load is reported by the commands that read it.
    let loaded = std::cell::OnceCell::new();
    if state.database_url.is_none() {
        let config = HostConfig::discover(cli.config.as_deref(), &env).map_err(Failure::from);
        if let Ok(config) = &config {
            state = state.with_config(config);
        }
        let _ = loaded.set(config);
    }
    let ctx = Context {
        config_flag: cli.config.clone(),
        state,
        json: cli.json,
        env,
        loaded,
    };
    match commands::run(&ctx, cli.command) {
        Ok(exit) => exit.code(),
        Err(f) => {
            eprintln!("gatehouse: {}", printable(&f.message));
            f.exit.code()
        }
    }
}
