//! The string and error helpers of every message: an OS message in
//! lowercase, an error with its causes on one line, an I/O error kept as
//! a cause, and text made safe to show on a terminal.

use std::borrow::Cow;

/// Lowercases the first letter of an OS error message (`No such file…`).
pub fn lower(msg: &str) -> String {
    let mut chars = msg.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// An error and its causes, one line: each message joined by `: ` (what a
/// person reads; the causes themselves stay on the error).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        // A message that already ends with its cause's text is not
        // repeated (an error that both shows and keeps its cause).
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = c.source();
    }
    out
}

/// An I/O error kept whole as the cause of another error (its kind and
/// errno stay readable), shown in lowercase as every gatehouse message is.
#[derive(Debug)]
pub struct IoCause(pub std::io::Error);

impl std::fmt::Display for IoCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&lower(&self.0.to_string()))
    }
}

impl std::error::Error for IoCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl From<std::io::Error> for IoCause {
    fn from(e: std::io::Error) -> IoCause {
        IoCause(e)
    }
}

/// Any error kept whole as the cause of another, shown in lowercase as
/// [`IoCause`] shows an I/O error (SQLite's messages, a library's).
#[derive(Debug)]
pub struct Lowered<E>(pub E);

impl<E: std::fmt::Display> std::fmt::Display for Lowered<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&lower(&self.0.to_string()))
    }
}

impl<E: std::error::Error> std::error::Error for Lowered<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Whether `c` must not reach a terminal as it is: a control character
/// (C0, DEL, C1: escape sequences, carriage return, backspace, newline) or
/// a bidirectional formatting character (which reorders what is shown).
fn unprintable(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` as one line a person can read and no one can drive a terminal
/// with: every control and bidirectional formatting character escaped
/// the way Rust writes it (`\n`, `\t`, `\u{1b}`, `\u{202e}`), everything
/// else as it is. Borrowed when nothing needs escaping. The one escaper
/// of guest text (the terminal module shows it as `terminal::shown`).
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unprintable) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unprintable(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_escapes_controls_and_bidi_and_keeps_the_rest() {
        assert_eq!(printable("plain é → ok"), "plain é → ok");
        assert!(matches!(printable("plain"), Cow::Borrowed(_)));
        assert_eq!(
            printable("\x1b[2J\ndecision\r\t\u{7f}\u{9b}x\u{202e}y"),
            "\\u{1b}[2J\\ndecision\\r\\t\\u{7f}\\u{9b}x\\u{202e}y"
        );
    }

    #[test]
    fn lower_and_chain() {
        assert_eq!(lower("No such file"), "no such file");
        assert_eq!(lower(""), "");
        #[derive(Debug, thiserror::Error)]
        #[error("cannot read `x`")]
        struct Outer(#[source] IoCause);
        let e = Outer(IoCause(std::io::Error::from(std::io::ErrorKind::NotFound)));
        assert_eq!(chain(&e), "cannot read `x`: entity not found");
    }
}

/// `url` with its password replaced by `***`.
pub fn redact_url(url: &str) -> String {
    // postgres://user:password@host/db: the password is between the first
    // ':' after the scheme and the last '@' of the authority.
    let Some(rest_at) = url.find("://").map(|i| i + 3) else {
        // The key=value form: `password=…` up to the next space.
        return url
            .split(' ')
            .map(|part| match part.split_once('=') {
                Some(("password", _)) => "password=***",
                _ => part,
            })
            .collect::<Vec<_>>()
            .join(" ");
    };
    let authority_end = url[rest_at..]
        .find(['/', '?'])
        .map_or(url.len(), |i| rest_at + i);
    let authority = &url[rest_at..authority_end];
    match (authority.rfind('@'), authority.find(':')) {
        (Some(at), Some(colon)) if colon < at => format!(
            "{}{}:***{}",
            &url[..rest_at],
            &authority[..colon],
            &url[rest_at + at..]
        ),
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod redact_tests {
    use super::redact_url as redact;

    #[test]
    fn a_password_never_shows_in_a_redacted_database_url() {
        assert_eq!(
            redact("postgres://node:s3cret@db.internal:5432/gh?sslmode=require"),
            "postgres://node:***@db.internal:5432/gh?sslmode=require"
        );
        assert_eq!(
            redact("postgres://node@127.0.0.1:5432/gh"),
            "postgres://node@127.0.0.1:5432/gh"
        );
        assert_eq!(redact("host=/tmp user=x"), "host=/tmp user=x");
        assert_eq!(
            redact("host=db user=x password=s3cret dbname=gh"),
            "host=db user=x password=*** dbname=gh"
        );
        assert_eq!(redact("postgresql://a:b:c@h/db"), "postgresql://a:***@h/db");
    }
}

/// A positive duration of one unit — `30s`, `10m`, `2h`, `7d` — in
/// seconds, or what is wrong with it. No spaces, signs, fractions or
/// combined units.
pub fn duration_secs(s: &str) -> Result<i64, &'static str> {
    let Some(unit) = s.chars().last() else {
        return Err("it is empty");
    };
    let per_unit: i64 = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86400,
        _ => return Err("expected a number followed by `s`, `m`, `h` or `d`"),
    };
    let digits = &s[..s.len() - 1];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a number followed by `s`, `m`, `h` or `d`");
    }
    let n: i64 = digits.parse().map_err(|_| "it is too large")?;
    if n == 0 {
        return Err("it must be greater than zero");
    }
    n.checked_mul(per_unit).ok_or("it is too large")
}
