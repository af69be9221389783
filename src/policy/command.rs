//! Screening of shell commands for the `tool` request kind.
//!
//! A command is split into segments on `;`, `&&`, `||`, `|` and `&`
//! (outside quotes). Each segment is looked through: leading `VAR=value`
//! assignments, wrappers (`env`, `command`, `sudo`, `exec`, `nohup`,
//! `nice`, `time`, `timeout`, `setsid`, `doas`, `builtin`) with the options
//! each of them really takes, and full paths are peeled off to find the
//! program that really runs. Whatever the lexer cannot read exactly as bash
//! would is refused rather than parsed, because a half-right parser is worse
//! than none: `eval`, backticks, `$(…)`, process substitution, `base64`,
//! `xxd`, `sh -c`, `python -c`, `xargs`, …; ANSI-C and locale quoting
//! (`$'…'`, `$"…"`), a `#` that starts a word (a comment), any control
//! character (a newline is a second command bash runs), `(` and `)`
//! (subshells, functions, arrays); a word before the program that the shell
//! may expand into other words (`$X`, globs, braces, `~`, redirections); a
//! wrapper option the screen does not know; and an assignment to a variable
//! that can change what a program runs (`PATH`, `LD_PRELOAD`, `GIT_PAGER`,
//! …: only [`SAFE_VARIABLES`] and `LC_*` may be set).
//!
//! Options that make a granted program start another (`find -exec`,
//! `git -c`, `awk` with `system`, `tar --to-command`, `rsync -e`, `ssh -o
//! ProxyCommand`) are refused too, as defence in depth only: the list
//! cannot be complete, and the OS sandbox of `code:exec` is what holds (it
//! lets a command execute only the granted programs).

mod lexer;
mod screens;
mod wrappers;

pub use lexer::split_segments;
pub use screens::{
    host_program_in, indirect_construct, indirect_in, invokes_raw_runtime, raw_runtime_in,
};
pub use wrappers::screen;

/// Tools that start another agent runtime; refused for every actor, whether
/// they are the tool's name or appear anywhere in its command.
pub const RAW_RUNTIME_TOOLS: [&str; 4] = ["herdr", "paseo", "create_agent", "spawn_agent"];

/// The host's own program: a command that runs it could answer its own
/// approvals (`gatehouse approvals allow`), record grants or change the
/// configuration; refused for every actor, as a tool or anywhere in a
/// command.
pub const HOST_PROGRAMS: [&str; 1] = ["gatehouse"];

/// Whether `tool` is the host's own program (by name or any path).
pub fn is_host_program(tool: &str) -> bool {
    HOST_PROGRAMS.contains(&basename(tool))
}

/// The directories a bare program name is found in, in this order. The
/// exec layer resolves a granted name there (never through `PATH`), and a
/// full path names a granted tool only when it is one of these joined with
/// the tool's name (`/usr/bin/ls` for `ls`; never `/tmp/evil/ls`).
pub const PROGRAM_DIRS: [&str; 3] = ["/usr/local/bin", "/usr/bin", "/bin"];

/// Variables a command may set for the program it runs (`LANG=C sort`,
/// `env TZ=UTC date`), besides `LC_*`: they change how a program formats
/// its output, not what it runs. Any other (`PATH`, `LD_PRELOAD`,
/// `BASH_ENV`, `GIT_PAGER`, `HOME`, …) can make a granted program load or
/// start another, and is refused.
pub const SAFE_VARIABLES: [&str; 7] = [
    "LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR", "COLUMNS", "LINES",
];

/// A program found in one command segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The program as written (may be a full path).
    pub program: String,
    /// Its basename.
    pub name: String,
    /// The arguments after the program, as the shell would split them.
    pub args: Vec<String>,
    /// Wrappers that must be granted in their own right (`sudo`, `doas`).
    pub privileged_wrappers: Vec<String>,
}

/// The split and looked-through form of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenedCommand {
    /// The program each segment runs, in order (wrappers looked through).
    pub invocations: Vec<Invocation>,
    /// The first thing the screen could not read exactly as a shell would
    /// (an unknown wrapper option, a word that may expand before the
    /// program, an assignment to an unsafe variable), if any: layer 2
    /// refuses the command for it.
    pub unclear: Option<String>,
}

