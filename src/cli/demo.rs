//! `gatehouse demo`: the gate end to end on a throwaway state directory.

use std::path::{Path, PathBuf};

use serde_json::json;

use gatehouse::config::{HostConfig, StatePaths};
use gatehouse::host::{
    ApprovalRequest, Approver, Choice, GuestResult, Host, NoOne, TurnEnd, TurnOutcome, TurnRequest,
};
use gatehouse::policy::DenyCode;
use gatehouse::policy::{Decision, Identity, Level};
use gatehouse::state::grants::{now_utc, GrantBackend, NewGrant};
use gatehouse::state::Stores;
use gatehouse::tier3;

use super::host::HostFlags;
use super::{out, CmdResult, Context, Exit, Failure};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, Failure> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let dir =
            std::env::temp_dir().join(format!("gatehouse-demo-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(dir.join("workspace/out"))
            .map_err(|e| Failure::io("create", &dir, &e))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn show(step: &str, request: &serde_json::Value, decision: &Decision) {
    let answer = match decision {
        Decision::Deny { code, .. } => format!("denied {code}"),
        other => other.outcome().to_string(),
    };
    out(step);
    out(format!("  request:  {request}"));
    out(format!("  decision: {answer}"));
    out(format!("  reason:   {}", decision.reason()));
    out("");
}

fn canonical(p: &Path) -> Result<String, Failure> {
    p.canonicalize()
        .map(|p| p.display().to_string())
        .map_err(|e| Failure::io("resolve", p, &e))
}

pub fn run(ctx: &Context) -> CmdResult {
    let tmp = TempDir::new()?;
    let state = StatePaths::under(&tmp.0.join("state"), None, None);
    let workspace = canonical(&tmp.0.join("workspace"))?;
    let login = ctx.env.login.clone().unwrap_or_else(|| "anonymous".into());
    let config = HostConfig::safe_default(&login);
    out(format!("gatehouse demo: the safe default configuration (level Supervised, actor `main` = cli/{login})"));
    out(format!("workspace {workspace}"));
    out(format!("state     {}", state.state_dir.display()));
    out("");

    let book = Stores::new(&state)?.grants;
    decisions(&config, &state, &workspace, &*book, &login)?;
    always_class_refused(&*book, &login)?;

    run_executors(&config, &state, &workspace)?;

    let results = super::host::run_tier3(
        HostFlags {
            home: ctx.env.home.clone(),
            ..HostFlags::new(config.clone(), state.clone(), workspace.clone(), Vec::new())
        },
        None,
    )?;
    let summary = tier3::Summary::of(&results);
    out(format!(
        "13. tier 3 (every deny code, exact, asked of the policy and of the host): {} passed, {} failed, {} skipped",
        summary.passed, summary.failed, summary.skipped
    ));
    Ok(if summary.holds(false) {
        Exit::Ok
    } else {
        Exit::Error
    })
}

/// The guests this demo runs, found next to the source tree it was built from.
fn guest_manifest(name: &str) -> Result<gatehouse::manifest::Manifest, Failure> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("guests")
        .join(name)
        .join("executor.toml");
    let m = gatehouse::manifest::Manifest::load(&path)?;
    if !m.component.exists() {
        return Err(Failure::error(format!(
            "component `{}` is not built; run `./setup.sh` first",
            m.component.display()
        )));
    }
    Ok(m)
}

/// The demo's approver: answers every pending item "allow once" and says
/// so, as a person at the prompt would.
struct AllowOnce;

impl Approver for AllowOnce {
    fn ask(&self, request: &ApprovalRequest) -> Vec<Choice> {
        for p in &request.pending {
            let line = request
                .shown
                .commands
                .iter()
                .map(|argv| format!(", command line `{}`", argv.join(" ")))
                .collect::<String>();
            out(format!(
                "  approval: `{}` on `{}`{line} -> allowed once (as at the prompt)",
                p.capability,
                p.target.as_deref().unwrap_or("-")
            ));
        }
        vec![Choice::Once; request.pending.len()]
    }
}

/// Steps 1 to 6: what the policy says to a few requests, before and
/// after a grant is remembered.
fn decisions(
    config: &HostConfig,
    state: &StatePaths,
    workspace: &str,
    book: &dyn GrantBackend,
    login: &str,
) -> Result<(), Failure> {
    let host = |level: Option<Level>| demo_host(config, state, workspace, &[], level);
    let target = format!("{workspace}/out/**");
    let write_req =
        json!({"kind": "capability", "actor": "main", "capability": "fs:write", "target": target});

    let supervised = host(None)?;
    let skill = json!({"kind": "skill", "actor": "main", "skill": "hello"});
    show(
        "1. may `main` run the executor `hello`?",
        &skill,
        &supervised.decide_json(&skill),
    );
    show(
        "2. fs:write on the workspace's out/ at Supervised",
        &write_req,
        &supervised.decide_json(&write_req),
    );

    let grant = book.record(
        &NewGrant {
            identity: Identity::new("cli", login),
            capability: "fs:write".into(),
            target: target.clone(),
            expires_at: Some(now_utc().plus_seconds(600)),
            granted_by: Some("demo".into()),
        },
        now_utc(),
    )?;
    out(format!("   (\"allow and remember\": grant #{} recorded for cli/{login}, fs:write `{target}`, 10 minutes)", grant.id));
    out("");
    let supervised = host(None)?;
    show(
        "3. the same request with the grant in force",
        &write_req,
        &supervised.decide_json(&write_req),
    );
    show(
        "4. the same request at ReadOnly: a grant never lifts a denial",
        &write_req,
        &host(Some(Level::ReadOnly))?.decide_json(&write_req),
    );
    let tool = json!({"kind": "tool", "actor": "main", "tool": "ls", "command": "ls; herdr run"});
    show(
        "5. a command that hides a raw runtime tool",
        &tool,
        &supervised.decide_json(&tool),
    );
    let db = json!({"kind": "workspace", "actor": "main", "access": "write",
        "path": {"resolved": state.grants_db.canonicalize().map(|p| p.display().to_string()).unwrap_or_default()}});
    show(
        "6. a write to the grants database",
        &db,
        &supervised.decide_json(&db),
    );
    Ok(())
}

/// Step 7: an approval for `code:exec` cannot be remembered.
fn always_class_refused(book: &dyn GrantBackend, login: &str) -> Result<(), Failure> {
    let refused = book.record(
        &NewGrant {
            identity: Identity::new("cli", login),
            capability: "code:exec".into(),
            target: "ls".into(),
            expires_at: None,
            granted_by: Some("demo".into()),
        },
        now_utc(),
    );
    match refused {
        Err(e) => {
            out("7. remembering an approval for code:exec is refused:");
            out(format!("  {e}"));
            out("");
            Ok(())
        }
        Ok(_) => Err(Failure::error(
            "a grant for code:exec was recorded; the always-class guard is broken",
        )),
    }
}

/// A host on the demo's state and workspace, at `level`, knowing `manifests`.
fn demo_host(
    config: &HostConfig,
    state: &StatePaths,
    workspace: &str,
    manifests: &[gatehouse::manifest::Manifest],
    level: Option<Level>,
) -> Result<Host, Failure> {
    super::host::open(HostFlags {
        level,
        granted_by: Some("demo".into()),
        ..HostFlags::new(
            config.clone(),
            state.clone(),
            workspace.to_string(),
            manifests.to_vec(),
        )
    })
}

/// Prints what a demo turn did.
fn show_outcome(outcome: &TurnOutcome, workspace: &str) {
    for s in &outcome.decisions {
        out(format!(
            "  decision: {} -> {}{}",
            s.request.kind.name(),
            s.decision.outcome(),
            s.approval.map(|a| format!(" ({a})")).unwrap_or_default()
        ));
    }
    match &outcome.end {
        TurnEnd::Refused { code, reason } => {
            if *code == DenyCode::ApprovalRequired {
                for p in &outcome.pending {
                    out(format!(
                        "  APPROVAL_REQUIRED: `{}` on `{}`: {}",
                        p.capability,
                        p.target.as_deref().unwrap_or_default(),
                        p.reason
                    ));
                }
            } else {
                out(format!("  denied {code}: {reason}"));
            }
            out(format!(
                "  isolation probed, engine built: {}",
                if outcome.isolation.is_some() {
                    "yes"
                } else {
                    "no (the policy answered first)"
                }
            ));
        }
        TurnEnd::Ran { run } => {
            out(format!("  linked:   {}", run.linked.join(", ")));
            for c in &run.commands {
                out(format!("  command:  {}", c.summary()));
            }
            match &run.result {
                GuestResult::Ok { output } => out(format!("  output:   {output}")),
                GuestResult::Err { error } => out(format!("  error:    {error}")),
            }
            let written = Path::new(workspace).join("out/a.txt");
            if let Ok(bytes) = std::fs::read_to_string(&written) {
                out(format!("  on disk:  {} = {:?}", written.display(), bytes));
            }
        }
        TurnEnd::Stopped { message, .. }
        | TurnEnd::Invalid { message }
        | TurnEnd::Failed { message } => out(format!("  failed:   {message}")),
    }
    out("");
}

fn run_executors(config: &HostConfig, state: &StatePaths, workspace: &str) -> Result<(), Failure> {
    let manifests = vec![
        guest_manifest("hello")?,
        guest_manifest("write-file")?,
        guest_manifest("env")?,
        guest_manifest("run-tool")?,
    ];
    let cases: [(&str, &str, Option<Level>, &str); 4] = [
        (
            "8. run `hello` (compute:pure)",
            "hello",
            None,
            r#"{"greeting":"hi"}"#,
        ),
        (
            "9. run `write-file` at ReadOnly",
            "write-file",
            Some(Level::ReadOnly),
            r#"{"path":"out/a.txt","content":"hi"}"#,
        ),
        (
            "10. run `env` (env:read needs an approval; no one to ask here)",
            "env",
            None,
            r#"{"names":["HOME"]}"#,
        ),
        (
            "11. run `write-file` with the remembered grant of step 3",
            "write-file",
            None,
            r#"{"path":"out/a.txt","content":"written by a wasm guest\n"}"#,
        ),
    ];
    for (title, name, level, input) in cases {
        let host = demo_host(config, state, workspace, &manifests, level)?;
        out(title);
        let outcome = host.run(TurnRequest::new(name, "main", input), &NoOne);
        show_outcome(&outcome, workspace);
    }
    run_tool_step(config, state, workspace, &manifests)
}

/// Step 12: `run-tool` runs `cat` in the OS sandbox of `code:exec`. The
/// actor is given `tools = ["cat", "ls", "wc"]` for this step only (the safe default
/// grants no tools), and the pending approvals are given once, as a person
/// at the prompt would: `code:exec` is always-class, asked every turn.
fn run_tool_step(
    config: &HostConfig,
    state: &StatePaths,
    workspace: &str,
    manifests: &[gatehouse::manifest::Manifest],
) -> Result<(), Failure> {
    out("12. run `run-tool`: `cat notes.txt /etc/hostname` as a host command (code:exec)");
    let mut config = config.clone();
    if let Some(main) = config.actors.get_mut("main") {
        main.tools = vec!["cat".into(), "ls".into(), "wc".into()];
    }
    let notes = Path::new(workspace).join("notes.txt");
    std::fs::write(&notes, "a note in the workspace\n")
        .map_err(|e| Failure::io("write", &notes, &e))?;
    let host = demo_host(&config, state, workspace, manifests, None)?;
    let input = r#"{"program":"cat","args":["notes.txt","/etc/hostname"]}"#;
    let mut request = TurnRequest::new("run-tool", "main", input);
    // "Once" covers one command line: the guest's is asked about too.
    request.approver = Some(gatehouse::host::ApproverRef(std::sync::Arc::new(AllowOnce)));
    let outcome = host.run(request, &AllowOnce);
    show_outcome(&outcome, workspace);
    Ok(())
}
