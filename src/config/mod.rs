//! `gatehouse.toml`: the level, the executor directories and the actors.
//!
//! Parsing is strict (unknown fields are errors that name the field); paths
//! are resolved and canonicalized here, before `decide` sees them.
//!
//! With no configuration file, [`HostConfig::safe_default`] applies: level
//! `Supervised`, one actor `main` (channel `cli`, sender the login name)
//! that may run any executor named on the command line and whose only
//! workspace is the turn's `--workspace`.
//!
//! Two optional tables tune isolation (see `gatehouse isolation`):
//! `[isolation] on_degraded = "warn" | "refuse-critical" | "refuse-all"`
//! (default `warn`), and `[engine] signals_based_traps = false` /
//! `guard_bytes = 0`, which build a weaker engine (the report says so).
//! `[serve] tools = ["history", "undo"]` lets `gatehouse serve` offer
//! those two of its own tools, for the serving actor's own turns only.

mod env;
mod network;
mod resolve;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use crate::policy::{OnDegraded, UnknownOnDegraded};
pub use env::{HostEnv, StatePaths};
pub use network::{NetworkConfig, NotifyDef, ProviderDef, ValueSource};
pub use resolve::{
    absolutize, resolve_ancestor, resolve_glob, resolve_path, resolve_raw_path, GlobRoot,
};

use crate::policy::{Actor, Identity, Level, ResolvedPath, WorkspaceMode, WorkspaceRoot};
use crate::util::lower;

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read `{path}`: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: crate::util::IoCause,
    },
    /// The file is not valid TOML, or does not have the configuration's shape.
    #[error("`{path}` is not valid toml: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A field's value is not allowed.
    #[error("`{path}`: field `{field}`: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The field, as a path in the file (`actors.main.workspaces[0]`, …).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A field's value does not parse as what the field holds (a level,
    /// an `on_degraded` mode).
    #[error("`{path}`: field `{field}`: {source}")]
    Unparsed {
        /// The file.
        path: PathBuf,
        /// The field, as a path in the file.
        field: &'static str,
        /// Why it does not parse.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A path in a field could not be canonicalized.
    #[error("PATH_RESOLUTION_FAILED: `{path}`: field `{field}`: `{input}` could not be resolved: {reason}")]
    PathResolution {
        /// The file.
        path: PathBuf,
        /// The field, as a path in the file.
        field: String,
        /// The path as written.
        input: String,
        /// Why it could not be resolved.
        reason: String,
    },
}

impl ConfigError {
    /// Everything but an unreadable file is the user's input to fix.
    pub fn is_invalid_input(&self) -> bool {
        !matches!(self, ConfigError::Read { .. })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    level: Option<String>,
    max_level: Option<String>,
    #[serde(default)]
    executor_dirs: Vec<String>,
    #[serde(default)]
    actors: BTreeMap<String, RawActor>,
    isolation: Option<RawIsolation>,
    engine: Option<EngineConfig>,
    limits: Option<RawLimits>,
    serve: Option<RawServe>,
    network: Option<network::RawNetwork>,
    #[serde(default)]
    providers: BTreeMap<String, network::RawProvider>,
    #[serde(default)]
    values: BTreeMap<String, String>,
    state: Option<RawState>,
    approvals: Option<RawApprovals>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApprovals {
    elicitation: Option<String>,
    #[serde(default)]
    people: Vec<u32>,
    remember_max: Option<String>,
    notify: Option<network::RawNotify>,
}

/// `[approvals] elicitation`: whether an MCP client's answer to an
/// approval form (an elicitation, or a 2026-07-28 client's
/// `inputResponses`) counts as the person's. The client is the agent
/// runtime: only the operator can say its interface is the person's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elicitation {
    /// The client is never asked: an approval is queued for a person
    /// (`gatehouse approvals`).
    Off,
    /// The client's "allow once" and "deny" count; it is not offered
    /// "allow and remember", and such an answer is queued instead.
    Once,
    /// The client's answers count, "allow and remember" included.
    Remember,
}

impl std::str::FromStr for Elicitation {
    type Err = String;
    fn from_str(s: &str) -> Result<Elicitation, String> {
        match s {
            "off" => Ok(Elicitation::Off),
            "once" => Ok(Elicitation::Once),
            "remember" => Ok(Elicitation::Remember),
            _ => Err(format!("`{s}` is not one of `off`, `once`, `remember`")),
        }
    }
}

/// How long a grant remembered through an answer may last at most, when
/// `[approvals] remember_max` does not say: 7 days.
pub const DEFAULT_REMEMBER_MAX_SECS: u64 = 7 * 24 * 60 * 60;

/// `[approvals]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalsConfig {
    /// `elicitation`, when the file sets it (see
    /// [`ApprovalsConfig::elicitation_under_serve`]).
    pub elicitation: Option<Elicitation>,
    /// `people`: the uids of the people who answer approvals.
    pub people: Vec<u32>,
    /// `remember_max`: the longest a grant remembered through an answer
    /// (a terminal's, a client's, `approvals allow --remember`) lasts,
    /// in seconds; `forever` there means this long. Only `grants add`,
    /// a person's own command, records a grant without expiry.
    pub remember_max_secs: u64,
    /// `notify`: where a queued approval is announced; `None`: nowhere.
    pub notify: Option<NotifyDef>,
}

