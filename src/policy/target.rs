//! Target patterns and matching: path globs, hosts with an optional port,
//! exact names.
//!
//! A *pattern* is what a grant or a manifest declares (`/home/a/notes/**`,
//! `localhost:8080`, `HOME`). A *target* is what a request asks for: a
//! concrete path, host or name, or a narrower pattern (a manifest's declared
//! scope), in which case the pattern must *cover* every target it could name.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::registry::TargetKind;

/// Why a pattern or target was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// A capability that takes a target was given none.
    #[error("a target is required for a `{kind}` capability")]
    Missing {
        /// The target kind's name.
        kind: &'static str,
    },
    /// A capability whose target kind is `none` was given one.
    #[error("`{capability}` takes no target, got `{value}`")]
    Unexpected {
        /// The capability's name.
        capability: String,
        /// The target given.
        value: String,
    },
    /// A path glob that does not parse.
    #[error("malformed path glob `{value}`: {why}")]
    BadGlob {
        /// The glob as written.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A host or URL pattern that does not parse.
    #[error("malformed host `{value}`: {why}")]
    BadHost {
        /// The pattern as written.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An exact name with whitespace, control characters or wildcards.
    #[error("malformed name `{value}`: {why}")]
    BadName {
        /// The name as written.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// A validated target pattern of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum TargetPattern {
    /// An absolute path glob (`fs:read`, `fs:write`).
    PathGlob(PathGlob),
    /// A host pattern (`network:sites`), optionally `*.`-prefixed and with a port.
    Host(HostPattern),
    /// A `network:sites` URL pattern (`https://api.example.com/v1/**`).
    Url(super::http::UrlPattern),
    /// An exact name, no wildcards.
    Exact(String),
}

impl TargetPattern {
    /// Parses `value` as a pattern of `kind`. `TargetKind::None` takes no
    /// pattern at all and is rejected here; callers handle it first.
    pub fn parse(kind: TargetKind, value: &str) -> Result<TargetPattern, TargetError> {
        match kind {
            TargetKind::PathGlob => PathGlob::parse(value).map(TargetPattern::PathGlob),
            TargetKind::Host => match super::http::SitePattern::parse(value)? {
                super::http::SitePattern::Host(h) => Ok(TargetPattern::Host(h)),
                super::http::SitePattern::Url(u) => Ok(TargetPattern::Url(u)),
            },
            TargetKind::Exact => parse_exact(value).map(TargetPattern::Exact),
            TargetKind::None => Err(TargetError::Unexpected {
                capability: "this capability".into(),
                value: value.into(),
            }),
        }
    }

    /// Whether this pattern covers `target`: a concrete value, or a pattern
    /// of the same kind that names nothing this one does not.
    pub fn covers(&self, target: &str) -> bool {
        match self {
            TargetPattern::PathGlob(g) => g.covers(target),
            TargetPattern::Host(h) => super::http::host_covers(h, target),
            TargetPattern::Url(u) => super::http::url_covers(u, target),
            TargetPattern::Exact(name) => name == target,
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        match self {
            TargetPattern::PathGlob(g) => &g.source,
            TargetPattern::Host(h) => &h.source,
            TargetPattern::Url(u) => u.as_str(),
            TargetPattern::Exact(name) => name,
        }
    }
}

impl fmt::Display for TargetPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether the stored pattern text `pattern` of `kind` covers `target`,
/// without allocating for path globs and exact names (the grant-matching
/// hot path). A malformed pattern covers nothing.
pub fn pattern_covers(kind: TargetKind, pattern: &str, target: &str) -> bool {
    match kind {
        TargetKind::PathGlob => glob_covers(pattern, target),
        TargetKind::Exact => pattern == target && exact_problem(pattern).is_ok(),
        TargetKind::Host => {
            super::http::SitePattern::parse(pattern).is_ok_and(|h| h.covers(target))
        }
        TargetKind::None => false,
    }
}

fn exact_problem(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        return Err("it is empty");
    }
    if value.len() > 255 {
        return Err("it is longer than 255 bytes");
    }
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it contains whitespace or a control character");
    }
    if value.contains(['*', '?', '[', ']', '{', '}']) {
        return Err("an exact name cannot contain wildcards");
    }
    Ok(())
}

fn parse_exact(value: &str) -> Result<String, TargetError> {
    exact_problem(value).map_err(|why| TargetError::BadName {
        value: value.to_string(),
        why,
    })?;
    Ok(value.to_string())
}

/// An absolute path glob: `*` and `?` match within one segment, a `**`
/// segment matches zero or more whole segments. Brackets and braces are not
/// supported (rejected rather than half-implemented).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PathGlob {
    source: String,
}

