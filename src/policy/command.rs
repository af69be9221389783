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

/// The host's own program if `command` runs it anywhere (looked through
/// wrappers and paths; when the command cannot be split, any word).
pub fn host_program_in(
    command: &str,
    screened: &Result<ScreenedCommand, LexError>,
) -> Option<String> {
    match screened {
        Ok(screened) => screened
            .invocations
            .iter()
            .find(|inv| HOST_PROGRAMS.contains(&inv.name.as_str()))
            .map(|inv| inv.name.clone()),
        Err(_) => command
            .split(|c: char| c.is_whitespace() || c.is_control() || ";&|'\"`()#".contains(c))
            .map(basename)
            .find(|w| HOST_PROGRAMS.contains(w))
            .map(str::to_string),
    }
}

/// Programs whose whole purpose is to run text as a command or decode it.
const INDIRECT_PROGRAMS: [&str; 5] = ["eval", "base64", "xxd", "xargs", "source"];

const SHELLS: [&str; 9] = [
    "sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "csh", "tcsh",
];

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
    pub args: Vec<String>,
    /// Wrappers that must be granted in their own right (`sudo`, `doas`).
    pub privileged_wrappers: Vec<String>,
}

/// The split and looked-through form of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenedCommand {
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

/// One word as the lexer read it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Word {
    text: String,
    /// The word holds an unquoted `$`, glob, brace, tilde, `!` or
    /// redirection character, or a `$` in double quotes: the shell may turn
    /// it into no word, several words or another word.
    expands: bool,
    /// The word is `NAME=…` with the name and the `=` unquoted, which bash
    /// reads as an assignment when it comes before the program.
    assignment: bool,
}

/// The word being read.
#[derive(Default)]
struct Partial {
    word: Word,
    in_word: bool,
    eq_seen: bool,
    quoted_before_eq: bool,
}

impl Partial {
    fn push(&mut self, c: char) {
        self.in_word = true;
        self.word.text.push(c);
    }

    /// A quote or an escape starts here.
    fn quote(&mut self) {
        self.in_word = true;
        if !self.eq_seen {
            self.quoted_before_eq = true;
        }
    }

    fn end(&mut self, words: &mut Vec<Word>) {
        if self.in_word {
            let mut p = std::mem::take(self);
            p.word.assignment = p.eq_seen && !p.quoted_before_eq && is_assignment(&p.word.text);
            words.push(p.word);
        }
    }
}

/// Characters that make an unquoted word subject to expansion (or a
/// redirection) in bash.
const EXPANDING: &str = "$*?[]{}~<>!";

/// Splits a command into segments of words, as bash would, or refuses it.
fn lex(command: &str) -> Result<Vec<Vec<Word>>, LexError> {
    let mut segments = Vec::new();
    let mut words: Vec<Word> = Vec::new();
    let mut w = Partial::default();
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_control() => return Err(LexError("a control character")),
            '\'' => {
                w.quote();
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => w.push(ch),
                        None => return Err(LexError("an unterminated single quote")),
                    }
                }
            }
            '"' => {
                w.quote();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        // Inside double quotes a backslash escapes only
                        // these; before anything else it stays.
                        Some('\\') => match chars.next() {
                            Some(ch @ ('$' | '`' | '"' | '\\')) => w.push(ch),
                            Some(ch) if ch.is_control() => {
                                return Err(LexError("a control character"))
                            }
                            Some(ch) => {
                                w.push('\\');
                                w.push(ch);
                            }
                            None => return Err(LexError("an unterminated double quote")),
                        },
                        Some('$') => {
                            w.word.expands = true;
                            w.push('$');
                        }
                        Some(ch) if ch.is_control() => return Err(LexError("a control character")),
                        Some(ch) => w.push(ch),
                        None => return Err(LexError("an unterminated double quote")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some(ch) if ch.is_control() => return Err(LexError("a control character")),
                Some(ch) => {
                    w.quote();
                    w.push(ch);
                }
                None => return Err(LexError("a trailing backslash")),
            },
            '$' if matches!(chars.peek(), Some('\'' | '"')) => {
                return Err(LexError("ANSI-C or locale quoting (`$'…'`, `$\"…\"`)"))
            }
            '#' if !w.in_word => return Err(LexError("a `#` that starts a comment")),
            '(' | ')' => {
                return Err(LexError(
                    "a `(` or `)` (a subshell, a function or an array)",
                ))
            }
            ';' | '&' | '|' => {
                // `&&`, `||`, `|&` and the single forms all end a segment.
                if matches!(chars.peek(), Some('&' | '|')) {
                    chars.next();
                }
                w.end(&mut words);
                if !words.is_empty() {
                    segments.push(std::mem::take(&mut words));
                }
            }
            ' ' => w.end(&mut words),
            c => {
                if EXPANDING.contains(c) {
                    w.word.expands = true;
                }
                if c == '=' && !w.eq_seen {
                    w.eq_seen = true;
                }
                w.push(c);
            }
        }
    }
    w.end(&mut words);
    if !words.is_empty() {
        segments.push(words);
    }
    Ok(segments)
}

