//! Runs the cases through the host, as `gatehouse run` does, in a
//! temporary state and configuration directory.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::config::{HostConfig, StatePaths};
use crate::host::{
    isolation_report, Choice, EngineKind, GuestResult, Host, HostOptions, IsolationReport, Limits,
    NoOne, RunIo, Scripted, StdinFrom, TurnEnd, TurnOutcome, TurnRequest,
};
use crate::manifest::{CapabilityFields, Manifest, ManifestFields};
use crate::policy::{DenyCode, Level};

use super::server::HttpServers;
use super::{classify, Case, GuestSet, Half, Observed, Special, Verdict, World};

/// What the suite is run with.
pub struct Options {
    /// The operator's configuration: only its `[engine]` and
    /// `[isolation]` settings are used (never its actors, grants, level
    /// or executor directories).
    pub config: HostConfig,
    /// Only the cases whose name contains this.
    pub only: Option<String>,
    /// The guest files the cases run (embedded, or from `--guests DIR`).
    pub guests: GuestSet,
}

/// Why the suite could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The temporary state and configuration directory could not be made.
    #[error("cannot make the temporary directory `{path}`")]
    TempDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The host the cases run in could not be opened.
    #[error("cannot start the engine")]
    Engine(#[source] crate::host::HostError),
    /// `only` matches no case's name.
    #[error("no case matches `{0}`")]
    NoCase(String),
}

/// One case's result.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    /// The case's name, `<area>.<attack>.<world>`.
    pub name: String,
    /// Its half: an attack or a program that must succeed.
    pub half: Half,
    /// Its guest's world.
    pub world: World,
    /// What the case's outcome is judged to be.
    pub verdict: Verdict,
    /// What was expected, in the table's terms.
    pub expect: super::Expect,
    /// What happened (for a failure: what was expected and what was seen).
    pub observed: String,
    /// How long the case took, in milliseconds.
    pub elapsed_ms: u64,
}

/// Counts of verdicts.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Counts {
    /// Cases counted.
    pub cases: usize,
    /// Attacks that ended in their expected outcome.
    pub held: usize,
    /// Attacks that achieved something.
    pub broken: usize,
    /// Programs that did exactly what they must.
    pub correct: usize,
    /// Programs that did not.
    pub incorrect: usize,
    /// Cases not run: a layer they need is missing here.
    pub skipped: usize,
    /// Cases that ended in neither outcome, or that the host could not run.
    pub error: usize,
}

impl Counts {
    fn add(&mut self, v: Verdict) {
        self.cases += 1;
        match v {
            Verdict::Held => self.held += 1,
            Verdict::Broken => self.broken += 1,
            Verdict::Correct => self.correct += 1,
            Verdict::Incorrect => self.incorrect += 1,
            Verdict::Skipped => self.skipped += 1,
            Verdict::Error => self.error += 1,
        }
    }
}

/// The suite's result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The isolation report of the host the cases ran in.
    pub isolation: IsolationReport,
    /// Where the guests came from ([`GuestSet::source`](super::GuestSet::source)).
    pub guests: String,
    /// Every case run or skipped.
    pub records: Vec<Record>,
    /// The verdicts of every case.
    pub counts: Counts,
    /// The verdicts of the *holds* half.
    pub holds: Counts,
    /// The verdicts of the *correct* half.
    pub correct: Counts,
    /// The verdicts of the preview 1 cases.
    pub p1: Counts,
    /// The verdicts of the preview 2 cases.
    pub p2: Counts,
    /// How long the suite took, in milliseconds.
    pub elapsed_ms: u64,
}

