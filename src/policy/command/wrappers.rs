//! Looking through a segment: leading assignments and the wrappers
//! (`env`, `sudo`, `timeout`, …, each with the options it really takes)
//! peeled off to find the program that really runs.

use super::lexer::{is_name, lex, Word};
use super::{basename, standard_name, Invocation, LexError, ScreenedCommand, SAFE_VARIABLES};

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

/// The index of the first word after `wrapper`'s options, which start at
/// `words[i]`; what the screen cannot read is noted.
fn after_options(
    words: &[Word],
    mut i: usize,
    wrapper: &Wrapper,
    note: &mut dyn FnMut(String),
) -> usize {
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
        let takes_next = option_takes_next(wrapper, t, note);
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
    i
}

/// Whether option word `t` of `wrapper` takes the next word as its
/// argument; an option the screen does not read is noted.
fn option_takes_next(wrapper: &Wrapper, t: &str, note: &mut dyn FnMut(String)) -> bool {
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
    takes_next
}

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
pub(super) fn look_through(words: &[Word], unclear: &mut Option<String>) -> Option<Invocation> {
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
        i = after_options(words, i, wrapper, &mut note);
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