/// Splits a command into segments of words, honouring quotes and escapes.
pub fn split_segments(command: &str) -> Result<Vec<Vec<String>>, LexError> {
    Ok(lex(command)?
        .into_iter()
        .map(|seg| seg.into_iter().map(|w| w.text).collect())
        .collect())
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => is_name(name),
        None => false,
    }
}

fn is_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Why setting `NAME=…` (the text of an assignment) is refused, if it is.
fn unsafe_assignment(text: &str) -> Option<String> {
    let name = text.split_once('=').map_or(text, |(n, _)| n);
    let safe = SAFE_VARIABLES.contains(&name)
        || name
            .strip_prefix("LC_")
            .is_some_and(|rest| !rest.is_empty() && is_name(rest));
    (!safe).then(|| format!("an assignment to `{name}`, which can change what a program runs"))
}

/// The options a wrapper takes, as its own parser reads them (all stop at
/// the first word that is not an option).
struct Wrapper {
    name: &'static str,
    /// A shell builtin or keyword: only its bare name is the wrapper.
    builtin: bool,
    /// Must be granted in its own right.
    privileged: bool,
    short_flags: &'static str,
    short_with_arg: &'static str,
    long_flags: &'static [&'static str],
    long_with_arg: &'static [&'static str],
    /// Takes `NAME=value` words before the program (`env`, `sudo`).
    assignments: bool,
    /// `-5` is an option (`nice`).
    numeric: bool,
    /// One operand before the program (`timeout`'s duration).
    operand: bool,
}

const fn wrapper(name: &'static str) -> Wrapper {
    Wrapper {
        name,
        builtin: false,
        privileged: false,
        short_flags: "",
        short_with_arg: "",
        long_flags: &[],
        long_with_arg: &[],
        assignments: false,
        numeric: false,
        operand: false,
    }
}

const WRAPPERS: [Wrapper; 11] = [
    Wrapper {
        short_flags: "i0v",
        short_with_arg: "uC",
        long_flags: &["ignore-environment", "null", "debug"],
        long_with_arg: &["unset", "chdir"],
        assignments: true,
        ..wrapper("env")
    },
    Wrapper {
        builtin: true,
        short_flags: "pvV",
        ..wrapper("command")
    },
    Wrapper {
        builtin: true,
        short_flags: "cl",
        short_with_arg: "a",
        ..wrapper("exec")
    },
    Wrapper {
        builtin: true,
        ..wrapper("builtin")
    },
    Wrapper {
        builtin: true,
        short_flags: "p",
        ..wrapper("time")
    },
    wrapper("nohup"),
    Wrapper {
        short_with_arg: "n",
        long_with_arg: &["adjustment"],
        numeric: true,
        ..wrapper("nice")
    },
    Wrapper {
        short_flags: "fv",
        short_with_arg: "sk",
        long_flags: &["foreground", "preserve-status", "verbose"],
        long_with_arg: &["signal", "kill-after"],
        operand: true,
        ..wrapper("timeout")
    },
    Wrapper {
        short_flags: "cfw",
        long_flags: &["ctty", "fork", "wait"],
        ..wrapper("setsid")
    },
    Wrapper {
        privileged: true,
        short_flags: "nH",
        short_with_arg: "ug",
        long_flags: &["non-interactive"],
        long_with_arg: &["user", "group"],
        assignments: true,
        ..wrapper("sudo")
    },
    Wrapper {
        privileged: true,
        short_flags: "n",
        short_with_arg: "u",
        ..wrapper("doas")
    },
];

/// The wrapper `word` names, if it names one: by its bare name, or (for one
/// that is not a shell builtin) by its path in [`PROGRAM_DIRS`].
fn wrapper_of(word: &str) -> Option<&'static Wrapper> {
    let name = standard_name(word)?;
    WRAPPERS
        .iter()
        .find(|w| w.name == name && (!w.builtin || word == name))
}