impl TryFrom<String> for PathGlob {
    type Error = TargetError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        PathGlob::parse(&value)
    }
}

impl From<PathGlob> for String {
    fn from(g: PathGlob) -> String {
        g.source
    }
}

impl PathGlob {
    /// Checks `value` as a path glob; `BadGlob` says why it is not one.
    pub fn parse(value: &str) -> Result<PathGlob, TargetError> {
        glob_problem(value).map_err(|why| TargetError::BadGlob {
            value: value.to_string(),
            why,
        })?;
        Ok(PathGlob {
            source: value.to_string(),
        })
    }

    /// The glob as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The longest leading run of literal segments: the directory a sandbox
    /// preopens for this glob (`/ws/out/**` → `/ws/out`, `/ws/a.md` → `/ws`).
    pub fn literal_dir(&self) -> String {
        let segs: Vec<&str> = self.source.split('/').filter(|s| !s.is_empty()).collect();
        let mut literal: Vec<&str> = Vec::new();
        for (i, seg) in segs.iter().enumerate() {
            let is_last = i + 1 == segs.len();
            if seg.contains(['*', '?']) || is_last {
                break;
            }
            literal.push(seg);
        }
        if literal.is_empty() {
            "/".to_string()
        } else {
            format!("/{}", literal.join("/"))
        }
    }

    /// Whether the glob has no wildcard at all.
    pub fn is_literal(&self) -> bool {
        !self.source.contains(['*', '?'])
    }

    /// Whether the concrete absolute path `path` is matched by this glob.
    pub fn matches(&self, path: &str) -> bool {
        path.starts_with('/') && match_path(self.source.as_bytes(), path.as_bytes(), false)
    }

    /// Whether this glob covers `target`: a concrete path, or a glob that
    /// names only paths this glob names too (checked conservatively: a
    /// wildcard in `target` is only covered by a wildcard here).
    pub fn covers(&self, target: &str) -> bool {
        glob_covers(&self.source, target)
    }
}

/// Why `value` is not a valid path glob; allocation-free so that matching a
/// stored pattern can re-check it on the hot path.
fn glob_problem(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        return Err("it is empty");
    }
    if !value.starts_with('/') {
        return Err("it must be an absolute path");
    }
    if value.chars().any(char::is_control) {
        return Err("it contains a control character");
    }
    if value.contains(['[', ']', '{', '}']) {
        return Err("brackets and braces are not supported; use `*`, `?` and `**`");
    }
    if value != "/" {
        for seg in value[1..].split('/') {
            if seg.is_empty() {
                return Err("it has an empty segment (`//` or a trailing `/`)");
            }
            if seg == "." || seg == ".." {
                return Err("`.` and `..` segments are not allowed");
            }
            if seg.contains("**") && seg != "**" {
                return Err("`**` must be a whole segment");
            }
        }
    }
    Ok(())
}

/// Whether the glob text `pattern` covers `target` (see
/// [`PathGlob::covers`]) without building a [`PathGlob`]. A malformed
/// pattern covers nothing.
pub fn glob_covers(pattern: &str, target: &str) -> bool {
    // Cheap rejection first: every path the pattern names begins with its
    // literal directory prefix (`/w/dir9` of `/w/dir9/**`), so a target
    // that does not is refused before the pattern is even validated. Grant
    // matching tries many patterns against one target; most fail here.
    let literal = &pattern[..pattern.find(['*', '?']).unwrap_or(pattern.len())];
    let dir = literal.rfind('/').map_or("", |i| &literal[..i]);
    if !target.starts_with(dir) {
        return false;
    }
    if glob_problem(pattern).is_err() || !target.starts_with('/') {
        return false;
    }
    let symbolic = target.contains(['*', '?']) && glob_problem(target).is_ok();
    match_path(pattern.as_bytes(), target.as_bytes(), symbolic)
}

/// Splits off the first `/`-separated segment.
fn first_segment(s: &[u8]) -> (&[u8], &[u8]) {
    match s.iter().position(|&b| b == b'/') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &[]),
    }
}

fn trim_slashes(mut s: &[u8]) -> &[u8] {
    while let [b'/', rest @ ..] = s {
        s = rest;
    }
    s
}

