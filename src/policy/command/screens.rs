//! The screens over a looked-through command: layer 1 (a raw runtime
//! tool or the host's own program anywhere in it) and layer 2 (anything
//! that makes it indirect: `eval`, `sh -c`, a program's option that runs
//! another).

use super::wrappers::screen;
use super::{basename, Invocation, LexError, ScreenedCommand, HOST_PROGRAMS, RAW_RUNTIME_TOOLS};

/// The host's own program if `command` runs it anywhere (looked through
/// wrappers and paths; when the command cannot be split, any word).
pub fn host_program_in(
    command: &str,
    screened: &Result<ScreenedCommand, LexError>,
) -> Option<String> {
    program_in(command, screened, &HOST_PROGRAMS)
}

/// Programs whose whole purpose is to run text as a command or decode it.
const INDIRECT_PROGRAMS: [&str; 5] = ["eval", "base64", "xxd", "xargs", "source"];

const SHELLS: [&str; 9] = [
    "sh", "bash", "zsh", "dash", "ksh", "ash", "fish", "csh", "tcsh",
];

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
    program_in(command, screened, &RAW_RUNTIME_TOOLS)
}

/// The first of `names` that `command` runs (looked through wrappers and
/// paths); when the command cannot be split, the first of them that is
/// any word's basename, so a stray quote cannot hide one.
fn program_in(
    command: &str,
    screened: &Result<ScreenedCommand, LexError>,
    names: &[&str],
) -> Option<String> {
    match screened {
        Ok(screened) => screened
            .invocations
            .iter()
            .find(|inv| names.contains(&inv.name.as_str()))
            .map(|inv| inv.name.clone()),
        Err(_) => command
            .split(|c: char| c.is_whitespace() || c.is_control() || ";&|'\"`()#".contains(c))
            .map(basename)
            .find(|w| names.contains(w))
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