/// Looks through one segment: the program it runs, with `unclear` set to
/// the first thing in it the screen could not read exactly. Best effort
/// past that point (layer 1 still looks for raw runtimes in it).
fn look_through(words: &[Word], unclear: &mut Option<String>) -> Option<Invocation> {
    let mut note = |why: String| {
        if unclear.is_none() {
            *unclear = Some(why);
        }
    };
    let mut i = 0;
    while let Some(w) = words.get(i).filter(|w| w.assignment) {
        if let Some(why) = unsafe_assignment(&w.text) {
            note(why);
        }
        i += 1;
    }
    let mut privileged = Vec::new();
    loop {
        let first = words.get(i)?;
        if first.expands {
            note(format!(
                "`{}`, a word the shell may expand into other words before the program is known",
                first.text
            ));
        }
        let name = basename(&first.text);
        let Some(wrapper) = wrapper_of(&first.text) else {
            return Some(Invocation {
                program: first.text.clone(),
                name: name.to_string(),
                args: words[i + 1..].iter().map(|w| w.text.clone()).collect(),
                privileged_wrappers: privileged,
            });
        };
        if wrapper.privileged {
            privileged.push(wrapper.name.to_string());
        }
        let start = i;
        i += 1;
        // The wrapper's options.
        while let Some(w) = words.get(i) {
            let t = w.text.as_str();
            if w.expands {
                note(format!(
                    "`{t}`, a word the shell may expand into other words before the program is known"
                ));
            }
            if t == "--" {
                i += 1;
                break;
            }
            if t == "-" && wrapper.name == "env" {
                i += 1;
                continue;
            }
            if !t.starts_with('-') || t == "-" {
                break;
            }
            let mut takes_next = false;
            if let Some(long) = t.strip_prefix("--") {
                let (opt, inline) = match long.split_once('=') {
                    Some((o, v)) => (o, Some(v)),
                    None => (long, None),
                };
                if wrapper.long_with_arg.contains(&opt) {
                    takes_next = inline.is_none();
                } else if !(wrapper.long_flags.contains(&opt) && inline.is_none()) {
                    note(format!(
                        "`{} {t}`, an option the screen does not read",
                        wrapper.name
                    ));
                }
            } else if !(wrapper.numeric && t[1..].bytes().all(|b| b.is_ascii_digit())) {
                let mut letters = t[1..].chars();
                while let Some(l) = letters.next() {
                    if wrapper.short_flags.contains(l) {
                        continue;
                    }
                    if wrapper.short_with_arg.contains(l) {
                        takes_next = letters.as_str().is_empty();
                    } else {
                        note(format!(
                            "`{} {t}`, an option the screen does not read",
                            wrapper.name
                        ));
                    }
                    break;
                }
            }
            i += 1;
            if takes_next {
                match words.get(i) {
                    Some(arg) if arg.expands => note(format!(
                        "`{}`, a word the shell may expand into other words before the program is known",
                        arg.text
                    )),
                    Some(_) => {}
                    None => note(format!("`{} {t}` without its argument", wrapper.name)),
                }
                i += 1;
            }
        }
        if wrapper.assignments {
            while let Some(w) = words.get(i).filter(|w| w.text.contains('=')) {
                if w.expands {
                    note(format!(
                        "`{}`, a word the shell may expand into other words before the program is known",
                        w.text
                    ));
                }
                if let Some(why) = unsafe_assignment(&w.text) {
                    note(why);
                }
                i += 1;
            }
        }
        if wrapper.operand && i < words.len() {
            if words[i].expands {
                note(format!(
                    "`{}`, a word the shell may expand into other words before the program is known",
                    words[i].text
                ));
            }
            i += 1;
        }
        if i >= words.len() {
            // The wrapper starts nothing else: it is the program.
            return Some(Invocation {
                program: words[start].text.clone(),
                name: wrapper.name.to_string(),
                args: words[start + 1..].iter().map(|w| w.text.clone()).collect(),
                privileged_wrappers: privileged,
            });
        }
    }
}

/// Splits and looks through a command.
pub fn screen(command: &str) -> Result<ScreenedCommand, LexError> {
    let segments = lex(command)?;
    let mut unclear = None;
    let invocations = segments
        .iter()
        .filter_map(|s| look_through(s, &mut unclear))
        .collect();
    Ok(ScreenedCommand {
        invocations,
        unclear,
    })
}

/// Layer 1: whether any segment of `command` runs a raw runtime tool. An
/// unsplittable command is scanned word by word instead, so a stray quote
/// cannot hide `spawn_agent` from this layer.
pub fn invokes_raw_runtime(command: &str) -> Option<String> {
    raw_runtime_in(command, &screen(command))
}

/// [`invokes_raw_runtime`] over an already screened command.
pub fn raw_runtime_in(
    command: &str,
    screened: &Result<ScreenedCommand, LexError>,
) -> Option<String> {
    match screened {
        Ok(screened) => screened
            .invocations
            .iter()
            .find(|inv| RAW_RUNTIME_TOOLS.contains(&inv.name.as_str()))
            .map(|inv| inv.name.clone()),
        Err(_) => command
            .split(|c: char| c.is_whitespace() || c.is_control() || ";&|'\"`()#".contains(c))
            .map(basename)
            .find(|w| RAW_RUNTIME_TOOLS.contains(w))
            .map(str::to_string),
    }
}

