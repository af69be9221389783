//! The lexer: a command split into segments of words as bash would split
//! it, or refused where bash would read it differently from any simple
//! split (quotes left open, ANSI-C quoting, a comment, a control
//! character, a subshell).

use std::iter::Peekable;
use std::str::Chars;

use super::LexError;

/// One word as the lexer read it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Word {
    pub(super) text: String,
    /// The word holds an unquoted `$`, glob, brace, tilde, `!` or
    /// redirection character, or a `$` in double quotes: the shell may turn
    /// it into no word, several words or another word.
    pub(super) expands: bool,
    /// The word is `NAME=…` with the name and the `=` unquoted, which bash
    /// reads as an assignment when it comes before the program.
    pub(super) assignment: bool,
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
pub(super) fn lex(command: &str) -> Result<Vec<Vec<Word>>, LexError> {
    let mut segments = Vec::new();
    let mut words: Vec<Word> = Vec::new();
    let mut w = Partial::default();
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_control() => return Err(LexError("a control character")),
            '\'' => single_quoted(&mut chars, &mut w)?,
            '"' => double_quoted(&mut chars, &mut w)?,
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

/// The rest of a single-quoted string, the opening quote read: every
/// character stays as it is.
fn single_quoted(chars: &mut Peekable<Chars<'_>>, w: &mut Partial) -> Result<(), LexError> {
    w.quote();
    loop {
        match chars.next() {
            Some('\'') => return Ok(()),
            Some(ch) => w.push(ch),
            None => return Err(LexError("an unterminated single quote")),
        }
    }
}

/// The rest of a double-quoted string, the opening quote read.
fn double_quoted(chars: &mut Peekable<Chars<'_>>, w: &mut Partial) -> Result<(), LexError> {
    w.quote();
    loop {
        match chars.next() {
            Some('"') => return Ok(()),
            // Inside double quotes a backslash escapes only
            // these; before anything else it stays.
            Some('\\') => match chars.next() {
                Some(ch @ ('$' | '`' | '"' | '\\')) => w.push(ch),
                Some(ch) if ch.is_control() => return Err(LexError("a control character")),
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

pub(super) fn is_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