impl Default for ApprovalsConfig {
    fn default() -> ApprovalsConfig {
        ApprovalsConfig {
            elicitation: None,
            people: Vec::new(),
            remember_max_secs: DEFAULT_REMEMBER_MAX_SECS,
            notify: None,
        }
    }
}

impl ApprovalsConfig {
    /// `expires_in_secs` of a remembered answer (`None`: forever), held
    /// to `remember_max`.
    pub fn remembered_for(&self, expires_in_secs: Option<u64>) -> u64 {
        expires_in_secs.map_or(self.remember_max_secs, |s| s.min(self.remember_max_secs))
    }

    /// What `gatehouse serve` takes a client's answer for: the file's
    /// `elicitation`; without it `off` when `people` names who answers,
    /// else `once` (never "remember": a grant is written only on the
    /// operator's word).
    pub fn elicitation_under_serve(&self) -> Elicitation {
        match self.elicitation {
            Some(e) => e,
            None if !self.people.is_empty() => Elicitation::Off,
            None => Elicitation::Once,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    database_url: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServe {
    #[serde(default)]
    tools: Vec<String>,
}

/// One of gatehouse's own tools a server may offer beside the executors
/// (`[serve] tools`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ServeTool {
    /// `gatehouse_history`: the serving actor's own turns.
    History,
    /// `gatehouse_undo`: undoes one of the serving actor's own turns.
    Undo,
}

impl ServeTool {
    /// The name in `[serve] tools`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServeTool::History => "history",
            ServeTool::Undo => "undo",
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    journal_mib: Option<u64>,
    memory_keys: Option<u64>,
    http_requests: Option<u64>,
    http_response_mib: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIsolation {
    on_degraded: Option<String>,
}

/// `[engine]`: settings that weaken the engine, for hosts that need them
/// (and for the tests that show the report saying so). `None`: the
/// default of the engine (`sandbox::EngineProfile::configured`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    /// Default `true`.
    pub signals_based_traps: Option<bool>,
    /// The guard region around each linear memory; default 32 MiB.
    pub guard_bytes: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawActor {
    channel: Option<String>,
    sender: Option<String>,
    #[serde(default)]
    skills: Vec<String>,
    #[serde(default)]
    subagents: Vec<String>,
    #[serde(default)]
    mcp_servers: Vec<String>,
    #[serde(default)]
    delegates_to: Vec<String>,
    #[serde(default)]
    memory: Vec<String>,
    #[serde(default)]
    tools: Vec<String>,
    workspaces: Option<Vec<RawWorkspace>>,
    #[serde(default)]
    uids: Vec<u32>,
    level: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkspace {
    path: String,
    mode: WorkspaceMode,
}

/// One actor as configured (paths not yet canonical).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActorConfig {
    /// The channel and sender its grants are recorded for (default channel `cli`, sender
    /// the actor's name).
    pub identity: Identity,
    /// Executors it may run; `*` means any.
    pub skills: Vec<String>,
    /// Subagents it may use.
    pub subagents: Vec<String>,
    /// MCP servers it may use.
    pub mcp_servers: Vec<String>,
    /// Actors it may delegate to.
    pub delegates_to: Vec<String>,
    /// Memory scopes it may use besides its own `private:<name>`.
    pub memory: Vec<String>,
    /// Programs and tools it may run (basenames, or full paths).
    pub tools: Vec<String>,
    /// `None`: the turn's workspace, read-write.
    pub workspaces: Option<Vec<(String, WorkspaceMode)>>,
    /// `uids`: the OS accounts `gatehouse daemon` serves as this actor
    /// (the peer credentials of a connection on its socket). No uid is
    /// two actors'.
    pub uids: Vec<u32>,
    /// `level`: the highest level the daemon runs this actor's turns at
    /// (a client may ask a lower one); `None`: the file's `level`. Never
    /// above `max_level`.
    pub level: Option<Level>,
}

/// The host configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    /// The file it came from; `None` for the safe default.
    pub source: Option<PathBuf>,
    /// The autonomy level (`level`).
    pub level: Level,
    /// `max_level`: the highest level a turn may run at, whatever
    /// `--level` asks (a host refuses a higher one at open). `None`: no
    /// cap, so `--level` may raise the level (as before the key existed).
    ///
    /// # Security
    /// Without it, whoever starts the process (for `serve`, the agent
    /// runtime that spawns it) chooses how much is asked of a person.
    pub max_level: Option<Level>,
    /// Absolute (relative entries are taken from the file's directory).
    pub executor_dirs: Vec<PathBuf>,
    /// The actors, by name.
    pub actors: BTreeMap<String, ActorConfig>,
    /// `[isolation] on_degraded`; default `warn`.
    pub on_degraded: OnDegraded,
    /// `[engine]`.
    pub engine: EngineConfig,
    /// `[limits] journal_mib`, in bytes: what one turn may back up for
    /// undo; past it a change is refused with `LIMIT_JOURNAL`. `None`:
    /// the sandbox's default (`sandbox::DEFAULT_JOURNAL_BYTES`, 256 MiB),
    /// which the host applies.
    pub journal_bytes: Option<u64>,
    /// `[limits] memory_keys`: how many keys one memory scope may hold;
    /// a new key past it is refused with `LIMIT_MEMORY_KEYS`. `None`: the
    /// sandbox's default (`sandbox::DEFAULT_MEMORY_KEYS`, 10000).
    pub memory_keys: Option<u64>,
    /// `[limits] http_requests`: HTTP requests one turn may send; `None`:
    /// the sandbox's default (`sandbox::DEFAULT_HTTP_REQUESTS`, 100).
    pub http_requests: Option<u64>,
    /// `[limits] http_response_mib`, in bytes: response bytes one turn
    /// may receive over HTTP; `None`: the sandbox's default (64 MiB).
    pub http_response_bytes: Option<u64>,
    /// `[network]`: TLS roots and pinned names of the HTTP sender.
    pub network: NetworkConfig,
    /// `[providers.NAME]`: credentials for `provider:access`.
    pub providers: Vec<ProviderDef>,
    /// `[values]`: named values an executor granted `config:read` on a
    /// name reads through `wasi:config/store`. Not for credentials: a
    /// value is handed to the guest (a credential goes in `[providers]`,
    /// which the guest never sees).
    pub values: BTreeMap<String, String>,
    /// `[approvals]`: who answers approvals, and whether a client's
    /// elicitation counts.
    pub approvals: ApprovalsConfig,
    /// `[serve] tools`: which of gatehouse's own tools (`history`,
    /// `undo`) `gatehouse serve` offers beside the executors. Default:
    /// none, so an agent sees only executors unless the person says so.
    pub serve_tools: Vec<ServeTool>,
    /// `[state] database_url`: the PostgreSQL database a fleet shares its
    /// state in (`postgres://…`); `None`: the SQLite files of the state
    /// directory. `$GATEHOUSE_DATABASE_URL` overrides it.
    pub database_url: Option<String>,
    /// Every place a later invocation would find configuration or state
    /// in (set by [`HostConfig::discover`]): protected like the
    /// configuration, whether or not it exists yet.
    pub places: Places,
}

/// Where gatehouse looks for its configuration and its state: `--config`,
/// `$GATEHOUSE_CONFIG`, `$XDG_CONFIG_HOME/gatehouse`,
/// `~/.config/gatehouse`; `$GATEHOUSE_STATE_DIR`,
/// `$XDG_STATE_HOME/gatehouse`, `~/.local/state/gatehouse`,
/// `$GATEHOUSE_GRANTS_DB`, `$GATEHOUSE_HISTORY_DIR`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Places {
    /// Every place configuration may be found, in the order they are tried.
    pub config: Vec<PathBuf>,
    /// Every place state may be kept, in the order they are tried.
    pub state: Vec<PathBuf>,
}

/// A field of `gatehouse.toml` that fails its check: one that does not
/// parse as what it holds, or one whose value is not allowed.
enum Bad {
    /// [`ConfigError::Unparsed`].
    Unparsed(&'static str, Box<dyn std::error::Error + Send + Sync>),
    /// [`ConfigError::Invalid`]: the field and why.
    Invalid(String, String),
}

impl Bad {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Bad {
        Bad::Invalid(field.into(), message.into())
    }