impl Report {
    /// Whether nothing is broken, incorrect or an error.
    pub fn passed(&self) -> bool {
        !self.records.iter().any(|r| r.verdict.fails())
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir() -> Result<TempDir, RunError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let path = std::env::temp_dir().join(format!(
        "gatehouse-conformance-{}-{nanos}",
        std::process::id()
    ));
    let made = std::fs::create_dir(&path).and_then(|()| path.canonicalize());
    match made {
        Ok(canonical) => Ok(TempDir(canonical)),
        Err(source) => Err(RunError::TempDir { path, source }),
    }
}

/// The ports the network cases name: a granted listener, its neighbour,
/// and one on `::1` (absent without IPv6).
struct Ports {
    _v4: TcpListener,
    _neighbour: TcpListener,
    v6: Option<TcpListener>,
    port: u16,
    neighbour: u16,
}

impl Ports {
    fn open() -> Option<Ports> {
        let v4 = TcpListener::bind("127.0.0.1:0").ok()?;
        let neighbour = TcpListener::bind("127.0.0.1:0").ok()?;
        let v6 = TcpListener::bind("[::1]:0").ok();
        Some(Ports {
            port: v4.local_addr().ok()?.port(),
            neighbour: neighbour.local_addr().ok()?.port(),
            _v4: v4,
            _neighbour: neighbour,
            v6,
        })
    }

    fn port6(&self) -> Option<u16> {
        self.v6
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map(|a| a.port())
    }
}

/// `text` with the case's placeholders filled in; `None` when one of them
/// has no value here (no IPv6 loopback).
fn fill(
    text: &str,
    outside: &Path,
    ports: Option<&Ports>,
    http: Option<&HttpServers>,
) -> Option<String> {
    let mut t = text.replace("{outside}", &outside.display().to_string());
    if t.contains("{http}") || t.contains("{http_other}") {
        let h = http?;
        t = t
            .replace("{http}", &h.port().to_string())
            .replace("{http_other}", &h.other_port().to_string());
    }
    if t.contains("{port}") || t.contains("{neighbour}") || t.contains("{port6}") {
        let p = ports?;
        t = t
            .replace("{port}", &p.port.to_string())
            .replace("{neighbour}", &p.neighbour.to_string());
        if t.contains("{port6}") {
            t = t.replace("{port6}", &p.port6()?.to_string());
        }
    }
    Some(t)
}

/// The native probe's file name (`tests/helper/exec_probe.rs`).
const PROBE: &str = "gatehouse-exec-probe";

/// The native probe, when it was built beside this binary (or, for a test
/// binary in `deps/`, beside its parent directory).
fn exec_probe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let found = [Some(dir), dir.parent()]
        .into_iter()
        .flatten()
        .map(|d| d.join(PROBE))
        .find(|p| p.is_file());
    found
}