/// Segment-wise matching of the text after the leading `/`; a `**`
/// segment swallows zero or more whole segments. Allocation-free.
fn match_path(pat: &[u8], path: &[u8], symbolic: bool) -> bool {
    let (pat, path) = (trim_slashes(pat), trim_slashes(path));
    if pat.is_empty() {
        return path.is_empty();
    }
    let (seg, rest) = first_segment(pat);
    if seg == b"**" {
        let mut remaining = path;
        loop {
            if match_path(rest, remaining, symbolic) {
                return true;
            }
            if remaining.is_empty() {
                return false;
            }
            remaining = trim_slashes(first_segment(remaining).1);
        }
    }
    if path.is_empty() {
        return false;
    }
    let (name, path_rest) = first_segment(path);
    // A `**` in a target glob is covered only by a `**` here.
    if symbolic && name == b"**" {
        return false;
    }
    match_segment(seg, name, symbolic) && match_path(rest, path_rest, symbolic)
}

/// Matches one segment. With `symbolic`, the name's own `*`/`?` are
/// wildcards that only a `*` (or, for `?`, a `?`) in the pattern covers.
///
/// Linear in the name for any pattern (the classic single-backtrack
/// walk: after a mismatch, only the last `*` takes one more byte), so a
/// guest's 1 MiB name against `*a*b*.txt` costs one pass, not one per
/// star.
fn match_segment(pat: &[u8], name: &[u8], symbolic: bool) -> bool {
    let one = |p: u8, n: u8| match p {
        b'?' => !(symbolic && n == b'*'),
        c => !(symbolic && (n == b'*' || n == b'?')) && n == c,
    };
    let (mut p, mut n) = (0, 0);
    // The pattern index after the last `*`, and the name index it took
    // up to.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pat.get(p) {
            Some(b'*') => {
                star = Some((p + 1, n));
                p += 1;
                continue;
            }
            Some(&c) if one(c, name[n]) => {
                p += 1;
                n += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((after, took)) => {
                p = after;
                n = took + 1;
                star = Some((after, took + 1));
            }
            None => return false,
        }
    }
    pat[p..].iter().all(|c| *c == b'*')
}

/// A host name, IPv4 or bracketed IPv6 literal, optionally `*.`-prefixed,
/// with an optional port. Without a port it covers every port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HostPattern {
    source: String,
    host: String,
    port: Option<u16>,
}

impl TryFrom<String> for HostPattern {
    type Error = TargetError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        HostPattern::parse(&value)
    }
}

impl From<HostPattern> for String {
    fn from(h: HostPattern) -> String {
        h.source
    }
}

impl HostPattern {
    /// Checks `value` as a host pattern and splits off its port; kept lowercase.
    pub fn parse(value: &str) -> Result<HostPattern, TargetError> {
        let (host, port) = split_host_port(value)?;
        Ok(HostPattern {
            source: value.to_ascii_lowercase(),
            host,
            port,
        })
    }

    /// The same hosts on any port (what a URL pattern, which keeps its
    /// port apart, matches hosts with).
    pub fn without_port(&self) -> HostPattern {
        HostPattern {
            source: self.host.clone(),
            host: self.host.clone(),
            port: None,
        }
    }

    /// The pattern as written (lowercase).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The host part, lowercase (`*.` kept for a wildcard pattern).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port, if the pattern names one; `None` covers every port.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// Whether `target` (`host` or `host:port`) is covered by this pattern.
    /// `target` may itself be a pattern (`*.a.example.com`, a manifest's
    /// narrower scope), covered only by a wildcard that covers every name
    /// it could match.
    pub fn covers(&self, target: &str) -> bool {
        // A bare IPv6 address (`::1`, as a resolver or a socket gives it).
        let split = match target.parse::<core::net::Ipv6Addr>() {
            Ok(_) => Ok((target.to_string(), None)),
            Err(_) => split_host_port(target),
        };
        let Ok((host, port)) = split else {
            return false;
        };
        let port_ok = match (self.port, port) {
            (None, _) => true,
            (Some(p), Some(q)) => p == q,
            (Some(_), None) => false,
        };
        let host_ok = match host.strip_prefix("*.") {
            // A symbolic target: only a wildcard over the same or a shorter
            // suffix covers it.
            Some(tail) => self
                .host
                .strip_prefix("*.")
                .is_some_and(|suffix| tail == suffix || name_under(tail, suffix)),
            None => self.matches_host(&host),
        };
        port_ok && host_ok
    }