    /// The error of the file at `path`.
    fn at(self, path: &Path) -> ConfigError {
        match self {
            Bad::Unparsed(field, source) => ConfigError::Unparsed {
                path: path.to_path_buf(),
                field,
                source,
            },
            Bad::Invalid(field, message) => ConfigError::Invalid {
                path: path.to_path_buf(),
                field,
                message,
            },
        }
    }
}

impl From<(String, String)> for Bad {
    fn from((field, message): (String, String)) -> Bad {
        Bad::Invalid(field, message)
    }
}

/// The validator: each part of the file checked by one function, in the
/// order of the table below; the first failure names its field.
fn validate(path: &Path, raw: RawConfig, home: Option<&Path>) -> Result<HostConfig, Bad> {
    let (level, max_level) = levels(raw.level.as_deref(), raw.max_level.as_deref())?;
    let on_degraded = match raw.isolation.and_then(|i| i.on_degraded) {
        None => OnDegraded::default(),
        Some(v) => v
            .parse::<OnDegraded>()
            .map_err(|e| Bad::Unparsed("isolation.on_degraded", e.into()))?,
    };
    let limits = raw.limits.unwrap_or_default();
    let memory_keys = bounded("limits.memory_keys", limits.memory_keys, 1_000_000, "")?;
    let http_requests = bounded("limits.http_requests", limits.http_requests, 1_000_000, "")?;
    let http_response_bytes = bounded(
        "limits.http_response_mib",
        limits.http_response_mib,
        1 << 20,
        " (MiB)",
    )?
    .map(|mib| mib << 20);
    let here = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let network = network::network(raw.network, &here)?;
    let providers = network::providers(raw.providers, &here)?;
    let values = values(raw.values)?;
    let approvals = approvals(raw.approvals.unwrap_or_default(), &here)?;
    let journal_bytes =
        bounded("limits.journal_mib", limits.journal_mib, 1 << 20, " (MiB)")?.map(|mib| mib << 20);
    let serve_tools = serve_tools(raw.serve.map(|s| s.tools).unwrap_or_default())?;
    let database_url = database_url(raw.state.and_then(|s| s.database_url))?;
    let engine = raw.engine.unwrap_or_default();
    if engine.guard_bytes.is_some_and(|g| g > 1 << 32) {
        return Err(Bad::invalid(
            "engine.guard_bytes",
            "at most 4294967296 (4 GiB)",
        ));
    }
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let base = if base.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        base
    };
    let executor_dirs = raw
        .executor_dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            absolutize(d, &base, home).map_err(|m| Bad::invalid(format!("executor_dirs[{i}]"), m))
        })
        .collect::<Result<Vec<_>, Bad>>()?;
    if raw.actors.is_empty() {
        return Err(Bad::invalid("actors", "at least one actor must be defined"));
    }
    let actors = raw
        .actors
        .iter()
        .map(|(name, a)| {
            Ok((
                name.clone(),
                actor(name, a, &raw.actors, max_level, &base, home)?,
            ))
        })
        .collect::<Result<BTreeMap<_, _>, Bad>>()?;
    Ok(HostConfig {
        source: Some(path.to_path_buf()),
        level,
        max_level,
        executor_dirs,
        actors,
        on_degraded,
        engine,
        journal_bytes,
        memory_keys,
        http_requests,
        http_response_bytes,
        network,
        providers,
        values,
        approvals,
        serve_tools,
        database_url,
        places: Places::default(),
    })
}