/// Why a command could not be split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError(pub &'static str);

/// The basename of a program path (`/usr/bin/env` → `env`).
pub fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// The name of `program` when it is written as a bare name, or as one of
/// [`PROGRAM_DIRS`] joined with a name (`/usr/bin/ls` → `ls`); `None` for
/// any other path (`/tmp/evil/ls`, `./ls`, `~/ls`, `/usr/bin/../bin/ls`).
pub fn standard_name(program: &str) -> Option<&str> {
    let name = basename(program);
    if name.is_empty() {
        return None;
    }
    if name.len() == program.len() {
        return Some(name);
    }
    let dir = program[..program.len() - name.len()].strip_suffix('/')?;
    PROGRAM_DIRS.contains(&dir).then_some(name)
}

/// Whether `tool` is a raw runtime tool (by name or full path).
pub fn is_raw_runtime_tool(tool: &str) -> bool {
    RAW_RUNTIME_TOOLS.contains(&basename(tool))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<Vec<String>> {
        split_segments(s).unwrap()
    }

    #[test]
    fn splits_on_operators_outside_quotes() {
        assert_eq!(
            words("ls; herdr run"),
            vec![vec!["ls"], vec!["herdr", "run"]]
        );
        assert_eq!(
            words("a && b || c | d & e"),
            vec![vec!["a"], vec!["b"], vec!["c"], vec!["d"], vec!["e"]]
        );
        assert_eq!(
            words("echo 'a;b' \"c|d\""),
            vec![vec!["echo", "a;b", "c|d"]]
        );
        assert_eq!(words("echo a\\;b"), vec![vec!["echo", "a;b"]]);
        assert!(split_segments("echo 'open").is_err());
    }

    #[test]
    fn looks_through_wrappers() {
        let s = screen("/usr/bin/env FOO=1 spawn_agent x").unwrap();
        assert_eq!(s.invocations[0].name, "spawn_agent");
        let s = screen("A=1 B=2 sudo -u root command -p nice -n 5 /opt/bin/herdr").unwrap();
        assert_eq!(s.invocations[0].name, "herdr");
        assert_eq!(s.invocations[0].privileged_wrappers, vec!["sudo"]);
        let s = screen("timeout 5 ls -l").unwrap();
        assert_eq!(s.invocations[0].name, "ls");
        assert_eq!(s.invocations[0].args, vec!["-l"]);
    }

    #[test]
    fn raw_runtime_is_found_anywhere() {
        assert_eq!(
            invokes_raw_runtime("ls; herdr run").as_deref(),
            Some("herdr")
        );
        assert_eq!(
            invokes_raw_runtime("/usr/bin/env FOO=1 spawn_agent").as_deref(),
            Some("spawn_agent")
        );
        assert_eq!(
            invokes_raw_runtime("echo 'x; paseo").as_deref(),
            Some("paseo")
        );
        assert_eq!(invokes_raw_runtime("echo herdr"), None);
        assert!(is_raw_runtime_tool("/usr/local/bin/create_agent"));
    }

    #[test]
    fn indirect_constructs() {
        for cmd in [
            "echo $(id)",
            "echo `id`",
            "diff <(ls a) <(ls b)",
            "bash -c 'ls'",
            "sh -ec ls",
            "python -c 'print(1)'",
            "python3.11 -c x",
            "node -e 1",
            "perl -ne 'print'",
            "ruby -e 1",
            "find . | xargs rm",
            "echo aGk= | base64 -d",
            "xxd -r -p f",
            "eval ls",
            "env -S 'ls -l'",
            "echo 'unterminated",
        ] {
            assert!(indirect_construct(cmd).is_some(), "{cmd}");
        }
        for cmd in [
            "ls -la",
            "git commit -m 'a;b'",
            "bash script.sh",
            "python3 tool.py --count 3",
            "cat /etc/hostname",
        ] {
            assert_eq!(indirect_construct(cmd), None, "{cmd}");
        }
    }
}
