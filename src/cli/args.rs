//! Raw flags, exactly as clap parses them. Nothing is resolved here.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const EXIT_CODES: &str = "\
Exit codes:
  0  ok / allowed
  1  error (i/o, database, a failing or skipped test case)
  2  denied (the answer carries a deny code)
  3  invalid input (unknown level or capability, malformed glob, bad file)
  4  approval required

Environment:
  GATEHOUSE_CONFIG        configuration file when --config is not given (else gatehouse.toml in
                          $XDG_CONFIG_HOME/gatehouse or ~/.config/gatehouse, else a safe default)
  GATEHOUSE_STATE_DIR     state directory (default $XDG_STATE_HOME/gatehouse, else
                          ~/.local/state/gatehouse)
  GATEHOUSE_GRANTS_DB     grants database (default <state>/grants.db)
  GATEHOUSE_HISTORY_DIR   turn history (default <state>/history)
  GATEHOUSE_DATABASE_URL  a fleet's PostgreSQL, which then holds the shared state (overrides
                          [state] database_url)
  GATEHOUSE_NODE          this host's name in a fleet's history index (default: the host name)
  GATEHOUSE_LOG           log through tracing to stderr at this level (error, warn, info,
                          debug, trace, off; else RUST_LOG; default: warn)";

/// Run executors as WebAssembly components in a sandbox built from a
/// deny-by-default policy.
#[derive(Debug, Parser)]
#[command(name = "gatehouse", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// Configuration file (overrides GATEHOUSE_CONFIG).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// State directory (overrides GATEHOUSE_STATE_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Print data as JSON (lists are always JSON Lines).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// Only the cases whose name contains PATTERN (such as `fs.` or `.p1`).
    #[arg(long, value_name = "PATTERN")]
    pub only: Option<String>,
    /// The guests' directory (the source tree's `guests/target`) instead
    /// of those embedded in this binary.
    #[arg(long, value_name = "DIR")]
    pub guests: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The capability registry, the autonomy matrix, checks and deny codes.
    #[command(subcommand)]
    Policy(PolicyCmd),
    /// The grant store: remembered approvals, per identity and target.
    #[command(subcommand)]
    Grants(GrantsCmd),
    /// Executor manifests (`executor.toml`).
    #[command(subcommand)]
    Manifest(ManifestCmd),
    /// The frozen policy of a turn (`policy.json`) and its two hashes.
    #[command(subcommand)]
    Snapshot(SnapshotCmd),
    /// The deny-path suite: every deny code, exact, for the configured
    /// actors, each case asked of the policy and of the host (exit 0 only
    /// when every case of each actor passes; a skip fails the run unless
    /// --allow-skips).
    Test(TestArgs),
    /// Per-actor commands: `agent test ACTOR --tier 3` is `test --tier 3
    /// --actor ACTOR`.
    #[command(subcommand)]
    Agent(AgentCmd),
    /// Run an executor as one turn: gate, approval, sandbox, result.
    #[command(after_help = RUN_AFTER_HELP)]
    Run(RunArgs),
    /// How well this host isolates, layer by layer: the degraded-mode
    /// report of the configured engine (`--json`: the document).
    Isolation,
    /// Create the state databases (grants, approvals, memory, audit) that are
    /// missing, or with a database URL a fleet's PostgreSQL schema, and
    /// bring each to the schema version this build knows; a line per
    /// database with its version (`--json`: JSON Lines). A database of a
    /// later version is refused (exit 1), and so is a host started on one.
    Migrate,
    /// Proof, on this host, that the sandbox holds and is correct: every
    /// attack of the catalogue and every must-succeed program, each with
    /// its one expected outcome (exit 0 only when nothing is broken,
    /// incorrect or an error).
    Conformance(ConformanceArgs),
    /// List turns (JSON Lines with --json), or one turn's audit log;
    /// `history prune` removes old ones.
    History(HistoryArgs),
    /// Reverse a turn's journaled operations (the last turn by default).
    Undo(UndoArgs),
    /// A component's (or preview 1 module's) imports and exports, and for
    /// each import the capability it needs, or "baseline".
    Inspect {
        /// The `.wasm` file.
        component: PathBuf,
    },
    /// Print the `gatehouse:executor` WIT package, or write it with its WASI
    /// dependencies (`DIR/executor.wit`, `DIR/deps/*.wit`) for wit-bindgen,
    /// wasm-tools, componentize-py or jco.
    Wit(WitArgs),
    /// Write a new executor that builds and runs as it is: a Rust crate
    /// (Cargo.toml with a pinned wit-bindgen, Cargo.lock, src/lib.rs with
    /// `run`, or src/main.rs with --command), or with --lang a Python or
    /// JavaScript module and its build script; the WIT under wit/,
    /// executor.toml with compute:pure, a README.
    New(NewArgs),
    /// The pending-approval queue: approvals asked where no one could
    /// answer (`run` without a terminal, an MCP client without
    /// elicitation), answered here by the person.
    Approvals(ApprovalsArgs),
    /// Serve the executors the actor may run as MCP tools to an agent
    /// runtime, over stdio (nothing but JSON-RPC on stdout, logs on
    /// stderr). Approvals are asked of the person by elicitation when the
    /// client supports it, else queued (`gatehouse approvals`).
    #[command(after_help = SERVE_AFTER_HELP)]
    Serve(ServeArgs),
    /// Serve many agents over MCP on a UNIX socket, each as the actor its
    /// OS account maps to (`[actors.NAME] uids`), from one long-lived host
    /// run under an account of its own; approvals are answered over the
    /// socket by a person's account (`[approvals] people`).
    #[command(after_help = DAEMON_AFTER_HELP)]
    Daemon(DaemonArgs),
    /// Relay an MCP session on stdio to `gatehouse daemon`: what an agent
    /// runtime starts as its stdio MCP server. It may narrow its actor's
    /// workspace and level, never widen them (exit 3 before any MCP
    /// traffic); an account the daemon does not serve is refused (exit 2).
    Connect(ConnectArgs),
    /// Walk through the gate end to end on a temporary state directory and
    /// workspace: an allowed, a denied and an approval-required request, a
    /// remembered grant, a refused grant, and the tier-3 suite.
    Demo,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCmd {
    /// Print the closed capability registry (JSON Lines).
    Registry,
    /// Print the autonomy × capability matrix: the outcome of every capability at every level (JSON Lines).
    Table,
    /// Combine the matrix with grants for one capability; exit 0 allowed, 2 denied, 4 approval required.
    Check(CheckArgs),
    /// Print every deny code with its meaning (JSON Lines).
    Codes,
    /// Decide one request given as JSON against the configured actors.
    Decide(DecideArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// ReadOnly, Supervised or Full.
    pub level: String,
    /// A capability name from the registry, e.g. fs:write.
    pub capability: String,
    /// The concrete target (a path, host[:port] or name).
    #[arg(long)]
    pub target: Option<String>,
    /// The identity's channel (with --sender: look up grants).
    #[arg(long, requires = "sender")]
    pub channel: Option<String>,
    /// The identity's sender id (with --channel).
    #[arg(long, requires = "channel")]
    pub sender: Option<String>,
}

#[derive(Debug, Args)]
pub struct DecideArgs {
    /// The request, e.g. '{"kind":"skill","actor":"main","skill":"hello"}'.
    pub request: String,
    /// The turn's workspace (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Decide at this level instead of the configured one.
    #[arg(long)]
    pub level: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum GrantsCmd {
    /// Record a grant. Refused for unknown capabilities, always-class ones
    /// (code:exec, system:admin), ones that take no target, and targets of
    /// the wrong kind.
    Add(GrantAddArgs),
    /// List grants (JSON Lines); active ones unless --all.
    List {
        /// Include revoked and expired grants.
        #[arg(long)]
        all: bool,
    },
    /// Revoke a grant: by id (`grants revoke 3`), or by what it grants
    /// (`grants revoke --channel cli --sender alice fs:write '/tmp/x/**'`,
    /// the target resolved as `grants add` resolves it).
    Revoke(GrantRevokeArgs),
}

#[derive(Debug, Args)]
pub struct GrantRevokeArgs {
    /// The identity's channel (with --sender, CAPABILITY and TARGET).
    #[arg(long, requires = "sender")]
    pub channel: Option<String>,
    /// The identity's sender id (with --channel).
    #[arg(long, requires = "channel")]
    pub sender: Option<String>,
    /// The grant's id (from `grants list`); or, with --channel and
    /// --sender, the capability followed by the target.
    #[arg(required = true, num_args = 1..=2)]
    pub what: Vec<String>,
}

#[derive(Debug, Args)]
pub struct GrantAddArgs {
    /// The identity's channel, e.g. cli.
    #[arg(long)]
    pub channel: String,
    /// The identity's sender id, e.g. alice.
    #[arg(long)]
    pub sender: String,
    /// The capability, e.g. fs:write.
    pub capability: String,
    /// The target pattern: an absolute path glob, host[:port] or exact name.
    pub target: String,
    /// Expire after a duration (30s, 10m, 2h, 7d).
    #[arg(long, conflicts_with = "expires_at")]
    pub expires_in: Option<String>,
    /// Expire at a UTC time (YYYY-MM-DDTHH:MM:SSZ).
    #[arg(long)]
    pub expires_at: Option<String>,
    /// Who granted it (default: the login name).
    #[arg(long)]
    pub granted_by: Option<String>,
}

#[derive(Debug, Args)]
pub struct WitArgs {
    /// Write the package and its dependencies beneath DIR instead of
    /// printing `executor.wit`.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print the interfaces a guest may import as a Markdown table: what
    /// each does and which capability links it.
    #[arg(long, conflicts_with = "out")]
    pub table: bool,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The executor's and crate's name: `[a-z][a-z0-9_-]{0,63}`.
    pub name: String,
    /// A command (`fn main`: stdin, arguments, stdout) instead of a
    /// component exporting `run`.
    #[arg(long)]
    pub command: bool,
    /// An executor that calls a web API through `wasi:http` (the `wasi`
    /// crate): one GET of the input's `url`, under a `network:sites` URL
    /// pattern with `methods = ["GET"]` in its executor.toml. The host
    /// decides every request, does the TLS, and adds an API key
    /// (`provider:access`) the guest never sees.
    #[arg(long, conflicts_with = "command")]
    pub http: bool,
    /// The language: `rust` (a cargo crate, the default), `python` (an
    /// `app.py` and a `build.sh` that builds it with componentize-py, both
    /// toolchains pinned and installed on first use) or `js` (an `app.js`
    /// and a `build.mjs` that builds it with ComponentizeJS, its packages
    /// pinned by `package-lock.json`). `--command` and `--http` are Rust
    /// templates.
    #[arg(long, value_enum, default_value = "rust", value_name = "LANG")]
    pub lang: Lang,
    /// Where to write it (default: `./NAME`); must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// The language of `gatehouse new`'s template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A Rust crate built with cargo for `wasm32-wasip2`.
    Rust,
    /// A Python module built with componentize-py.
    Python,
    /// A JavaScript module built with ComponentizeJS.
    Js,
}

#[derive(Debug, Subcommand)]
pub enum ManifestCmd {
    /// Validate a manifest, verify the component's sha256 if it is pinned
    /// (DIGEST_MISMATCH: exit 2), and check the component's imports
    /// against the declared capabilities: exit 2 when an import is not
    /// covered (the run would be refused with IMPORT_NOT_GRANTED), 3 for an
    /// invalid manifest or a missing component, 0 otherwise (warnings
    /// included). Explains each declared capability.
    ///
    /// Warns when the component is neither pinned (`sha256`) nor outside
    /// every write root of the configured actors (an actor without
    /// `workspaces` writes the turn's workspace: `--workspace`, default
    /// the current directory): an executor allowed to write there could
    /// replace it.
    Check {
        /// Path to executor.toml.
        path: PathBuf,
        /// The turn's workspace the warning assumes (default: the current
        /// directory).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Print the JSON Schema of executor.toml, generated from the manifest
    /// types, for editors.
    Schema,
}

#[derive(Debug, Args)]
pub struct SnapshotSources {
    /// The turn's workspace (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Freeze at this level instead of the configured one.
    #[arg(long)]
    pub level: Option<String>,
    /// An executor manifest to include besides those in the executor directories.
    #[arg(long = "executor", value_name = "MANIFEST")]
    pub executors: Vec<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum SnapshotCmd {
    /// Freeze actors, executors, level, grants in force and roots into a file.
    Prepare {
        /// Where to write (default: policy.json).
        #[arg(long, default_value = "policy.json")]
        out: PathBuf,
        #[command(flatten)]
        sources: SnapshotSources,
    },
    /// Recompute the snapshot from its sources and compare byte for byte
    /// (SNAPSHOT_MISMATCH: exit 2).
    Verify {
        /// The snapshot file (default: policy.json).
        #[arg(default_value = "policy.json")]
        file: PathBuf,
        #[command(flatten)]
        sources: SnapshotSources,
    },
}

#[derive(Debug, Args)]
pub struct TestArgs {
    /// The test tier; tier 3 is the deny-path suite (the only one).
    #[arg(long)]
    pub tier: u8,
    /// Only this actor.
    #[arg(long)]
    pub actor: Option<String>,
    #[command(flatten)]
    pub common: TestCommon,
}

/// What `test` and `agent test` share.
#[derive(Debug, Args)]
pub struct TestCommon {
    /// The turn's workspace (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Let skipped cases pass: by default a case that cannot run (the
    /// turn's workspace is `/`, so no root lies outside it) fails the run
    /// (exit 1), as a failing case does.
    #[arg(long)]
    pub allow_skips: bool,
}

#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// The test suite of one actor: `agent test ACTOR --tier 3` is `test
    /// --tier 3 --actor ACTOR`.
    Test {
        /// The configured actor.
        actor: String,
        /// The test tier; tier 3 is the deny-path suite (the only one).
        #[arg(long)]
        tier: u8,
        #[command(flatten)]
        common: TestCommon,
    },
}

/// How `gatehouse run` exits and what it prints.
pub const RUN_AFTER_HELP: &str = "\
Output:
  A command (a `wasi:cli/command` component, a preview 1 module, or a host command)
  reads its stdin (gatehouse's own stdin, streamed, unless --input is given) and
  writes straight to gatehouse's stdout and stderr, unmodified, as `wasmtime run`
  would. A component with `run` gets --input (default `{}`) and its report is
  printed. Whatever gatehouse itself says goes to stderr (the decisions,
  isolation and limits with --verbose); --json prints exactly one JSON line on
  stdout instead (the guest's stdout and stderr in `run.stdout` / `run.stderr`,
  also on failure), with `ran`, `exit_code` and `guest_exit_code`.

Files:
  A guest sees only the directories its fs:read / fs:write grants preopen, each
  named by its capability's `mount` (`mount = \"/data\"`, as `wasmtime run --dir
  HOST::/data`), or without one by its place in the workspace (`.`, `data`).

Exit codes:
  Before guest code starts, gatehouse's own (stderr has one line
  `gatehouse: CODE: reason`):
    1  error   2  denied   3  invalid input   4  approval required   130  interrupted
  Once guest code started, the guest's own, as `wasmtime run` exits:
    proc_exit(N) / exit-with-code(N)  N
    exit(ok), `run` returning ok       0
    a failure status, `run` error      1
    a trap or any LIMIT_*              134
    Ctrl-C (TURN_CANCELLED)            130
  A guest's own 1 to 4 look like gatehouse's: --json tells them apart (`ran`,
  `guest_exit_code`).

Examples:
  gatehouse run prog.wasm -- a b            a bare module or component: compute:pure only
  gatehouse run guests/cli-echo/executor.toml < in.txt | wc -c";

#[derive(Debug, Args)]
pub struct RunArgs {
    /// A manifest path (`guests/hello/executor.toml`), an executor name
    /// found in the configured executor directories, or a bare `.wasm`
    /// file (run with `compute:pure` only).
    pub executor: String,
    /// Arguments for a command (after `--`): its argv after argv[0], which
    /// is the executor's name. Recorded in the turn's audit.
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<String>,
    /// The input: `run`'s argument (default `{}`), or a command's whole
    /// stdin (default: gatehouse's own stdin, streamed).
    #[arg(long)]
    pub input: Option<String>,
    /// The asking actor.
    #[arg(long, default_value = "main")]
    pub actor: String,
    /// Decide at this level instead of the configured one.
    #[arg(long)]
    pub level: Option<String>,
    /// The turn's workspace (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Another executor's manifest this turn may delegate to (repeatable;
    /// the executor directories are searched too).
    #[arg(long = "with", value_name = "MANIFEST")]
    pub with: Vec<PathBuf>,
    /// Linear-memory cap in MiB (default 64).
    #[arg(long, default_value_t = 64)]
    pub memory_mib: usize,
    /// Wall-clock deadline in milliseconds (default 5000).
    #[arg(long, default_value_t = 5000)]
    pub deadline_ms: u64,
    /// Cap on stdout and on stderr, each, in KiB (default 1024 for output
    /// kept in the report; a command's output copied through is uncapped
    /// unless this is given).
    #[arg(long)]
    pub output_kib: Option<usize>,
    /// Hostcall fuel: how many calls into the host the guest may make
    /// (default 1000000).
    #[arg(long, default_value_t = 1_000_000)]
    pub hostcalls: u64,
    /// While the isolation report is degraded: warn (run, report
    /// attached), refuse-critical (refuse a turn needing fs:write,
    /// memory:write, code:exec or system:admin) or refuse-all, with
    /// ISOLATION_DEGRADED (overrides `[isolation] on_degraded`).
    #[arg(long, value_name = "MODE")]
    pub on_degraded: Option<String>,
    /// Print the decisions, isolation, limits and what was linked to
    /// stderr (escaped), also for a command.
    #[arg(long, short)]
    pub verbose: bool,
    /// Run only under this snapshot (`gatehouse snapshot prepare`): the
    /// sources must rebuild it byte for byte (SNAPSHOT_MISMATCH, exit 2
    /// otherwise), and the turn may use only the grants it records (a
    /// revoke or an expiry since still applies).
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct HistoryArgs {
    #[command(subcommand)]
    pub action: Option<HistoryCmd>,
    /// Only this turn.
    #[arg(long)]
    pub turn: Option<String>,
    /// With --turn: print its audit log (every decision and approval
    /// choice), from its history directory or, for a turn that mutated
    /// nothing, from `<state>/audit.jsonl`.
    #[arg(long, requires = "turn")]
    pub decisions: bool,
    /// Print the requests that ended before any guest code ran
    /// (`<state>/denials.jsonl`), one JSON line each; with --turn, only
    /// that turn's.
    #[arg(long, conflicts_with = "decisions")]
    pub denials: bool,
}

#[derive(Debug, Subcommand)]
pub enum HistoryCmd {
    /// Remove the turns, audit and denial records, and audit chain records
    /// older than --older-than.
    ///
    /// Removes the turns (their directories: journal, backups, decisions),
    /// audit records and denial records that started before now minus
    /// --older-than, and the audit chain's records before the first one
    /// recorded since (the last removed is kept as the chain's checkpoint,
    /// so `history verify` still passes; a part of the chain that does not
    /// verify is never removed, and then nothing is). A pruned turn can no
    /// longer be undone. Safe while servers run: the logs are never
    /// rewritten, their old records are freed in place (a filesystem that
    /// cannot punch holes keeps them, and the report says so).
    Prune {
        /// The age past which records go: a number and `s`, `m`, `h` or
        /// `d` (`30d`).
        #[arg(long, value_name = "AGE")]
        older_than: String,
        /// Count what would go; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Check the audit chain (`<state>/audit-chain.jsonl`): exit 0 when whole, 2
    /// naming the first record edited, deleted, inserted or reordered.
    ///
    /// The chain holds every turn's audit record and every denial record,
    /// each with the hash of the one before it. Verify recomputes every hash from the first record (or from
    /// the checkpoint a prune kept) and checks that each record hashes as
    /// its own fields, carries the next number and links to the record
    /// before it. Exit 0 when the chain is whole (the count, the range and
    /// the head hash are printed: note the head to check later that
    /// nothing up to it was rewritten or dropped); exit 2 naming the first
    /// record that was edited, deleted, inserted or reordered. It proves
    /// nothing against someone who can write the file and recomputes every
    /// hash after the record they change.
    Verify,
}

#[derive(Debug, Args)]
pub struct UndoArgs {
    /// The turn to undo (default: the newest that journaled operations).
    #[arg(long)]
    pub turn: Option<String>,
    /// Say what would be done, change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Answer the queue of the `gatehouse daemon` listening on this
    /// socket instead of this state directory's: the daemon checks who
    /// asks from the socket's peer credentials (a person's account of
    /// `[approvals] people`, never an account of the actor whose turn
    /// waits), so a listed person answers without a terminal.
    #[arg(long, global = true, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    #[command(subcommand)]
    pub cmd: ApprovalsCmd,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCmd {
    /// List the pending approvals not yet expired (JSON Lines); answered
    /// ones wait for their turn, consumed ones only with --all.
    List {
        /// Include entries already consumed by a turn.
        #[arg(long)]
        all: bool,
    },
    /// Allow a pending approval: once, for the first turn that matches it
    /// exactly (same actor and identity, executor digest, capabilities and
    /// canonical targets, input and arguments, configuration and grants),
    /// or with --remember as grants for the identity. Confirmed on
    /// /dev/tty; without a terminal only --yes from another OS account
    /// than the one that queued it answers.
    Allow {
        /// The pending approval's id (from `approvals list`, or the
        /// `APPROVAL_REQUIRED` message).
        id: String,
        /// Record a grant per item instead (refused for an always-class
        /// capability: code:exec, system:admin).
        #[arg(long)]
        remember: bool,
        /// With --remember: the grants expire after this long (30s, 10m,
        /// 2h, 7d, or `forever`: as long as `[approvals] remember_max`
        /// allows, 7d by default); default: 24h. Only `grants add` records
        /// a grant without expiry.
        #[arg(long, requires = "remember", value_name = "DURATION")]
        expires_in: Option<String>,
        /// Answer without a terminal: honoured only when this runs as
        /// another OS account than the one that queued the entry (an
        /// agent cannot approve its own request); otherwise the answer is
        /// confirmed on the terminal.
        #[arg(long)]
        yes: bool,
    },
    /// Deny a pending approval: the first turn that matches it ends with
    /// APPROVAL_REFUSED.
    Deny {
        /// The pending approval's id.
        id: String,
        /// As for `allow`: honoured only from another OS account.
        #[arg(long)]
        yes: bool,
    },
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The UNIX socket to listen on (made with mode 0666: the uid map
    /// admits a caller). A stale socket there is replaced; a live one,
    /// or anything that is not a socket, is refused.
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// How long an elicitation waits for an answer, where `[approvals]
    /// elicitation` lets a client answer, before the approval is queued.
    #[arg(long, value_name = "DURATION", default_value = "2m")]
    pub elicitation_timeout: String,
    /// Wall-clock deadline of every call in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub deadline_ms: u64,
    /// How many calls of one actor (in one workspace, at one level) run
    /// at once (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Also serve streamable HTTP on this loopback address
    /// (127.0.0.1:PORT; port 0 picks one, logged on stderr) at `/mcp`:
    /// HTTP has no peer credentials, so each actor with `uids` is known
    /// by its own bearer token, `<state>/daemon-tokens/NAME.token` (made
    /// with mode 0600 at start), at its default workspace and level. Any
    /// other address is refused (exit 3).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
}

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The daemon's socket.
    #[arg(long, value_name = "PATH")]
    pub socket: PathBuf,
    /// Run in this workspace: one of the actor's workspace roots or a
    /// directory under one (default: its first root).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Run at this level, at most the actor's (default: the actor's).
    #[arg(long)]
    pub level: Option<String>,
}

/// How a person deploys `gatehouse daemon`.
pub const DAEMON_AFTER_HELP: &str = "\
Who is who:
  A connection's account (the socket's peer uid, not anything the client
  says) is the actor whose `[actors.NAME] uids` lists it; any other account
  is refused with CALLER_NOT_MAPPED. The actor's workspaces (its first root
  by default), level (its `level`, else the file's, never above `max_level`)
  and executors come from the configuration; `gatehouse connect` may narrow
  the workspace and the level, never widen them.

Approvals:
  An MCP client's answer counts only where `[approvals] elicitation` says
  so (default here: off). A call that needs approval ends with
  APPROVAL_REQUIRED and a pending id; a person answers it with
  `gatehouse approvals --socket PATH allow ID --yes` from an account of
  `[approvals] people` (default: the daemon's own). An account of the
  actor whose turn waits never answers (ANSWER_BY_ITS_ACTOR).

Ending:
  SIGTERM or SIGINT stops taking connections, cancels running calls (each
  ends within its deadline, journals finished, audit written) and removes
  the socket.

Example (an agent runtime's MCP configuration, the agent's account mapped):
  {\"mcpServers\": {\"gatehouse\": {\"command\": \"gatehouse\",
     \"args\": [\"connect\", \"--socket\", \"/run/gatehouse/mcp.sock\"]}}}";

/// How an agent runtime starts `gatehouse serve`.
pub const SERVE_AFTER_HELP: &str = "\
Identity:
  Every call runs as --actor (default main) with the configuration's level,
  the grants of that actor's identity and --workspace (default: the current
  directory). Nothing in a call (its arguments, the client's info) can change
  them; the server offers no tool that changes grants, configuration or
  approvals.

Approvals:
  A call that needs approval asks the person through MCP elicitation (allow
  once / allow and remember / deny), once per call, when the client supports
  it; otherwise, or when no one answers within --elicitation-timeout, it ends
  with APPROVAL_REQUIRED and a pending id, which the person answers with
  `gatehouse approvals allow ID` before the agent retries the same call.

History and undo:
  Not offered unless gatehouse.toml says `[serve] tools = [\"history\",
  \"undo\"]`: then `gatehouse_history` and `gatehouse_undo` see the serving
  actor's own turns only. `gatehouse history prune --older-than 30d` keeps
  the state from growing (safe while servers run).

Ending:
  stdin EOF or SIGTERM ends the session: in-flight calls get a few seconds
  to finish, then are cancelled (journals finished, audit written). Over
  HTTP, a session's DELETE cancels its running calls at once.

HTTP (--listen 127.0.0.1:PORT):
  Streamable HTTP at http://127.0.0.1:PORT/mcp. Every request carries
  `Authorization: Bearer $(cat <state>/serve.token)` unless --no-auth; a
  request whose Origin is not a loopback origin is refused (403).

Example (an agent runtime's MCP configuration):
  {\"mcpServers\": {\"gatehouse\": {\"command\": \"gatehouse\",
     \"args\": [\"serve\", \"--mcp\", \"--actor\", \"main\", \"--workspace\", \"/home/me/project\"]}}}";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Speak the Model Context Protocol (the only protocol served).
    #[arg(long, required = true)]
    pub mcp: bool,
    /// The actor every call runs as.
    #[arg(long, default_value = "main")]
    pub actor: String,
    /// The workspace of every call (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Decide at this level instead of the configured one.
    #[arg(long)]
    pub level: Option<String>,
    /// An executor's manifest to serve besides those in the executor
    /// directories (repeatable).
    #[arg(long = "executor", value_name = "MANIFEST")]
    pub executors: Vec<PathBuf>,
    /// How long an elicitation waits for the person before the approval
    /// is queued (30s, 10m).
    #[arg(long, value_name = "DURATION", default_value = "2m")]
    pub elicitation_timeout: String,
    /// Wall-clock deadline of every call in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub deadline_ms: u64,
    /// How many calls run at once (default: the number of cores). A call
    /// the policy denies takes no slot.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Serve streamable HTTP on this loopback address (127.0.0.1:PORT;
    /// port 0 picks one, logged on stderr) at `/mcp` instead of stdio.
    /// Any other address is refused (exit 3).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// Start only from this snapshot (`gatehouse snapshot prepare`): the
    /// configuration, executors, level, grants in force and workspace
    /// must rebuild it byte for byte (SNAPSHOT_MISMATCH, exit 2
    /// otherwise). The session then uses only the grants it records (a
    /// grant added meanwhile is not used; a revoke or expiry applies), and
    /// elicitation offers only allow once and deny.
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// With --listen: accept requests without the bearer token of
    /// `<state>/serve.token` (created with mode 0600 on first use).
    #[arg(long, requires = "listen")]
    pub no_auth: bool,
}