/// `[approvals]`: `elicitation` one of its three words.
fn approvals(raw: RawApprovals, base: &Path) -> Result<ApprovalsConfig, Bad> {
    let elicitation = raw
        .elicitation
        .map(|e| {
            e.parse()
                .map_err(|m| Bad::invalid("approvals.elicitation", m))
        })
        .transpose()?;
    let remember_max_secs = match raw.remember_max.as_deref() {
        None => DEFAULT_REMEMBER_MAX_SECS,
        Some("forever") => {
            return Err(Bad::invalid(
                "approvals.remember_max",
                "`forever` is not a maximum: only `grants add` records a grant without expiry",
            ))
        }
        Some(d) => crate::util::text::duration_secs(d)
            .map_err(|why| Bad::invalid("approvals.remember_max", format!("`{d}`: {why}")))?
            .unsigned_abs(),
    };
    let notify = raw
        .notify
        .map(|n| network::notify(n, base).map_err(|(field, why)| Bad::invalid(field, why)))
        .transpose()?;
    Ok(ApprovalsConfig {
        elicitation,
        people: raw.people,
        remember_max_secs,
        notify,
    })
}

/// The longest value of `[values]`, in bytes.
const MAX_VALUE_BYTES: usize = 64 * 1024;

/// `[values]`: each name one a `config:read` target can name exactly,
/// each value at most [`MAX_VALUE_BYTES`].
fn values(raw: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, Bad> {
    for (name, value) in &raw {
        crate::policy::target::TargetPattern::parse(crate::policy::TargetKind::Exact, name)
            .map_err(|e| Bad::invalid(format!("values.{name}"), e.to_string()))?;
        if value.len() > MAX_VALUE_BYTES {
            return Err(Bad::invalid(
                format!("values.{name}"),
                format!("{} bytes; at most {MAX_VALUE_BYTES}", value.len()),
            ));
        }
    }
    Ok(raw)
}

/// `level` (default `Supervised`) and `max_level`, which the level may
/// not pass.
fn levels(level: Option<&str>, max_level: Option<&str>) -> Result<(Level, Option<Level>), Bad> {
    let level = match level {
        None => Level::Supervised,
        Some(l) => l
            .parse::<Level>()
            .map_err(|e| Bad::Unparsed("level", e.into()))?,
    };
    let max_level = match max_level {
        None => None,
        Some(l) => Some(
            l.parse::<Level>()
                .map_err(|e| Bad::Unparsed("max_level", e.into()))?,
        ),
    };
    if let Some(max) = max_level.filter(|max| level > *max) {
        return Err(Bad::invalid(
            "level",
            format!("`{level}` is above `max_level` `{max}`"),
        ));
    }
    Ok((level, max_level))
}

/// A limit of `[limits]`, between 1 and `max` when given.
fn bounded(field: &str, value: Option<u64>, max: u64, unit: &str) -> Result<Option<u64>, Bad> {
    match value {
        Some(n) if !(1..=max).contains(&n) => {
            Err(Bad::invalid(field, format!("between 1 and {max}{unit}")))
        }
        other => Ok(other),
    }
}

/// `[serve] tools`: gatehouse's own tools, each once.
fn serve_tools(names: Vec<String>) -> Result<Vec<ServeTool>, Bad> {
    let mut out = Vec::new();
    for (i, t) in names.iter().enumerate() {
        let tool = match t.as_str() {
            "history" => ServeTool::History,
            "undo" => ServeTool::Undo,
            other => {
                return Err(Bad::invalid(
                    format!("serve.tools[{i}]"),
                    format!("`{other}` is not a tool gatehouse serves (history, undo)"),
                ))
            }
        };
        if !out.contains(&tool) {
            out.push(tool);
        }
    }
    Ok(out)
}

/// `[state] database_url`: a PostgreSQL URL (its password never in the
/// message).
fn database_url(url: Option<String>) -> Result<Option<String>, Bad> {
    match url {
        Some(url) if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) => {
            Err(Bad::invalid(
                "state.database_url",
                format!(
                    "`{}` is not a postgresql url (`postgres://user@host:port/database`)",
                    crate::util::redact_url(&url)
                ),
            ))
        }
        other => Ok(other),
    }
}

