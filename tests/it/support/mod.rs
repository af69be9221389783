//! Shared helpers: a sealed environment per test and a way to run the binary
//! in it (here), and the helpers more than one test module uses:
//!
//! - `guests`: the guests under `guests/`, manifests for them, `run --json`;
//! - `exec`: whether this host confines commands, `run-tool` approved;
//! - `seccomp`: a seccomp filter in a child, to hide a kernel facility;
//! - `serve`: a `gatehouse serve --mcp` child over stdio or HTTP.

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

pub mod exec;
pub mod guests;
pub mod pg;
pub mod seccomp;
pub mod serve;

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout split into lines.
    pub fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    /// stdout parsed as JSON Lines (every line must be one JSON value).
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("stdout line is not json ({e}): {l:?}\n{self:?}"))
            })
            .collect()
    }

    /// Asserts the exit code, showing everything on failure.
    #[track_caller]
    pub fn expect(&self, code: i32) -> &Run {
        assert_eq!(self.code, code, "unexpected exit code: {self:#?}");
        self
    }

    /// Asserts exit code and the exact stdout lines.
    #[track_caller]
    pub fn expect_stdout(&self, code: i32, lines: &[&str]) -> &Run {
        self.expect(code);
        assert_eq!(self.lines(), lines, "unexpected stdout: {self:#?}");
        self
    }

    /// Asserts the exit code and that stderr contains every fragment.
    #[track_caller]
    pub fn expect_err(&self, code: i32, fragments: &[&str]) -> &Run {
        self.expect(code);
        for f in fragments {
            assert!(
                self.stderr.contains(f),
                "stderr does not contain {f:?}: {self:#?}"
            );
        }
        self
    }

    /// Asserts that the error message is lowercase: after `gatehouse: ` and
    /// once backticked user input and leading deny codes are set aside, the
    /// first letter is lowercase.
    #[track_caller]
    pub fn expect_lowercase_message(&self) -> &Run {
        let msg = self
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("gatehouse: "))
            .unwrap_or_else(|| panic!("no `gatehouse: ` error line: {self:#?}"));
        let mut rest = msg;
        // A leading stable deny code (`PATH_RESOLUTION_FAILED: `) is upper case by design.
        if let Some((code, tail)) = rest.split_once(": ") {
            if !code.is_empty() && code.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                rest = tail;
            }
        }
        let mut outside = String::new();
        for (i, part) in rest.split('`').enumerate() {
            if i % 2 == 0 {
                outside.push_str(part);
            }
        }
        let first = outside
            .chars()
            .find(|c| c.is_alphabetic())
            .unwrap_or_else(|| panic!("no words outside backticks in {msg:?}"));
        assert!(first.is_lowercase(), "message is not lowercase: {msg:?}");
        self
    }
}

/// A fresh temporary directory standing in for the whole machine: state,
/// home, XDG directories and the working directory all live in it.
pub struct Env {
    pub dir: TempDir,
    /// `GATEHOUSE_DATABASE_URL` of every command: a fleet's shared state
    /// (see [`pg::Database`]); `None`: the SQLite files.
    pub database_url: Option<String>,
    /// The database of this environment alone when the whole suite runs
    /// on PostgreSQL ([`pg::suite_on_postgresql`]); dropped with it.
    pub own_db: Option<std::sync::Arc<pg::Database>>,
}

impl Env {
    /// A fresh environment on the suite's backend: SQLite files in its
    /// state directory, or, when the suite runs on PostgreSQL, a migrated
    /// database of its own.
    pub fn new() -> Env {
        let mut env = Env::bare();
        if pg::suite_on_postgresql() {
            // On a thread of its own: the sync client starts a runtime,
            // which it may not inside a test's async one.
            let db = std::thread::spawn(pg::Database::migrated)
                .join()
                .expect("a migrated test database");
            env.database_url = Some(db.url.clone());
            env.own_db = Some(std::sync::Arc::new(db));
        }
        env
    }