/// Layer 2: the first construct that makes `command` indirect, if any.
pub fn indirect_construct(command: &str) -> Option<String> {
    indirect_in(command, &screen(command))
}

/// [`indirect_construct`] over an already screened command.
pub fn indirect_in(command: &str, screened: &Result<ScreenedCommand, LexError>) -> Option<String> {
    if let Some(c) = command.chars().find(|c| c.is_control()) {
        return Some(format!("a control character (`{}`)", c.escape_default()));
    }
    for marker in ["`", "$(", "<(", ">("] {
        if command.contains(marker) {
            return Some(format!("`{marker}`"));
        }
    }
    let screened = match screened {
        Ok(s) => s,
        Err(LexError(why)) => return Some(format!("a command that cannot be split ({why})")),
    };
    if let Some(why) = &screened.unclear {
        return Some(why.clone());
    }
    for inv in &screened.invocations {
        if let Some(why) = indirect_invocation(inv) {
            return Some(why);
        }
    }
    None
}

fn indirect_invocation(inv: &Invocation) -> Option<String> {
    let name = inv.name.as_str();
    if INDIRECT_PROGRAMS.contains(&name) {
        return Some(format!("`{name}`"));
    }
    let has_flag = |flags: &[&str], letters: &[char]| {
        inv.args.iter().any(|a| {
            flags.contains(&a.as_str())
                || (a.starts_with('-')
                    && !a.starts_with("--")
                    && a[1..].chars().any(|c| letters.contains(&c)))
        })
    };
    let python = name == "python"
        || name
            .strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'));
    let flagged = if SHELLS.contains(&name) || python {
        has_flag(&["-c"], &['c'])
    } else if matches!(name, "node" | "nodejs" | "deno" | "bun") {
        has_flag(&["--eval", "--print", "eval"], &['e', 'p', 'c'])
    } else if name == "perl" {
        has_flag(&[], &['e', 'E'])
    } else if name == "ruby" {
        has_flag(&[], &['e'])
    } else {
        return runs_programs(inv).map(|opt| format!("`{name} {opt}`, which runs another program"));
    };
    flagged.then(|| {
        let flag = inv
            .args
            .iter()
            .find(|a| a.starts_with('-') || *a == "eval")
            .cloned()
            .unwrap_or_default();
        format!("`{name} {flag}`")
    })
}

/// Defence in depth: the option of a well-known program that makes it
/// start another program, if `inv` uses one. Not complete, and not what
/// holds: the OS sandbox of `code:exec` lets a command execute only its
/// granted programs.
fn runs_programs(inv: &Invocation) -> Option<String> {
    let args = &inv.args;
    let any = |pred: &dyn Fn(&str) -> bool| args.iter().find(|a| pred(a)).cloned();
    match inv.name.as_str() {
        "find" => any(&|a| matches!(a, "-exec" | "-execdir" | "-ok" | "-okdir")),
        "git" => {
            // Global options before the subcommand: `-c key=value` can
            // set a pager, an editor, an alias to `!cmd`, a hook path.
            let mut i = 0;
            while let Some(a) = args.get(i) {
                if a == "-c"
                    || a.starts_with("-c") && a.len() > 2
                    || a.starts_with("--config-env")
                    || a.starts_with("--exec-path")
                {
                    return Some(a.clone());
                }
                if !a.starts_with('-') {
                    break;
                }
                if a == "-C" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" {
                    i += 1;
                }
                i += 1;
            }
            any(&|a| {
                a.starts_with("--upload-pack")
                    || a.starts_with("--receive-pack")
                    || a.starts_with("--exec")
                    || a.starts_with("ext::")
            })
        }
        "awk" | "gawk" | "mawk" | "nawk" => any(&|a| a.contains("system") || a.contains('|')),
        "tar" => any(&|a| {
            a.starts_with("--to-command")
                || a.starts_with("--use-compress-program")
                || a.starts_with("--checkpoint-action")
                || a.starts_with("--info-script")
                || a.starts_with("--new-volume-script")
                || a.starts_with("--rsh-command")
                || a == "-I"
                || a == "-F"
        }),
        "rsync" => any(&|a| a == "-e" || a.starts_with("--rsh") || a.starts_with("--rsync-path")),
        "ssh" | "scp" | "sftp" => any(&|a| {
            let a = a.to_ascii_lowercase();
            a.contains("proxycommand")
                || a.contains("localcommand")
                || a.contains("knownhostscommand")
        }),
        _ => None,
    }
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