/// `[actors.NAME]`: a valid name, an identity, lists of names without
/// whitespace, defined delegates, no private memory scope, and workspace
/// roots made absolute.
fn actor(
    name: &str,
    a: &RawActor,
    all: &BTreeMap<String, RawActor>,
    max_level: Option<Level>,
    base: &Path,
    home: Option<&Path>,
) -> Result<ActorConfig, Bad> {
    let f = |field: &str| format!("actors.{name}.{field}");
    if !valid_name(name) {
        return Err(Bad::invalid(
            format!("actors.{name}"),
            format!("`{name}` is not a valid actor name (lowercase letters, digits, `-`, `_`)"),
        ));
    }
    let channel = a.channel.clone().unwrap_or_else(|| "cli".into());
    let sender = a.sender.clone().unwrap_or_else(|| name.to_string());
    if channel.is_empty() || sender.is_empty() {
        return Err(Bad::invalid(
            f("channel"),
            "channel and sender must not be empty",
        ));
    }
    if let Some(bad) = actor_entry_problem(name, a, all) {
        return Err(bad);
    }
    let level = match &a.level {
        None => None,
        Some(l) => Some(
            l.parse::<Level>()
                .map_err(|e| Bad::invalid(f("level"), e.to_string()))?,
        ),
    };
    if let (Some(l), Some(max)) = (level, max_level) {
        if l > max {
            return Err(Bad::invalid(
                f("level"),
                format!("`{l}` is above `max_level` `{max}`"),
            ));
        }
    }
    for (i, uid) in a.uids.iter().enumerate() {
        if let Some((other, _)) = all
            .iter()
            .find(|(o, r)| o.as_str() < name && r.uids.contains(uid))
        {
            return Err(Bad::invalid(
                format!("{}[{i}]", f("uids")),
                format!("uid `{uid}` is already actor `{other}`'s: one account is one actor"),
            ));
        }
    }
    let workspaces = match &a.workspaces {
        None => None,
        Some(list) => Some(
            list.iter()
                .enumerate()
                .map(|(i, w)| {
                    absolutize(&w.path, base, home)
                        .map(|p| (p.display().to_string(), w.mode))
                        .map_err(|m| Bad::invalid(format!("{}[{i}].path", f("workspaces")), m))
                })
                .collect::<Result<Vec<_>, Bad>>()?,
        ),
    };
    Ok(ActorConfig {
        identity: Identity::new(channel, sender),
        skills: a.skills.clone(),
        subagents: a.subagents.clone(),
        mcp_servers: a.mcp_servers.clone(),
        delegates_to: a.delegates_to.clone(),
        memory: a.memory.clone(),
        tools: a.tools.clone(),
        workspaces,
        uids: a.uids.clone(),
        level,
    })
}

/// A check of one entry of an actor's list: what is wrong with it, if
/// anything.
type EntryCheck<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The first bad entry of actor `name`'s lists, checked field by field in
/// the table's order.
fn actor_entry_problem(name: &str, a: &RawActor, all: &BTreeMap<String, RawActor>) -> Option<Bad> {
    let plain = |v: &str| {
        (v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()))
            .then(|| format!("`{v}` is empty or contains whitespace"))
    };
    let defined = |t: &str| (!all.contains_key(t)).then(|| format!("`{t}` is not a defined actor"));
    let shared = |s: &str| {
        s.starts_with("private:").then(|| {
            format!("`{s}`: private scopes cannot be granted (each actor has its own implicitly)")
        })
    };
    let checks: [(&str, &[String], EntryCheck<'_>); 8] = [
        ("skills", &a.skills, &plain),
        ("subagents", &a.subagents, &plain),
        ("mcp_servers", &a.mcp_servers, &plain),
        ("delegates_to", &a.delegates_to, &plain),
        ("memory", &a.memory, &plain),
        ("tools", &a.tools, &plain),
        ("delegates_to", &a.delegates_to, &defined),
        ("memory", &a.memory, &shared),
    ];
    for (field, list, check) in checks {
        for (i, v) in list.iter().enumerate() {
            if let Some(why) = check(v) {
                return Some(Bad::invalid(format!("actors.{name}.{field}[{i}]"), why));
            }
        }
    }
    None
}

fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit())
        && name.len() <= 64
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl HostConfig {
    /// The environment variables that hold a credential the host sends
    /// (each `[providers.*] value_env`, and `[approvals] notify`'s): the gate refuses `env:read` on them
    /// (`SECRET_ENV_DENIED`), as it does every `GATEHOUSE_*` variable.
    pub fn secret_env(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .value_sources()
            .filter_map(|v| match v {
                ValueSource::Env(var) => Some(var.clone()),
                ValueSource::File(_) => None,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The files that hold a credential the host sends (each
    /// `[providers.*] value_file`, and `[approvals] notify`'s; absolute): host state, hidden from every executor's
    /// reads and writes, whether or not they exist yet.
    pub fn secret_files(&self) -> impl Iterator<Item = &Path> {
        self.value_sources().filter_map(|v| match v {
            ValueSource::File(path) => Some(path.as_path()),
            ValueSource::Env(_) => None,
        })
    }

    /// Where each credential the host sends comes from: every provider's
    /// value and `[approvals] notify`'s header.
    fn value_sources(&self) -> impl Iterator<Item = &ValueSource> {
        self.providers.iter().map(|p| &p.value).chain(
            self.approvals
                .notify
                .iter()
                .filter_map(|n| n.header.as_ref().map(|(_, _, v)| v)),
        )
    }

    /// Whether the configuration file itself holds a secret: a `[state]
    /// database_url` with a password in it. Such a file is hidden from
    /// every executor's reads, not only protected from writes.
    pub fn holds_secret(&self) -> bool {
        self.database_url
            .as_deref()
            .is_some_and(|url| crate::util::redact_url(url) != url || url.contains("password="))
    }

    /// The configuration used when there is no file: level `Supervised`,
    /// actor `main` with identity (`cli`, `login`), any executor, and the
    /// turn's workspace as its only root.
    pub fn safe_default(login: &str) -> HostConfig {
        let mut actors = BTreeMap::new();
        actors.insert(
            "main".to_string(),
            ActorConfig {
                identity: Identity::new("cli", login),
                skills: vec!["*".into()],
                subagents: vec![],
                mcp_servers: vec![],
                delegates_to: vec![],
                memory: vec![],
                tools: vec![],
                workspaces: None,
                uids: vec![],
                level: None,
            },
        );
        HostConfig {
            source: None,
            level: Level::Supervised,
            max_level: None,
            executor_dirs: vec![],
            actors,
            on_degraded: OnDegraded::default(),
            engine: EngineConfig::default(),
            journal_bytes: None,
            memory_keys: None,
            http_requests: None,
            http_response_bytes: None,
            network: NetworkConfig::default(),
            providers: Vec::new(),
            values: BTreeMap::new(),
            approvals: ApprovalsConfig::default(),
            serve_tools: vec![],
            database_url: None,
            places: Places::default(),
        }
    }

    /// Finds the configuration: `explicit` (`--config`), else
    /// `$GATEHOUSE_CONFIG`, else `gatehouse.toml` in the config directory,
    /// else the safe default. A file named explicitly must exist.
    ///
    /// Whichever applies, the result knows every place (see [`Places`]).
    pub fn discover(explicit: Option<&Path>, env: &HostEnv) -> Result<HostConfig, ConfigError> {
        let mut config = HostConfig::find(explicit, env)?;
        config.places = env.places(explicit);
        Ok(config)
    }

    fn find(explicit: Option<&Path>, env: &HostEnv) -> Result<HostConfig, ConfigError> {
        if let Some(path) = explicit.or(env.config.as_deref()) {
            return HostConfig::load(path, env.home.as_deref());
        }
        if let Some(dir) = env.config_dir() {
            let path = dir.join("gatehouse.toml");
            if path.is_file() {
                return HostConfig::load(&path, env.home.as_deref());
            }
        }
        Ok(HostConfig::safe_default(
            env.login.as_deref().unwrap_or("anonymous"),
        ))
    }

    /// Reads and validates a file.
    pub fn load(path: &Path, home: Option<&Path>) -> Result<HostConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            source: e.into(),
        })?;
        HostConfig::parse(path, &text, home)
    }

    /// Parses and validates `text`; `path` names it in errors and anchors
    /// relative paths.
    pub fn parse(path: &Path, text: &str, home: Option<&Path>) -> Result<HostConfig, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: lower(e.message()) + &line_of(text, e.span()),
        })?;
        validate(path, raw, home).map_err(|bad| bad.at(path))
    }

    /// The actor whose `uids` list `uid`: the one `gatehouse daemon`
    /// serves a connection of that account as.
    pub fn actor_of_uid(&self, uid: u32) -> Option<&str> {
        self.actors
            .iter()
            .find(|(_, a)| a.uids.contains(&uid))
            .map(|(name, _)| name.as_str())
    }

    /// The level actor `name`'s turns run at under `gatehouse daemon`:
    /// its own `level`, else the file's, never above `max_level`.
    pub fn actor_level(&self, name: &str) -> Level {
        let level = self
            .actors
            .get(name)
            .and_then(|a| a.level)
            .unwrap_or(self.level);
        match self.max_level {
            Some(max) if level > max => max,
            _ => level,
        }
    }

    /// The actors as the policy sees them for a turn in `turn_workspace`
    /// (canonical): every workspace root canonicalized, failure being
    /// `PATH_RESOLUTION_FAILED`.
    pub fn policy_actors(
        &self,
        turn_workspace: &str,
    ) -> Result<BTreeMap<String, Actor>, ConfigError> {
        let mut out = BTreeMap::new();
        for (name, a) in &self.actors {
            let workspaces = match &a.workspaces {
                None => vec![WorkspaceRoot {
                    path: turn_workspace.to_string(),
                    mode: WorkspaceMode::ReadWrite,
                }],
                Some(list) => {
                    let mut roots = Vec::new();
                    for (i, (p, mode)) in list.iter().enumerate() {
                        match resolve_path(Path::new(p)) {
                            ResolvedPath::Resolved(path) => {
                                roots.push(WorkspaceRoot { path, mode: *mode })
                            }
                            ResolvedPath::Failed { input, reason } => {
                                return Err(ConfigError::PathResolution {
                                    path: self.source.clone().unwrap_or_default(),
                                    field: format!("actors.{name}.workspaces[{i}].path"),
                                    input,
                                    reason,
                                })
                            }
                        }
                    }
                    roots
                }
            };
            out.insert(
                name.clone(),
                Actor {
                    identity: Some(a.identity.clone()),
                    skills: a.skills.clone(),
                    subagents: a.subagents.clone(),
                    mcp_servers: a.mcp_servers.clone(),
                    delegates_to: a.delegates_to.clone(),
                    memory: a.memory.clone(),
                    tools: a.tools.clone(),
                    workspaces,
                },
            );
        }
        Ok(out)
    }
}

fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(r) => {
            let line = text[..r.start.min(text.len())].matches('\n').count() + 1;
            format!(" (line {line})")
        }
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<HostConfig, ConfigError> {
        HostConfig::parse(
            Path::new("/etc/g/gatehouse.toml"),
            text,
            Some(Path::new("/home/a")),
        )
    }

    #[test]
    fn a_full_config_parses() {
        let c = parse(
            r#"
level = "Full"
executor_dirs = ["execs", "~/more"]
[actors.main]
channel = "cli"
sender = "alice"
skills = ["hello"]
delegates_to = ["worker"]
memory = ["team"]
tools = ["ls"]
workspaces = [{ path = "/tmp", mode = "read-only" }]
[actors.worker]
"#,
        )
        .unwrap();
        assert_eq!(c.level, Level::Full);
        assert_eq!(
            c.executor_dirs,
            vec![PathBuf::from("/etc/g/execs"), PathBuf::from("/home/a/more")]
        );
        assert_eq!(c.actors["main"].identity, Identity::new("cli", "alice"));
        assert_eq!(c.actors["worker"].identity, Identity::new("cli", "worker"));
        assert_eq!(
            c.actors["main"].workspaces,
            Some(vec![("/tmp".to_string(), WorkspaceMode::ReadOnly)])
        );
    }

    #[test]
    fn daemon_fields_parse_and_bad_ones_are_named() {
        let c = parse(
            "max_level = \"Supervised\"\n[actors.a]\nuids = [1001]\nlevel = \"ReadOnly\"\n[actors.b]\nuids = [1002]\n\
             [approvals]\nnotify = { url = \"https://hooks.example/x\", value_file = \"hook.token\" }\n",
        )
        .unwrap();
        assert_eq!(c.actor_of_uid(1002), Some("b"));
        assert_eq!(c.actor_of_uid(1003), None);
        assert_eq!(c.actor_level("a"), Level::ReadOnly);
        assert_eq!(c.actor_level("b"), Level::Supervised);
        let notify = c.approvals.notify.clone().unwrap();
        assert_eq!(
            notify.header,
            Some((
                "Authorization".to_string(),
                "Bearer {value}".to_string(),
                ValueSource::File(PathBuf::from("/etc/g/hook.token"))
            ))
        );
        assert_eq!(
            c.secret_files().collect::<Vec<_>>(),
            [Path::new("/etc/g/hook.token")]
        );
        let bad = |text: &str| parse(text).unwrap_err().to_string();
        assert_eq!(
            bad("max_level = \"Supervised\"\n[actors.a]\nlevel = \"Full\"\n"),
            "`/etc/g/gatehouse.toml`: field `actors.a.level`: `Full` is above `max_level` `Supervised`"
        );
        assert_eq!(
            bad("[actors.a]\n[approvals]\nnotify = { url = \"http://hooks.example/x\" }\n"),
            "`/etc/g/gatehouse.toml`: field `approvals.notify.url`: `http://hooks.example/x` is not an https url (plain http only to a loopback address)"
        );
        assert_eq!(
            bad("[actors.a]\n[approvals]\nnotify = { url = \"https://h.example/\", header = \"X-T\" }\n"),
            "`/etc/g/gatehouse.toml`: field `approvals.notify.value_env`: a header needs exactly one of `value_env` and `value_file`"
        );
        assert!(
            parse("[actors.a]\n[approvals]\nnotify = { url = \"http://127.0.0.1:9/x\" }\n").is_ok()
        );
    }

    #[test]
    fn bad_input_names_the_field() {
        let e = parse("[actors.main]\nskils = []\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("`/etc/g/gatehouse.toml` is not valid toml: unknown field `skils`"),
            "{e}"
        );
        let e = parse("level = \"Max\"\n[actors.main]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "`/etc/g/gatehouse.toml`: field `level`: unknown level `Max` (expected `ReadOnly`, `Supervised` or `Full`)");
        let e = parse("[actors.main]\ndelegates_to = [\"ghost\"]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "`/etc/g/gatehouse.toml`: field `actors.main.delegates_to[0]`: `ghost` is not a defined actor");
        let e = parse("[actors.main]\nworkspaces = [{ path = \"/x\", mode = \"rw\" }]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `rw`"), "{e}");
        let e = parse("this is = not toml").unwrap_err();
        assert!(matches!(e, ConfigError::Parse { .. }));
        assert!(e.is_invalid_input());
    }

    #[test]
    fn isolation_and_engine_tables() {
        let c = parse("[actors.main]\n").unwrap();
        assert_eq!(c.on_degraded, OnDegraded::Warn);
        assert_eq!(c.engine, EngineConfig::default());
        let c = parse(
            "[actors.main]\n[isolation]\non_degraded = \"refuse-critical\"\n[engine]\nsignals_based_traps = false\nguard_bytes = 0\n",
        )
        .unwrap();
        assert_eq!(c.on_degraded, OnDegraded::RefuseCritical);
        assert_eq!(
            c.engine,
            EngineConfig {
                signals_based_traps: Some(false),
                guard_bytes: Some(0)
            }
        );
        let e = parse("[actors.main]\n[isolation]\non_degraded = \"refuse\"\n")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "`/etc/g/gatehouse.toml`: field `isolation.on_degraded`: unknown value `refuse` (expected `warn`, `refuse-critical` or `refuse-all`)");
        let e = parse("[actors.main]\n[engine]\nguard_bytes = 8589934592\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("field `engine.guard_bytes`"), "{e}");
        let e = parse("[actors.main]\n[engine]\nguards = 0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `guards`"), "{e}");
    }

    #[test]
    fn the_limits_table() {
        let c = parse("[actors.main]\n").unwrap();
        assert_eq!(c.journal_bytes, None);
        let c = parse("[actors.main]\n[limits]\njournal_mib = 3\n").unwrap();
        assert_eq!(c.journal_bytes, Some(3 << 20));
        let e = parse("[actors.main]\n[limits]\njournal_mib = 0\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "`/etc/g/gatehouse.toml`: field `limits.journal_mib`: between 1 and 1048576 (MiB)"
        );
        let e = parse("[actors.main]\n[limits]\njournal = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `journal`"), "{e}");
    }

    #[test]
    fn the_serve_table() {
        assert!(parse("[actors.main]\n").unwrap().serve_tools.is_empty());
        let c =
            parse("[actors.main]\n[serve]\ntools = [\"undo\", \"history\", \"undo\"]\n").unwrap();
        assert_eq!(c.serve_tools, vec![ServeTool::Undo, ServeTool::History]);
        let e = parse("[actors.main]\n[serve]\ntools = [\"history\", \"grants\"]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "`/etc/g/gatehouse.toml`: field `serve.tools[1]`: `grants` is not a tool gatehouse serves (history, undo)"
        );
    }

    #[test]
    fn unresolvable_roots_fail_with_the_code() {
        let c = parse(
            "[actors.main]\nworkspaces = [{ path = \"/no/such/dir/x\", mode = \"read-only\" }]\n",
        )
        .unwrap();
        let e = c.policy_actors("/tmp").unwrap_err().to_string();
        assert!(e.starts_with("PATH_RESOLUTION_FAILED: "), "{e}");
        assert!(e.contains("`actors.main.workspaces[0].path`"), "{e}");
    }

    #[test]
    fn the_safe_default() {
        let c = HostConfig::safe_default("alice");
        assert_eq!(c.level, Level::Supervised);
        let actors = c.policy_actors("/w").unwrap();
        assert_eq!(
            actors["main"].workspaces,
            vec![WorkspaceRoot {
                path: "/w".into(),
                mode: WorkspaceMode::ReadWrite
            }]
        );
        assert_eq!(actors["main"].identity, Some(Identity::new("cli", "alice")));
    }
}
