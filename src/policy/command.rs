//! Screening of shell commands for the `tool` request kind.
//!
//! A command is split into segments on `;`, `&&`, `||`, `|`, `&` and
//! newlines (outside quotes). Each segment is looked through: leading
//! `VAR=value` assignments, wrappers (`env`, `command`, `sudo`, `exec`,
//! `nohup`, `nice`, `time`, `timeout`, `setsid`, `doas`) and full paths are
//! peeled off to find the program that really runs. Constructs whose meaning
//! cannot be read off the text (`eval`, backticks, `$(…)`, process
//! substitution, `base64`, `xxd`, `sh -c`, `python -c`, `xargs`, …) are
//! refused rather than parsed: a half-right parser is worse than none.

/// Tools that start another agent runtime; refused for every actor, whether
/// they are the tool's name or appear anywhere in its command.
pub const RAW_RUNTIME_TOOLS: [&str; 4] = ["herdr", "paseo", "create_agent", "spawn_agent"];

/// Programs whose whole purpose is to run text as a command or decode it.
const INDIRECT_PROGRAMS: [&str; 5] = ["eval", "base64", "xxd", "xargs", "source"];

const SHELLS: [&str; 9] = [
    "sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "csh", "tcsh",
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
    /// `env -S` or a similar wrapper that re-splits a string.
    pub resplits: bool,
}

/// The split and looked-through form of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenedCommand {
    pub invocations: Vec<Invocation>,
}

/// Why a command could not be split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError(pub &'static str);

/// The basename of a program path (`/usr/bin/env` → `env`).
pub fn basename(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// Whether `tool` is a raw runtime tool (by name or full path).
pub fn is_raw_runtime_tool(tool: &str) -> bool {
    RAW_RUNTIME_TOOLS.contains(&basename(tool))
}

/// Splits a command into segments of words, honouring quotes and escapes.
pub fn split_segments(command: &str) -> Result<Vec<Vec<String>>, LexError> {
    let mut segments = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars().peekable();
    let end_word = |words: &mut Vec<String>, word: &mut String, in_word: &mut bool| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Err(LexError("an unterminated single quote")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(ch) => word.push(ch),
                            None => return Err(LexError("a trailing backslash")),
                        },
                        Some(ch) => word.push(ch),
                        None => return Err(LexError("an unterminated double quote")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(ch) => {
                    in_word = true;
                    word.push(ch);
                }
                None => return Err(LexError("a trailing backslash")),
            },
            ';' | '\n' | '&' | '|' => {
                // `&&`, `||`, `|&` and the single forms all end a segment.
                if matches!(chars.peek(), Some('&') | Some('|')) {
                    chars.next();
                }
                end_word(&mut words, &mut word, &mut in_word);
                if !words.is_empty() {
                    segments.push(std::mem::take(&mut words));
                }
            }
            c if c.is_whitespace() => end_word(&mut words, &mut word, &mut in_word),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    end_word(&mut words, &mut word, &mut in_word);
    if !words.is_empty() {
        segments.push(words);
    }
    Ok(segments)
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            let mut bytes = name.bytes();
            matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
                && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }
        None => false,
    }
}

/// Peels assignments and wrappers off one segment.
fn look_through(words: &[String]) -> Option<Invocation> {
    let mut i = 0;
    let mut privileged = Vec::new();
    let mut resplits = false;
    loop {
        while i < words.len() && is_assignment(&words[i]) {
            i += 1;
        }
        let first = words.get(i)?;
        let name = basename(first);
        // Options of each wrapper that take a separate argument.
        let takes_arg: &[&str] = match name {
            "env" => &["-u", "--unset", "-C", "--chdir"],
            "command" | "exec" | "nohup" | "time" | "setsid" | "builtin" => &["-a"],
            "nice" => &["-n", "--adjustment"],
            "timeout" => &["-s", "--signal", "-k", "--kill-after"],
            "sudo" | "doas" => &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"],
            _ => {
                return Some(Invocation {
                    program: first.clone(),
                    name: name.to_string(),
                    args: words[i + 1..].to_vec(),
                    privileged_wrappers: privileged,
                    resplits,
                })
            }
        };
        if name == "sudo" || name == "doas" {
            privileged.push(name.to_string());
        }
        let wrapper = name;
        i += 1;
        while let Some(w) = words.get(i) {
            if w == "--" {
                i += 1;
                break;
            }
            if !w.starts_with('-') || w == "-" {
                break;
            }
            if wrapper == "env"
                && (w == "-S"
                    || w.starts_with("--split-string")
                    || (w.starts_with("-S") && w.len() > 2))
            {
                resplits = true;
            }
            if takes_arg.contains(&w.as_str()) {
                i += 1;
            }
            i += 1;
        }
        if wrapper == "env" {
            while i < words.len() && is_assignment(&words[i]) {
                i += 1;
            }
        }
        if wrapper == "timeout" && i < words.len() {
            // The duration.
            i += 1;
        }
        if resplits {
            return Some(Invocation {
                program: first.clone(),
                name: wrapper.to_string(),
                args: words[i..].to_vec(),
                privileged_wrappers: privileged,
                resplits,
            });
        }
    }
}

/// Splits and looks through a command.
pub fn screen(command: &str) -> Result<ScreenedCommand, LexError> {
    let segments = split_segments(command)?;
    Ok(ScreenedCommand {
        invocations: segments.iter().filter_map(|s| look_through(s)).collect(),
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
            .split(|c: char| c.is_whitespace() || ";&|'\"`()".contains(c))
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
    for marker in ["`", "$(", "<(", ">("] {
        if command.contains(marker) {
            return Some(format!("`{marker}`"));
        }
    }
    let screened = match screened {
        Ok(s) => s,
        Err(LexError(why)) => return Some(format!("a command that cannot be split ({why})")),
    };
    for inv in &screened.invocations {
        if let Some(why) = indirect_invocation(inv) {
            return Some(why);
        }
    }
    None
}

fn indirect_invocation(inv: &Invocation) -> Option<String> {
    let name = inv.name.as_str();
    if inv.resplits {
        return Some("`env -S`".into());
    }
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
        false
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