    /// A fresh environment on the embedded backend, whatever the suite's:
    /// for the tests of the embedded backend's own files (`grants.db`,
    /// `approvals.db`, `audit.db`, the state directory's contents and
    /// permissions, a log aged by rewriting it), which a fleet does not
    /// have.
    pub fn bare() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["home", "cwd", "config", "xdg-state"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        Env {
            dir,
            database_url: None,
            own_db: None,
        }
    }

    /// A fresh environment whose state is shared in `db` (another node
    /// of the same fleet is another `Env` on the same database).
    pub fn on(db: &pg::Database) -> Env {
        Env {
            database_url: Some(db.url.clone()),
            ..Env::bare()
        }
    }

    /// This environment's node name in a fleet (`GATEHOUSE_NODE`): its
    /// temporary directory's name.
    pub fn node(&self) -> String {
        let name = self.dir.path().file_name().unwrap_or_default();
        format!("node{}", name.to_string_lossy())
    }

    /// After a change another process made to the state (a grant, a
    /// revoke): on a fleet's database, waits the stated bound for it to
    /// reach a running host (60 ms plus a round trip; 100 ms, as the fleet
    /// tests wait); on SQLite nothing, the next call sees it.
    pub fn settle(&self) {
        if self.database_url.is_some() {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// The root of the temporary directory, canonical.
    pub fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().expect("canonical tempdir")
    }

    /// The state this environment's commands use, for a host opened in
    /// the test's own process: its state directory, and its database
    /// when it has one.
    pub fn state_paths(&self) -> gatehouse::config::StatePaths {
        let mut paths = gatehouse::config::StatePaths::under(&self.state_dir(), None, None);
        paths.database_url = self.database_url.clone();
        paths
    }

    pub fn state_dir(&self) -> PathBuf {
        self.root().join("state")
    }

    pub fn grants_db(&self) -> PathBuf {
        self.state_dir().join("grants.db")
    }

    /// A path under the temp dir, its parents created.
    pub fn path(&self, rel: &str) -> PathBuf {
        let p = self.root().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        p
    }

    /// A directory under the temp dir, created.
    pub fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.root().join(rel);
        std::fs::create_dir_all(&p).expect("mkdir");
        p
    }

    /// Writes `text` to `rel` and returns its path.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::write(&p, text).expect("write");
        p
    }

    /// The binary with a sealed environment.
    pub fn command(&self) -> Command {
        let root = self.root();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_gatehouse"));
        cmd.current_dir(root.join("cwd"))
            .env("GATEHOUSE_STATE_DIR", root.join("state"))
            .env("HOME", root.join("home"))
            .env("XDG_CONFIG_HOME", root.join("config"))
            .env("XDG_STATE_HOME", root.join("xdg-state"))
            .env("USER", "tester")
            .env("LOGNAME", "tester")
            .env("GATEHOUSE_NODE", self.node())
            .env_remove("GATEHOUSE_CONFIG")
            .env_remove("GATEHOUSE_GRANTS_DB")
            .env_remove("GATEHOUSE_HISTORY_DIR")
            .env_remove("GATEHOUSE_LOG")
            .env_remove("RUST_LOG");
        match &self.database_url {
            Some(url) => cmd.env("GATEHOUSE_DATABASE_URL", url),
            None => cmd.env_remove("GATEHOUSE_DATABASE_URL"),
        };
        cmd
    }

    /// Runs the binary with `args`.
    pub fn run<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> Run {
        let out = self.command().args(args).output().expect("run gatehouse");
        Run {
            code: out
                .status
                .code()
                .expect("exit code (not killed by a signal)"),
            stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
            stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
        }
    }
}

impl Env {
    /// Runs the binary with `args` under a pseudo-terminal (util-linux
    /// `script`), with `vars` set too, typing `answers` at its prompts.
    /// On a terminal stderr and stdout are one stream: `Run::stdout`.
    pub fn run_on_terminal(&self, args: &[&str], vars: &[(&str, &str)], answers: &str) -> Run {
        let mut cmd = self.terminal_command(args, vars);
        type_answers(&mut cmd, answers)
    }