    /// Whether the host part of this pattern names `name` (a host name or
    /// an IP literal, bare or in brackets; case is ignored; the port is not
    /// looked at). The one host matcher of gatehouse: grants, the gate and
    /// the network layer all ask it.
    ///
    /// An address only matches an IP-literal pattern, compared as
    /// addresses (`[::ffff:127.0.0.1]` is `127.0.0.1`); a name matches a
    /// pattern equal to it, or `*.suffix` when it has at least one more
    /// label than `suffix`. A wildcard never covers an address, nor a name
    /// whose last label is numeric (`0x7f.0.0.1`, `127.1`: resolvers read
    /// those as addresses).
    pub fn matches_host(&self, name: &str) -> bool {
        let pattern = self.host.as_str();
        match (parse_ip(name), parse_ip(pattern)) {
            (Some(ip), Some(granted)) => ip == granted,
            (Some(_), None) | (None, Some(_)) => false,
            (None, None) => match pattern.strip_prefix("*.") {
                None => pattern.eq_ignore_ascii_case(name),
                Some(suffix) => {
                    !numeric_last_label(name) && name_under(&name.to_ascii_lowercase(), suffix)
                }
            },
        }
    }
}

/// Whether `name` ends in `.suffix` with at least one label before it.
fn name_under(name: &str, suffix: &str) -> bool {
    name.strip_suffix(suffix)
        .and_then(|head| head.strip_suffix('.'))
        .is_some_and(|head| !head.is_empty() && !head.ends_with('.'))
}

/// `127.0.0.1`, `::1` or `[::1]` as an address (IPv4-mapped IPv6
/// addresses as their IPv4 form).
pub fn parse_ip(s: &str) -> Option<core::net::IpAddr> {
    let bare = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .unwrap_or(s);
    bare.parse::<core::net::IpAddr>()
        .ok()
        .map(|ip| ip.to_canonical())
}

/// Whether the last label of `name` is a number (decimal, or `0x` hex):
/// no top-level domain is, and the C resolver reads such names as IPv4
/// addresses (`127.1`, `0x7f.0.0.1`, `2130706433`).
fn numeric_last_label(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    match last.strip_prefix("0x").or_else(|| last.strip_prefix("0X")) {
        Some(hex) => hex.bytes().all(|b| b.is_ascii_hexdigit()),
        None => !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit()),
    }
}

fn split_host_port(value: &str) -> Result<(String, Option<u16>), TargetError> {
    let bad = |why| TargetError::BadHost {
        value: value.to_string(),
        why,
    };
    if value.is_empty() {
        return Err(bad("it is empty"));
    }
    let lower = value.to_ascii_lowercase();
    let (host, port) = if let Some(rest) = lower.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err(bad("an IPv6 literal needs a closing `]`"));
        };
        let inner = &rest[..end];
        if inner.parse::<core::net::Ipv6Addr>().is_err() {
            return Err(bad("not a valid IPv6 address"));
        }
        let after = &rest[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(bad("unexpected text after `]`")),
        };
        (format!("[{inner}]"), port)
    } else {
        match lower.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (lower.clone(), None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => return Err(bad("the port must be a number from 1 to 65535")),
        },
    };
    if !host.starts_with('[') {
        let name = host.strip_prefix("*.").unwrap_or(&host);
        if name.is_empty() || name.len() > 253 {
            return Err(bad("the host name is empty or too long"));
        }
        if name.contains('*') {
            return Err(bad("a wildcard is only allowed as a leading `*.`"));
        }
        if host.starts_with("*.") && numeric_last_label(name) {
            return Err(bad(
                "a wildcard cannot cover an IP address (its last label is a number)",
            ));
        }
        labels_problem(name).map_err(bad)?;
    }
    Ok((host, port))
}

/// What is wrong with the labels of host name `name`, if anything: each
/// must be 1 to 63 letters, digits and `-`, not starting or ending with
/// `-`.
fn labels_problem(name: &str) -> Result<(), &'static str> {
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("a host label is empty or longer than 63 characters");
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Err("a host name may contain only letters, digits, `-` and `.`");
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("a host label cannot start or end with `-`");
        }
    }
    Ok(())
}

/// Whether `name` is a syntactically valid host name (no wildcard, no
/// port): at most 253 bytes of valid labels, the rule every host pattern
/// is held to. The one host-name check of gatehouse: a pattern's
/// validation and the network layer's lookups both use it.
pub fn is_host_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 253 && labels_problem(name).is_ok()
}