/// Runs every case (or those `--only` names) and returns the report.
pub fn run(options: Options) -> Result<Report, RunError> {
    let started = Instant::now();
    let cases: Vec<Case> = super::cases()
        .into_iter()
        .filter(|c| {
            options
                .only
                .as_ref()
                .is_none_or(|p| c.name.contains(p.as_str()))
        })
        .collect();
    if cases.is_empty() {
        return Err(RunError::NoCase(options.only.unwrap_or_default()));
    }
    let tmp = temp_dir()?;
    let root = tmp.0.clone();
    let state = StatePaths::under(&root.join("state"), None, None);
    let mkdir = |p: &Path| {
        std::fs::create_dir_all(p).map_err(|source| RunError::TempDir {
            path: p.to_path_buf(),
            source,
        })
    };
    mkdir(&state.state_dir)?;
    mkdir(&root.join("config"))?;
    mkdir(&root.join("guests"))?;
    // The operator's engine and isolation settings, nothing else of theirs.
    let mut config = HostConfig::safe_default("conformance");
    config.engine = options.config.engine;
    config.on_degraded = options.config.on_degraded;
    config.places.config = vec![root.join("config")];
    config.places.state = vec![state.state_dir.clone()];
    let (isolation, _) =
        isolation_report(&config, &state, EngineKind::OneShot).map_err(RunError::Engine)?;
    let ports = Ports::open();
    // Started only for a run that has `http.` cases: two threads on
    // 127.0.0.1 for as long as the suite runs.
    let http = if cases
        .iter()
        .any(|c| c.special == Some(Special::HttpServers))
    {
        Some(HttpServers::start().map_err(|e| e.to_string()))
    } else {
        None
    };
    let suite = Suite {
        root: &root,
        state: &state,
        config: &config,
        guests: &options.guests,
        ports: ports.as_ref(),
        http: http.as_ref(),
        isolation: &isolation,
    };
    let records: Vec<Record> = cases
        .iter()
        .enumerate()
        .map(|(i, case)| suite.record(i, case))
        .collect();
    let [counts, holds, correct, p1, p2] = tally(&records);
    Ok(Report {
        isolation,
        guests: options.guests.source.clone(),
        records,
        counts,
        holds,
        correct,
        p1,
        p2,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

/// The counts of all `records`, then of each half and each world:
/// `[all, holds, correct, p1, p2]`.
fn tally(records: &[Record]) -> [Counts; 5] {
    let mut counts = Counts::default();
    let (mut holds, mut correct, mut p1, mut p2) = Default::default();
    for r in records {
        counts.add(r.verdict);
        match r.half {
            Half::Holds => Counts::add(&mut holds, r.verdict),
            Half::Correct => Counts::add(&mut correct, r.verdict),
        }
        match r.world {
            World::P1 => Counts::add(&mut p1, r.verdict),
            World::P2 => Counts::add(&mut p2, r.verdict),
        }
    }
    [counts, holds, correct, p1, p2]
}

struct Suite<'a> {
    root: &'a Path,
    state: &'a StatePaths,
    config: &'a HostConfig,
    guests: &'a GuestSet,
    ports: Option<&'a Ports>,
    /// The `http.` cases' servers, when some case of this run needs them
    /// (or why they could not start).
    http: Option<&'a Result<HttpServers, String>>,
    isolation: &'a IsolationReport,
}

/// Writes a file, its parents made.
fn put(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, bytes)
}

/// Makes the workspace every case starts from in `dir` (see `cases.rs`):
/// returns `dir/ws` and `dir/outside`. Public so another host can run the
/// same cases.
pub fn set_up(dir: &Path) -> std::io::Result<(PathBuf, PathBuf)> {
    let ws = dir.join("ws");
    let outside = dir.join("outside");
    put(&outside.join("secret.txt"), b"outside secret")?;
    put(&ws.join("a.txt"), b"workspace file")?;
    put(&ws.join("sub/inner.txt"), b"inner")?;
    put(&ws.join("out/w.txt"), b"writable")?;
    put(&ws.join("out/n.md"), b"notes")?;
    std::fs::create_dir_all(ws.join("emptydir"))?;
    fn link(target: impl AsRef<Path>, at: PathBuf) -> std::io::Result<()> {
        std::os::unix::fs::symlink(target, at)
    }
    link(outside.join("secret.txt"), ws.join("abs-link"))?;
    link("../outside/secret.txt", ws.join("rel-link"))?;
    link("../outside", ws.join("dir-link"))?;
    link("loop-b", ws.join("loop-a"))?;
    link("loop-a", ws.join("loop-b"))?;
    link("../../outside/created", ws.join("out/dangling"))?;
    Ok((ws, outside))
}

/// A manifest name for case number `i`.
fn slug(i: usize, case: &Case) -> String {
    let s: String = case
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("cf{i}-{s}").chars().take(64).collect()
}

impl Suite<'_> {
    /// Runs case number `i` and times it: its record.
    fn record(&self, i: usize, case: &Case) -> Record {
        let t0 = Instant::now();
        // A panic of the host is a finding, not the end of the suite.
        let (verdict, observed) =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.case(i, case))) {
                Ok(v) => v,
                Err(p) => {
                    let what = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    (Verdict::Error, format!("the host panicked: {what}"))
                }
            };
        Record {
            name: case.name.clone(),
            half: case.half,
            world: case.world,
            verdict,
            expect: case.expect.clone(),
            observed,
            elapsed_ms: t0.elapsed().as_millis() as u64,
        }
    }

    fn case(&self, i: usize, case: &Case) -> (Verdict, String) {
        if let Some(skip) = self.skipped_by_isolation(case) {
            return skip;
        }
        let Some(bytes) = self.guests.get(case.world.target(), case.guest) else {
            return (
                Verdict::Skipped,
                format!(
                    "guest `{}` ({}) was not built here (setup.sh builds it)",
                    case.guest,
                    case.world.target()
                ),
            );
        };
        let dir = self.root.join("cases").join(format!("{i}"));
        let (ws, outside) = match set_up(&dir) {
            Ok(v) => v,
            Err(e) => return (Verdict::Error, format!("cannot set up the case: {e}")),
        };
        let http = match (case.special, self.http) {
            (Some(Special::HttpServers), Some(Err(e))) => {
                return (
                    Verdict::Error,
                    format!("cannot start the suite's http servers on 127.0.0.1: {e}"),
                )
            }
            (_, Some(Ok(h))) => Some(h),
            _ => None,
        };
        let (case, args) = match self.filled(case, &ws, &outside, http) {
            Ok(v) => v,
            Err(verdict) => return verdict,
        };
        let workspace = match case.special {
            Some(Special::StateInWorkspace) => {
                // A file of the host's state for the guest to go after.
                let probe = self.state.state_dir.join("conformance-probe.txt");
                if let Err(e) = put(&probe, b"host state") {
                    return (Verdict::Error, format!("cannot set up the case: {e}"));
                }
                self.root.to_path_buf()
            }
            _ => ws,
        };
        let mark = http.map(HttpServers::mark);
        let observed = match self.run_case(i, &case, bytes, &workspace, args) {
            Ok(o) => o,
            Err(message) => Observed::Error { message },
        };
        let observed = match (case.special, http, mark) {
            (Some(Special::HttpServers), Some(h), Some(mark)) => h.judge(&case, mark, observed),
            _ => observed,
        };
        if let Some(skip) = self.refused_as_degraded(&case, &observed) {
            return skip;
        }
        classify(&case, &observed)
    }

    /// The case's skip when the isolation report says its layer is
    /// unavailable on this host.
    fn skipped_by_isolation(&self, case: &Case) -> Option<(Verdict, String)> {
        let layer = case.layer?;
        if let Some(l) = self
            .isolation
            .layers
            .iter()
            .find(|l| l.name == layer && l.state.as_str() == "unavailable")
        {
            return Some((
                Verdict::Skipped,
                format!(
                    "the isolation report says `{layer}` is unavailable: {}",
                    l.reason
                ),
            ));
        }
        // Not a layer of its own: the `code_exec` layer's seccomp
        // filter, which the report details.
        if layer == "seccomp" {
            if let Some(l) = self
                .isolation
                .layers
                .iter()
                .find(|l| l.name == "code_exec" && l.details["seccomp"].as_str() != Some("ok"))
            {
                return Some((
                    Verdict::Skipped,
                    format!(
                        "the isolation report says a command's seccomp filter cannot be installed: {}",
                        l.reason
                    ),
                ));
            }
        }
        None
    }

    /// A copy of `case` with its placeholders filled in (and the native
    /// probe copied in when it names it), and its arguments; the verdict
    /// instead when it cannot run here.
    fn filled(
        &self,
        case: &Case,
        ws: &Path,
        outside: &Path,
        http: Option<&HttpServers>,
    ) -> Result<(Case, Vec<String>), (Verdict, String)> {
        let filled = |t: &str| fill(t, outside, self.ports, http);
        let mut case = case.clone();
        let mut args = Vec::new();
        for a in &case.args {
            match filled(a) {
                Some(a) => args.push(a),
                None => {
                    return Err((
                        Verdict::Skipped,
                        "no IPv6 loopback on this host (`[::1]` cannot be bound)".to_string(),
                    ))
                }
            }
        }
        for c in &mut case.caps {
            c.target = c.target.as_deref().and_then(filled);
        }
        case.input = filled(&case.input).unwrap_or_default();
        if case.input.contains("{probe}") {
            let Some(probe) = exec_probe() else {
                return Err((
                    Verdict::Skipped,
                    format!("the native probe `{PROBE}` is not installed next to this gatehouse (a build from the source tree puts it there): no program of a stock system can try this"),
                ));
            };
            let copy = ws.join(PROBE);
            if let Err(e) = std::fs::copy(&probe, &copy) {
                return Err((
                    Verdict::Error,
                    format!("cannot copy `{}`: {e}", probe.display()),
                ));
            }
            let at = copy.display().to_string();
            case.input = case.input.replace("{probe}", &at);
            for t in &mut case.tools {
                *t = t.replace("{probe}", &at);
            }
            for c in &mut case.caps {
                c.target = c.target.as_ref().map(|t| t.replace("{probe}", &at));
            }
        }
        if let super::Expect::Output { stdout, .. } = &mut case.expect {
            *stdout = filled(stdout).unwrap_or_default();
        }
        Ok((case, args))
    }

    /// The case's skip when the operator's `[isolation] on_degraded`
    /// refused its turn and the case expected something else.
    fn refused_as_degraded(&self, case: &Case, observed: &Observed) -> Option<(Verdict, String)> {
        // The operator's `[isolation] on_degraded` refused the turn on this
        // degraded host, as it must: the case cannot say more here.
        if let Observed::Refused {
            code: DenyCode::IsolationDegraded,
            reason,
        } = observed
        {
            if case.expect
                != (super::Expect::Refused {
                    code: DenyCode::IsolationDegraded,
                })
            {
                return Some((
                    Verdict::Skipped,
                    format!(
                        "`[isolation] on_degraded = \"{}\"` refused it on this degraded host: {reason}",
                        self.config.on_degraded.as_str()
                    ),
                ));
            }
        }
        None
    }

    fn manifest(
        &self,
        name: &str,
        component: &Path,
        case: &Case,
        sha256: Option<&str>,
    ) -> Result<Manifest, String> {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        let fields = ManifestFields {
            name: name.to_string(),
            component: Some(component.display().to_string()),
            sha256: sha256.map(str::to_string),
            tools: (!case.tools.is_empty()).then(|| case.tools.clone()),
            capabilities: case
                .caps
                .iter()
                .map(|c| CapabilityFields {
                    name: c.name.to_string(),
                    target: c.target.clone(),
                    mount: c.mount.map(str::to_string),
                    methods: c.methods.map(strings),
                })
                .collect(),
            ..ManifestFields::default()
        };
        let path = self.root.join("config").join(format!("{name}.toml"));
        Manifest::from_fields(&path, fields)
            .map_err(|e| format!("manifest: {}", crate::util::chain(&e)))
    }

    fn host(
        &self,
        workspace: &Path,
        manifests: Vec<Manifest>,
        tools: &[&str],
    ) -> Result<Host, String> {
        let mut config = self.config.clone();
        if let Some(actor) = config.actors.get_mut("main") {
            actor.tools = tools.iter().map(|t| t.to_string()).collect();
        }
        let mut options = HostOptions::new(
            config,
            self.state.clone(),
            workspace.display().to_string(),
            manifests,
        );
        options.level = Some(Level::Full);
        options.engine = EngineKind::OneShot;
        Host::open(options).map_err(|e| crate::util::chain(&e))
    }

    fn guest_file(&self, case: &Case, bytes: &[u8]) -> Result<PathBuf, String> {
        let path = self
            .root
            .join("guests")
            .join(case.world.target())
            .join(case.guest);
        if !path.exists() {
            put(&path, bytes).map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
        }
        Ok(path)
    }

    fn run_case(
        &self,
        i: usize,
        case: &Case,
        bytes: &[u8],
        workspace: &Path,
        args: Vec<String>,
    ) -> Result<Observed, String> {
        let name = slug(i, case);
        let mut component = self.guest_file(case, bytes)?;
        let mut digest = None;
        match case.special {
            Some(Special::Truncated) => {
                component = self.root.join("guests").join(format!("{name}.wasm"));
                put(&component, &bytes[..bytes.len() / 2])
                    .map_err(|e| format!("cannot write `{}`: {e}", component.display()))?;
            }
            Some(Special::DigestMismatch) => digest = Some("0".repeat(64)),
            Some(Special::Precompiled) => {
                // An empty module, precompiled by an engine of wasmtime's
                // default configuration: bytes no host should run.
                let engine = wasmtime::Engine::default();
                let artifact = engine
                    .precompile_module(b"\0asm\x01\0\0\0")
                    .map_err(|e| format!("cannot precompile: {e}"))?;
                component = self.root.join("guests").join(format!("{name}.cwasm"));
                put(&component, &artifact)
                    .map_err(|e| format!("cannot write `{}`: {e}", component.display()))?;
            }
            Some(Special::Residue) => return self.residue(workspace),
            _ => {}
        }
        let manifest = self.manifest(&name, &component, case, digest.as_deref())?;
        let tools: Vec<&str> = case.tools.iter().map(String::as_str).collect();
        let host = self.host(workspace, vec![manifest], &tools)?;
        let mut request = TurnRequest::new(&name, "main", case.input.clone());
        let defaults = Limits::default();
        request.limits = Limits {
            deadline_ms: case.deadline_ms.unwrap_or(defaults.deadline_ms),
            memory_bytes: case.memory_mib.map_or(defaults.memory_bytes, |m| m << 20),
            output_bytes: case.output_kib.map_or(defaults.output_bytes, |k| k << 10),
            hostcalls: case.hostcalls.unwrap_or(defaults.hostcalls),
            ..defaults
        };
        request.io = RunIo {
            args,
            stdin: StdinFrom::Input,
            forward_output: false,
            forward_cap: None,
            process_stdin: None,
        };
        // A `code:exec` case is approved once, as at the terminal, and so
        // is each command line its guest runs; every other case needs no
        // approval at level Full.
        let outcome = if case.tools.is_empty() {
            host.run(request, &NoOne)
        } else {
            let once: std::sync::Arc<Scripted> =
                std::sync::Arc::new(Scripted::new(vec![Choice::Once; 64]));
            request.approver = Some(crate::host::ApproverRef(once.clone()));
            host.run(request, once.as_ref())
        };
        Ok(observe(outcome))
    }

    /// `plant-secret` then `scan-residue`, in one host, eight rounds.
    fn residue(&self, workspace: &Path) -> Result<Observed, String> {
        let key = "gatehouse-conformance-residue-5be1";
        let mut manifests = Vec::new();
        for guest in ["plant_secret.wasm", super::cases::SCAN_RESIDUE] {
            let bytes = self
                .guests
                .get("wasm32-wasip2", guest)
                .ok_or_else(|| format!("guest `{guest}` was not built here"))?;
            let mut case = super::cases::residue_part(guest);
            let path = self.guest_file(&case, bytes)?;
            case.name = guest.trim_end_matches(".wasm").replace('_', "-");
            manifests.push(self.manifest(&case.name, &path, &case, None)?);
        }
        let host = self.host(workspace, manifests, &[])?;
        let turn = |executor: &str, input: String| -> Result<serde_json::Value, String> {
            let outcome = host.run(TurnRequest::new(executor, "main", input), &NoOne);
            match &outcome.end {
                TurnEnd::Ran { run } => match &run.result {
                    GuestResult::Ok { output } => {
                        serde_json::from_str(output).map_err(|e| format!("{executor}: {e}"))
                    }
                    GuestResult::Err { error } => Err(format!("{executor}: {error}")),
                },
                _ => Err(format!("{executor}: {}", observe(outcome).describe())),
            }
        };
        let own = turn("scan-residue", format!("self:8:{key}"))?;
        if own["found"].as_u64().unwrap_or(0) == 0 {
            return Err(
                "control failed: the scan does not find the secret in its own memory".into(),
            );
        }
        for round in 0..4 {
            turn("plant-secret", format!("8:{key}"))?;
            let scan = turn("scan-residue", format!("8:{key}"))?;
            let found = scan["found"].as_u64().unwrap_or(0);
            if found > 0 {
                return Ok(Observed::Ran {
                    exit: 0,
                    stdout: format!(
                        "BROKEN round {round}: the secret found {found} times in a reused slot\n"
                    ),
                    stderr: String::new(),
                });
            }
        }
        Ok(Observed::Ran {
            exit: 0,
            stdout: "held no residue\n".to_string(),
            stderr: String::new(),
        })
    }
}

/// What a turn did, in the suite's terms.
pub fn observe(outcome: TurnOutcome) -> Observed {
    let kept = |run: &crate::host::RunReport| {
        if run.command {
            run.stdout.clone()
        } else {
            match &run.result {
                GuestResult::Ok { output } => output.clone(),
                GuestResult::Err { error } => format!("error {error}"),
            }
        }
    };
    match outcome.end {
        TurnEnd::Refused { code, reason } => Observed::Refused { code, reason },
        TurnEnd::Ran { run } => Observed::Ran {
            exit: run.exit_code.unwrap_or(1),
            stdout: kept(&run),
            stderr: run.stderr.clone(),
        },
        TurnEnd::Stopped { code, message, run } => Observed::Stopped {
            code,
            message,
            stdout: run.as_deref().map(kept).unwrap_or_default(),
        },
        TurnEnd::Invalid { message } => Observed::Invalid { message },
        TurnEnd::Failed { message } => Observed::Error { message },
    }
}