    /// The `script` command that runs the binary with `args` on a
    /// pseudo-terminal, in the sealed environment plus `vars`.
    pub fn terminal_command(&self, args: &[&str], vars: &[(&str, &str)]) -> Command {
        self.terminal_command_with(args, vars, "")
    }

    /// [`Env::terminal_command`] with `redirect` (shell syntax, such as
    /// `< /dev/null`) after the binary's arguments.
    pub fn terminal_command_with(
        &self,
        args: &[&str],
        vars: &[(&str, &str)],
        redirect: &str,
    ) -> Command {
        let quote = |x: &str| format!("'{}'", x.replace('\'', "'\\''"));
        let mut line = quote(env!("CARGO_BIN_EXE_gatehouse"));
        for a in args {
            line.push(' ');
            line.push_str(&quote(a));
        }
        if !redirect.is_empty() {
            line.push(' ');
            line.push_str(redirect);
        }
        let mut script = Command::new("script");
        script
            .args(["-qec", &line, "/dev/null"])
            .current_dir(self.root().join("cwd"));
        for (k, v) in self.command().get_envs() {
            match v {
                Some(v) => script.env(k, v),
                None => script.env_remove(k),
            };
        }
        script.envs(vars.iter().copied());
        script
    }
}

impl Env {
    /// `gatehouse ARGS` answered by a person: run on a pseudo-terminal,
    /// typing `y` at its confirmation. The run, and its last JSON value
    /// (on a terminal the prompt and the output share the stream).
    pub fn answer_on_terminal(&self, args: &[&str]) -> (Run, serde_json::Value) {
        let run = self.run_on_terminal(args, &[], "y\n");
        let v = run
            .stdout
            .lines()
            .rev()
            .find_map(|l| {
                let at = l.find("{\"")?;
                serde_json::from_str::<serde_json::Value>(l[at..].trim()).ok()
            })
            .unwrap_or(serde_json::Value::Null);
        (run, v)
    }
}

impl Env {
    /// `program ARGS` run as the account `nobody` (setpriv; needs root),
    /// in the sealed environment, with no terminal and stdin closed.
    pub fn as_nobody(&self, program: &str, args: &[&str]) -> std::process::Output {
        self.as_account(65534, program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("setpriv")
    }

    /// `program` to be run as the account `uid` (and its group; setpriv,
    /// needs root), in the sealed environment, from `/`.
    pub fn as_account(&self, uid: u32, program: &str) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .args(["--clear-groups", "--", program]);
        for (k, v) in self.command().get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        cmd.current_dir("/");
        cmd
    }

    /// Writes the configuration the safe default would be (one actor
    /// `main` of the sealed environment's identity, any executor) with
    /// `[approvals] elicitation = "remember"`: a server whose client's
    /// "allow and remember" records a grant, as the operator said.
    pub fn elicited_remember(&self) {
        self.write(
            "config/gatehouse/gatehouse.toml",
            "[actors.main]\nchannel = \"cli\"\nsender = \"tester\"\nskills = [\"*\"]\n\
             [approvals]\nelicitation = \"remember\"\n",
        );
    }

    /// `gatehouse grants add` of `capability` on `target` for the sealed
    /// environment's identity (`cli`, `tester`), which must succeed: the
    /// grant as JSON.
    pub fn grant(&self, capability: &str, target: &str) -> serde_json::Value {
        let run = self.run(&[
            "grants",
            "add",
            "--channel",
            "cli",
            "--sender",
            "tester",
            capability,
            target,
        ]);
        run.expect(0);
        run.json_lines().remove(0)
    }
}

/// Runs `cmd` (a [`Env::terminal_command`]) typing `answers`.
pub fn type_answers(cmd: &mut Command, answers: &str) -> Run {
    use std::io::Write;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("script");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(answers.as_bytes())
        .expect("answers");
    let out = child.wait_with_output().expect("wait for script");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A path as a `&str` (temp paths are utf-8 here).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}