/// Validates a concrete request target (or a declared narrower pattern) of
/// `kind`, the same way a pattern is validated.
pub fn validate_target(kind: TargetKind, value: &str) -> Result<(), TargetError> {
    TargetPattern::parse(kind, value).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn glob(s: &str) -> PathGlob {
        PathGlob::parse(s).unwrap()
    }

    #[test]
    fn globs_match_by_segment() {
        let g = glob("/tmp/x/**");
        assert!(g.matches("/tmp/x/a"));
        assert!(g.matches("/tmp/x/a/b/c"));
        assert!(g.matches("/tmp/x"));
        assert!(!g.matches("/tmp/y/a"));
        assert!(!g.matches("/tmp/xy/a"));
        let g = glob("/ws/notes/*.md");
        assert!(g.matches("/ws/notes/a.md"));
        assert!(!g.matches("/ws/notes/a.txt"));
        assert!(!g.matches("/ws/notes/sub/a.md"));
        assert!(glob("/a/?.txt").matches("/a/b.txt"));
        assert!(!glob("/a/?.txt").matches("/a/bb.txt"));
        assert!(glob("/").matches("/"));
        assert!(!glob("/").matches("/a"));
        assert!(glob("/**").matches("/a/b"));
    }

    #[test]
    fn a_glob_covers_only_narrower_globs() {
        let g = glob("/ws/**");
        assert!(g.covers("/ws/out/**"));
        assert!(g.covers("/ws/*.md"));
        assert!(!glob("/ws/out/*").covers("/ws/out/**"));
        assert!(!glob("/ws/a*").covers("/ws/*"));
        assert!(glob("/ws/*").covers("/ws/a*"));
        assert!(!glob("/ws/a.md").covers("/ws/*.md"));
        assert!(!glob("/ws/?").covers("/ws/*"));
    }

    #[test]
    fn malformed_globs_are_rejected_with_the_value() {
        for (bad, why) in [
            ("", "it is empty"),
            ("tmp/x", "it must be an absolute path"),
            (
                "/tmp/[ab]",
                "brackets and braces are not supported; use `*`, `?` and `**`",
            ),
            ("/tmp/a**", "`**` must be a whole segment"),
            (
                "/tmp//a",
                "it has an empty segment (`//` or a trailing `/`)",
            ),
            ("/tmp/../etc", "`.` and `..` segments are not allowed"),
        ] {
            assert_eq!(
                PathGlob::parse(bad).unwrap_err(),
                TargetError::BadGlob {
                    value: bad.into(),
                    why
                }
            );
        }
        assert_eq!(
            PathGlob::parse("/tmp/[ab]").unwrap_err().to_string(),
            "malformed path glob `/tmp/[ab]`: brackets and braces are not supported; use `*`, `?` and `**`"
        );
    }

    #[test]
    fn literal_dirs() {
        assert_eq!(glob("/ws/out/**").literal_dir(), "/ws/out");
        assert_eq!(glob("/ws/notes/*.md").literal_dir(), "/ws/notes");
        assert_eq!(glob("/ws/a.txt").literal_dir(), "/ws");
        assert_eq!(glob("/*").literal_dir(), "/");
    }

    #[test]
    fn hosts_with_and_without_ports() {
        let any_port = HostPattern::parse("localhost").unwrap();
        assert!(any_port.covers("localhost:8080"));
        assert!(any_port.covers("LOCALHOST"));
        assert!(!any_port.covers("localhost.evil.com"));
        let one_port = HostPattern::parse("localhost:8080").unwrap();
        assert!(one_port.covers("localhost:8080"));
        assert!(!one_port.covers("localhost:8081"));
        assert!(!one_port.covers("localhost"));
        let wild = HostPattern::parse("*.example.com").unwrap();
        assert!(wild.covers("api.example.com"));
        assert!(wild.covers("a.b.example.com:443"));
        assert!(!wild.covers("example.com"));
        assert!(!wild.covers("badexample.com"));
        assert!(wild.covers("*.example.com"));
        assert!(!HostPattern::parse("127.0.0.1").unwrap().covers("127.0.0.2"));
        assert!(HostPattern::parse("[::1]:80").unwrap().covers("[::1]:80"));
        for bad in [
            "", "a b", "x:0", "x:99999", "*x.com", "a.*.com", "[::1", "-a.com", "a..b",
        ] {
            assert!(HostPattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn exact_names() {
        let p = TargetPattern::parse(TargetKind::Exact, "HOME").unwrap();
        assert!(p.covers("HOME"));
        assert!(!p.covers("HOMEX"));
        assert!(TargetPattern::parse(TargetKind::Exact, "A*").is_err());
        assert!(TargetPattern::parse(TargetKind::Exact, "").is_err());
        assert!(TargetPattern::parse(TargetKind::Exact, "a b").is_err());
    }
}
