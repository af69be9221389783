//! HTTP requests under `network:sites`: URL patterns, the canonical form
//! of a request, and the decision on one request. Pure: no I/O, no clock.
//!
//! A `network:sites` target is a host pattern (`api.example.com`,
//! `*.example.com`, with a port where given), which allows HTTP only as
//! `https://HOST:443` (or its given port), or a URL pattern
//! (`https://api.example.com`, `https://api.example.com:8443/v1/**`,
//! `http://localhost:8080/**`). `http://` needs a URL pattern that names
//! it. A URL pattern without a path covers every path; `X/**` covers `X`
//! and everything beneath it; any other path is exact.
//!
//! A request is canonicalized before it is matched: the host lowercased,
//! IDNA to ASCII, a trailing dot removed; no userinfo; the path
//! percent-decoded once, with `.` and `..` segments refused; the default
//! port made explicit. Anything that cannot be put in that form is refused.

use core::net::{IpAddr, Ipv4Addr};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::target::{parse_ip, HostPattern, TargetError};

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// Plain `http` (default port 80).
    Http,
    /// `https` (default port 443).
    Https,
}

impl Scheme {
    /// The scheme's lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// The port a URL without one means.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    fn parse(s: &str) -> Option<Scheme> {
        match s.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }
}

/// A URL pattern: scheme, host pattern, port (explicit), and a path rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UrlPattern {
    source: String,
    scheme: Scheme,
    /// Host (lowercase; `*.suffix` for a wildcard) with the explicit port.
    host: HostPattern,
    port: u16,
    path: PathRule,
}

/// Which paths a URL pattern covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PathRule {
    /// No path given: every path.
    Any,
    /// `PREFIX/**`: the prefix itself and everything beneath it (segment
    /// boundaries: `/v1/**` does not cover `/v1evil`).
    Under(String),
    /// One path exactly.
    Exact(String),
}

impl TryFrom<String> for UrlPattern {
    type Error = TargetError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        UrlPattern::parse(&value)
    }
}

impl From<UrlPattern> for String {
    fn from(u: UrlPattern) -> String {
        u.source
    }
}

fn bad(value: &str, why: &'static str) -> TargetError {
    TargetError::BadHost {
        value: value.to_string(),
        why,
    }
}

impl UrlPattern {
    /// Parses `scheme://host[:port][/path[/**]]`.
    pub fn parse(value: &str) -> Result<UrlPattern, TargetError> {
        let Some((scheme, rest)) = value.split_once("://") else {
            return Err(bad(value, "a URL pattern needs `http://` or `https://`"));
        };
        let scheme =
            Scheme::parse(scheme).ok_or(bad(value, "only `http` and `https` URLs are allowed"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(bad(value, "a URL pattern cannot hold userinfo"));
        }
        if path.contains(['?', '#']) {
            return Err(bad(
                value,
                "a URL pattern cannot hold a query or a fragment",
            ));
        }
        let with_port = HostPattern::parse(authority)?;
        let port = with_port.port().unwrap_or(scheme.default_port());
        // The port is kept apart: the host pattern matches names only.
        let host = with_port.without_port();
        let path = match path {
            "" | "/**" => PathRule::Any,
            p => {
                let (rule, literal) = match p.strip_suffix("/**") {
                    Some(prefix) => (true, prefix),
                    None => (false, p),
                };
                if literal.contains('*') {
                    return Err(bad(
                        value,
                        "a URL pattern's path may end in `/**`, and holds no other wildcard",
                    ));
                }
                let canonical = canonical_path(literal).map_err(|_| {
                    bad(
                        value,
                        "a URL pattern's path cannot hold `.` or `..` segments or bad escapes",
                    )
                })?;
                if rule {
                    PathRule::Under(canonical)
                } else {
                    PathRule::Exact(canonical)
                }
            }
        };
        Ok(UrlPattern {
            source: value.to_string(),
            scheme,
            host,
            port,
            path,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The host pattern: names only (the port is [`UrlPattern::port`]).
    pub fn host(&self) -> &HostPattern {
        &self.host
    }

    /// The scheme the pattern allows, the only one it covers.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The port: the explicit one, or the scheme's default.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether `path` (canonical) is one this pattern covers.
    fn covers_path(&self, path: &str) -> bool {
        match &self.path {
            PathRule::Any => true,
            PathRule::Exact(p) => p == path,
            PathRule::Under(prefix) => {
                path == prefix
                    || prefix == "/"
                    || path
                        .strip_prefix(prefix.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            }
        }
    }

    /// Whether `req` (canonical) is one this pattern covers: same scheme
    /// and port, a host it names, a path it covers.
    pub fn covers_request(&self, req: &HttpRequest) -> bool {
        self.scheme == req.scheme
            && self.port == req.port
            && self.host.matches_host(&req.host)
            && self.covers_path(&req.path)
    }

    /// The pattern of the requests under the base URL `base`
    /// (`scheme://host[:port][/path]`): the same scheme, host and port, and
    /// a path that starts with the base's at a segment boundary (`/v1`
    /// covers `/v1` and `/v1/x`, not `/v1evil`).
    pub fn under(base: &str) -> Result<UrlPattern, TargetError> {
        UrlPattern::parse(&format!("{}/**", base.trim_end_matches('/')))
    }

    /// Whether this pattern covers `other` (a narrower pattern names
    /// nothing this one does not).
    fn covers_url(&self, other: &UrlPattern) -> bool {
        self.scheme == other.scheme
            && self.port == other.port
            && self.host.covers(other.host.host())
            && match &other.path {
                PathRule::Any => self.path == PathRule::Any,
                PathRule::Exact(p) => self.covers_path(p),
                PathRule::Under(p) => match &self.path {
                    PathRule::Any => true,
                    PathRule::Exact(_) => false,
                    PathRule::Under(_) => self.covers_path(p),
                },
            }
    }
}

/// A `network:sites` target: a host pattern, or a URL pattern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SitePattern {
    /// A host pattern: any request to that host (and port, if given).
    Host(HostPattern),
    /// A URL pattern: requests under its scheme, host, port and path only.
    Url(UrlPattern),
}

impl SitePattern {
    /// A URL pattern when `value` has a scheme, else a host pattern.
    pub fn parse(value: &str) -> Result<SitePattern, TargetError> {
        if value.contains("://") {
            UrlPattern::parse(value).map(SitePattern::Url)
        } else {
            HostPattern::parse(value).map(SitePattern::Host)
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        match self {
            SitePattern::Host(h) => h.as_str(),
            SitePattern::Url(u) => u.as_str(),
        }
    }

    /// Whether this pattern covers `target`: a host (`host[:port]`), a URL
    /// pattern, or a pattern of either kind that names nothing this one
    /// does not. A host pattern covers a URL only as HTTPS on its port (443
    /// when it names none); a URL pattern never covers a host target (which
    /// would allow raw sockets).
    pub fn covers(&self, target: &str) -> bool {
        match self {
            SitePattern::Host(h) => host_covers(h, target),
            SitePattern::Url(u) => url_covers(u, target),
        }
    }

    /// The host pattern a raw socket may use: a host pattern's own; none
    /// for a URL pattern (it allows HTTP only).
    pub fn socket_host(&self) -> Option<&HostPattern> {
        match self {
            SitePattern::Host(h) => Some(h),
            SitePattern::Url(_) => None,
        }
    }
}

/// [`SitePattern::covers`] for a host pattern: `target` a host, a host
/// pattern, or a URL pattern it covers only as HTTPS on its port (443 when
/// it names none).
pub fn host_covers(h: &HostPattern, target: &str) -> bool {
    match SitePattern::parse(target) {
        Ok(SitePattern::Url(u)) => {
            u.scheme == Scheme::Https
                && h.port().unwrap_or(443) == u.port
                && h.without_port().covers(u.host.host())
        }
        _ => h.covers(target),
    }
}

/// [`SitePattern::covers`] for a URL pattern: `target` a URL pattern it
/// covers; never a host target (which would allow raw sockets).
pub fn url_covers(u: &UrlPattern, target: &str) -> bool {
    match SitePattern::parse(target) {
        Ok(SitePattern::Url(other)) => u.covers_url(&other),
        _ => false,
    }
}

impl fmt::Display for SitePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing a turn may call: a site, and the methods allowed on it (any
/// when `None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpRule {
    /// The host or URL pattern the rule covers.
    pub site: SitePattern,
    /// The HTTP methods allowed, uppercase; `None`: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub methods: Option<Vec<String>>,
}

/// A request as the policy decides it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpRequest {
    /// The HTTP method, as sent.
    pub method: String,
    /// `http` or `https`.
    pub scheme: Scheme,
    /// Lowercase ASCII (IDNA), no trailing dot; an IP literal in its
    /// canonical text (IPv6 without brackets).
    pub host: String,
    /// The port: the explicit one, or the scheme's default.
    pub port: u16,
    /// Percent-decoded once; `/` when empty.
    pub path: String,
    /// The raw query (without `?`), never logged: only its sha256 and
    /// length are.
    #[serde(skip)]
    pub query: Option<String>,
}

/// Why a request could not be put in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// A scheme other than `http` or `https`.
    #[error("the scheme `{0}` is not http or https")]
    Scheme(String),
    /// The URL holds a user name or password.
    #[error("a request URL cannot hold userinfo")]
    Userinfo,
    /// A host that is not a valid host name or IP literal.
    #[error("the host `{0}` is not a valid host name")]
    Host(String),
    /// A port that does not parse as one.
    #[error("the port `{0}` is not a port")]
    Port(String),
    /// A path with a `.` or `..` segment, or a bad percent escape.
    #[error("the path holds a `.` or `..` segment, or a bad escape")]
    Path,
    /// A method that is not an HTTP token.
    #[error("the method `{0}` is not a token")]
    Method(String),
}

impl HttpRequest {
    /// Canonicalizes a request from its parts as the guest gave them.
    pub fn canonical(
        method: &str,
        scheme: &str,
        authority: &str,
        path_with_query: &str,
    ) -> Result<HttpRequest, RequestError> {
        let scheme = Scheme::parse(scheme).ok_or_else(|| RequestError::Scheme(scheme.into()))?;
        if method.is_empty()
            || !method
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(RequestError::Method(method.into()));
        }
        if authority.contains('@') {
            return Err(RequestError::Userinfo);
        }
        let (host, port) = split_authority(authority)?;
        let host = canonical_host(host)?;
        let port = match port {
            None => scheme.default_port(),
            Some(p) => p.parse::<u16>().map_err(|_| RequestError::Port(p.into()))?,
        };
        let (path, query) = match path_with_query.split_once('?') {
            Some((p, q)) => (p, Some(q.to_string())),
            None => (path_with_query, None),
        };
        let path = canonical_path(path).map_err(|_| RequestError::Path)?;
        Ok(HttpRequest {
            method: method.to_ascii_uppercase(),
            scheme,
            host,
            port,
            path,
            query,
        })
    }

    /// `scheme://host:port` (IPv6 in brackets).
    pub fn origin(&self) -> String {
        if self.host.contains(':') {
            format!("{}://[{}]:{}", self.scheme.as_str(), self.host, self.port)
        } else {
            format!("{}://{}:{}", self.scheme.as_str(), self.host, self.port)
        }
    }
}

/// `host[:port]`, with a bracketed IPv6 literal.
fn split_authority(authority: &str) -> Result<(&str, Option<&str>), RequestError> {
    if let Some(rest) = authority.strip_prefix('[') {
        let end = rest
            .find(']')
            .ok_or_else(|| RequestError::Host(authority.into()))?;
        let port = match &rest[end + 1..] {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| RequestError::Host(authority.into()))?,
            ),
        };
        return Ok((&rest[..end], port));
    }
    Ok(match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    })
}

/// Lowercase ASCII, IDNA, no trailing dot; an IP literal canonical.
fn canonical_host(host: &str) -> Result<String, RequestError> {
    if let Some(ip) = parse_ip(host) {
        return Ok(ip.to_string());
    }
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    if trimmed.is_empty() {
        return Err(RequestError::Host(host.into()));
    }
    let ascii =
        idna::domain_to_ascii_strict(trimmed).map_err(|_| RequestError::Host(host.into()))?;
    if ascii.is_empty() || ascii.ends_with('.') {
        return Err(RequestError::Host(host.into()));
    }
    Ok(ascii)
}

/// The path percent-decoded once, `/` when empty; refused when it holds a
/// `.` or `..` segment (before or after decoding), a bad escape, or bytes
/// that are not UTF-8.
fn canonical_path(path: &str) -> Result<String, ()> {
    if path.is_empty() {
        return Ok("/".into());
    }
    if !path.starts_with('/') {
        return Err(());
    }
    // A `%` must start a full escape: `%zz` is not decoded silently.
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let ok = bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
            if !ok {
                return Err(());
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| ())?
        .into_owned();
    let dot = |p: &str| p.split('/').any(|s| s == "." || s == "..");
    if dot(path) || dot(&decoded) {
        return Err(());
    }
    Ok(decoded)
}

/// The methods never sent, whatever a grant's `methods` says: a server
/// that honours `TRACE` answers with the request itself, the credential
/// a provider added included; `CONNECT` asks the server to open a tunnel
/// to somewhere the policy never decided.
pub const NEVER_SENT: [&str; 2] = ["TRACE", "CONNECT"];

/// Whether `rule` allows `req`: `Ok` when it does, `Err` with the reason
/// when it covers the site but not the method, `Ok(false)` when it does
/// not cover the site.
fn rule_allows(rule: &HttpRule, req: &HttpRequest) -> Result<bool, String> {
    let site_ok = match &rule.site {
        SitePattern::Host(h) => {
            req.scheme == Scheme::Https
                && h.port().unwrap_or(443) == req.port
                && h.matches_host(&req.host)
        }
        SitePattern::Url(u) => u.covers_request(req),
    };
    if !site_ok {
        return Ok(false);
    }
    match &rule.methods {
        Some(methods) if !methods.iter().any(|m| m.eq_ignore_ascii_case(&req.method)) => {
            Err(format!(
                "`{}` is not one of the methods granted on `{}` ({})",
                req.method,
                rule.site,
                methods.join(", ")
            ))
        }
        _ => Ok(true),
    }
}

/// Whether the request is allowed by one of `rules`: the index of the
/// first rule that allows it, or why none does. `TRACE` and `CONNECT`
/// ([`NEVER_SENT`]) are refused whatever the rules say.
pub fn decide_request(rules: &[HttpRule], req: &HttpRequest) -> Result<usize, String> {
    // `req.method` is uppercase: `trace` is refused as `TRACE` is.
    if NEVER_SENT.contains(&req.method.as_str()) {
        return Err(format!(
            "`{}` is never sent, whatever `methods` grants: a server may answer it with the request, credentials included",
            req.method
        ));
    }
    let mut why = None;
    for (i, rule) in rules.iter().enumerate() {
        match rule_allows(rule, req) {
            Ok(true) => return Ok(i),
            Ok(false) => {}
            Err(reason) => {
                why.get_or_insert(reason);
            }
        }
    }
    Err(why.unwrap_or_else(|| {
        format!(
            "`{} {}{}` is not covered by any `network:sites` grant of this turn",
            req.method,
            req.origin(),
            req.path
        )
    }))
}

/// Whether every rule that allows `req` names its host only through a
/// wildcard (`*.example.com`): then [`may_connect`] keeps it from the
/// special ranges. One rule that names the host or its address itself is
/// enough to lift that, as it is for sockets.
pub fn wildcard_only(rules: &[HttpRule], req: &HttpRequest) -> bool {
    !rules.iter().any(|rule| {
        rule_allows(rule, req) == Ok(true)
            && !is_wildcard(match &rule.site {
                SitePattern::Host(h) => h,
                SitePattern::Url(u) => u.host(),
            })
    })
}

/// Whether `pattern` matches names it does not spell out (`*.example.com`).
pub fn is_wildcard(pattern: &HostPattern) -> bool {
    pattern.host().starts_with("*.")
}

/// Whether `ip` is in a range a wildcard may not reach: loopback,
/// private, link-local (cloud metadata among them), unique-local, shared
/// (CGNAT), `0.0.0.0/8`, unspecified, multicast, broadcast, reserved, and
/// NAT64's `64:ff9b::/96` and `64:ff9b:1::/48`. IPv6 forms that carry an
/// IPv4 address count as it where the kernel or a relay would reach it:
/// IPv4-mapped (`::ffff:a.b.c.d`) and 6to4 (`2002:AABB:CCDD::/48`) as
/// their IPv4 address; IPv4-compatible (`::a.b.c.d`, deprecated), Teredo
/// (`2001::/32`), the discard prefix (`100::/64`) and site-local
/// (`fec0::/10`, deprecated) are special whole (security round 3, after
/// item 4).
pub fn special_address(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let o = v6.octets();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] & 0xffc0) == 0xfec0
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0])
                || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1)
                || s[..6] == [0, 0, 0, 0, 0, 0]
                || (s[0] == 0x2001 && s[1] == 0)
                || s[..4] == [0x100, 0, 0, 0]
                || (s[0] == 0x2002 && special_v4(Ipv4Addr::new(o[2], o[3], o[4], o[5])))
        }
    }
}

/// [`special_address`] for IPv4.
fn special_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_multicast()
        || v4.is_broadcast()
        || v4.is_unspecified()
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xc0) == 64)
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        || o[0] >= 240
}

/// Whether a connection may be made to `ip`, an address a granted name
/// resolved to. The one rule of `wasi:http` and `wasi:sockets`: a name
/// matched only through a wildcard (`wildcard_only`) never reaches the
/// special ranges ([`special_address`]), since a wildcard grants names,
/// not whatever a name under it is made to resolve to; a grant that names
/// the host (or the address) itself reaches what it resolves to.
pub fn may_connect(wildcard_only: bool, ip: IpAddr) -> bool {
    !wildcard_only || !special_address(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(site: &str, methods: Option<&[&str]>) -> HttpRule {
        HttpRule {
            site: SitePattern::parse(site).unwrap(),
            methods: methods.map(|m| m.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn req(method: &str, url: &str) -> Result<HttpRequest, RequestError> {
        let (scheme, rest) = url.split_once("://").unwrap();
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        HttpRequest::canonical(method, scheme, authority, path)
    }

    fn allowed(rules: &[HttpRule], method: &str, url: &str) -> bool {
        req(method, url).is_ok_and(|r| decide_request(rules, &r).is_ok())
    }

    #[test]
    fn a_host_target_allows_https_on_its_port_only() {
        let rules = [rule("api.example.com", None)];
        assert!(allowed(&rules, "GET", "https://api.example.com/x"));
        assert!(allowed(&rules, "GET", "https://API.Example.com./x"));
        assert!(!allowed(&rules, "GET", "http://api.example.com/x"));
        assert!(!allowed(&rules, "GET", "https://api.example.com:8443/x"));
        let rules = [rule("localhost:8443", None)];
        assert!(allowed(&rules, "GET", "https://localhost:8443/"));
        assert!(!allowed(&rules, "GET", "https://localhost/"));
    }

    #[test]
    fn a_url_pattern_decides_scheme_port_path_and_method() {
        let rules = [rule(
            "https://api.example.com:8443/v1/**",
            Some(&["GET", "POST"]),
        )];
        assert!(allowed(&rules, "GET", "https://api.example.com:8443/v1"));
        assert!(allowed(
            &rules,
            "post",
            "https://api.example.com:8443/v1/a/b?q=1"
        ));
        assert!(!allowed(
            &rules,
            "DELETE",
            "https://api.example.com:8443/v1/a"
        ));
        assert!(!allowed(
            &rules,
            "GET",
            "https://api.example.com:8443/v1evil"
        ));
        assert!(!allowed(&rules, "GET", "https://api.example.com:8443/v2/x"));
        assert!(!allowed(&rules, "GET", "https://api.example.com/v1/a"));
        assert!(!allowed(&rules, "GET", "http://api.example.com:8443/v1/a"));
        let err = req("GET", "https://api.example.com:8443/v1/../v2/x").unwrap_err();
        assert_eq!(err, RequestError::Path);
        let err = req("GET", "https://api.example.com:8443/v1/%2e%2e/v2/x").unwrap_err();
        assert_eq!(err, RequestError::Path);
        assert!(req("GET", "https://api.example.com:8443/v1/%zz").is_err());
    }

    #[test]
    fn userinfo_and_numeric_hosts_are_never_a_granted_name() {
        let rules = [rule("https://localhost:8443/**", None)];
        assert_eq!(
            req("GET", "https://localhost@other:8443/").unwrap_err(),
            RequestError::Userinfo
        );
        assert!(!allowed(&rules, "GET", "https://2130706433:8443/"));
        assert!(!allowed(&rules, "GET", "https://0177.0.0.1:8443/"));
        assert!(!allowed(&rules, "GET", "https://[::ffff:127.0.0.1]:8443/"));
        let ip = [rule("https://127.0.0.1:8443", None)];
        assert!(allowed(&ip, "GET", "https://[::ffff:127.0.0.1]:8443/"));
    }

    #[test]
    fn patterns_cover_narrower_ones() {
        let host = SitePattern::parse("api.example.com").unwrap();
        assert!(host.covers("https://api.example.com/v1/**"));
        assert!(!host.covers("http://api.example.com/v1/**"));
        let url = SitePattern::parse("https://api.example.com/**").unwrap();
        assert!(url.covers("https://api.example.com/v1/**"));
        assert!(!url.covers("api.example.com"));
        let v1 = SitePattern::parse("https://api.example.com/v1/**").unwrap();
        assert!(v1.covers("https://api.example.com/v1/x"));
        assert!(!v1.covers("https://api.example.com/**"));
        assert!(UrlPattern::parse("ftp://x").is_err());
        assert!(UrlPattern::parse("https://u@x").is_err());
    }

    /// security round 3, item 3: `TRACE` and `CONNECT` are refused in any
    /// case, whatever `methods` grants (a server may echo the request with
    /// the credential a provider added).
    ///
    /// Positive control: the same rules allow `GET` and a granted `PATCH`.
    #[test]
    fn trace_and_connect_are_never_allowed() {
        let any = [rule("https://api.example.com/v1/**", None)];
        let listed = [rule(
            "https://api.example.com/v1/**",
            Some(&["TRACE", "CONNECT", "PATCH"]),
        )];
        for rules in [&any[..], &listed[..]] {
            for m in ["TRACE", "trace", "TrAcE", "CONNECT", "connect"] {
                let r = req(m, "https://api.example.com/v1/x").unwrap();
                let why = decide_request(rules, &r).unwrap_err();
                assert!(why.contains("is never sent"), "{m}: {why}");
            }
            assert!(allowed(rules, "PATCH", "https://api.example.com/v1/x"));
        }
        assert!(allowed(&any, "GET", "https://api.example.com/v1/x"));
    }

    /// security round 3, item 4: the one connect rule of `wasi:http` and
    /// `wasi:sockets`: through a wildcard only, no special address; a
    /// rule that names the host lifts it.
    ///
    /// Positive control: a public address is reached through the wildcard.
    #[test]
    fn a_wildcard_alone_never_reaches_a_special_address() {
        let wild = [rule("*.corp.test", None)];
        let both = [rule("*.corp.test", None), rule("api.corp.test", None)];
        let r = req("GET", "https://api.corp.test/").unwrap();
        assert!(wildcard_only(&wild, &r));
        assert!(!wildcard_only(&both, &r));
        let url = [rule("https://*.corp.test/**", None)];
        assert!(wildcard_only(&url, &r));
        for ip in [
            "127.0.0.1",
            "::1",
            "10.0.0.1",
            "172.16.0.1",
            "192.168.0.1",
            "169.254.169.254",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
            "100.64.0.1",
            "0.0.0.0",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(!may_connect(true, ip), "{ip}");
            assert!(may_connect(false, ip), "{ip}");
        }
        assert!(may_connect(true, "203.0.113.9".parse().unwrap()));
        assert!(may_connect(true, "2001:db8::1".parse().unwrap()));
    }

    /// IPv6 forms that carry an IPv4 address, or that tunnel, are judged
    /// as what they reach: a wildcard may not reach loopback as
    /// `::127.0.0.1`, `2002:7f00:1::1` (6to4), Teredo, NAT64's local-use
    /// prefix, the discard prefix or site-local; a public address in 6to4
    /// is still reached (the control).
    #[test]
    fn ipv6_forms_of_a_special_ipv4_address_are_special() {
        for ip in [
            "::127.0.0.1",
            "::a9fe:a9fe",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::",
            "2001:0:4136:e378::1",
            "64:ff9b:1::7f00:1",
            "64:ff9b::7f00:1",
            "100::1",
            "fec0::1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(special_address(ip), "{ip}");
            assert!(!may_connect(true, ip), "{ip}");
        }
        for ip in ["2002:cb00:7109::1", "2001:4860::8888", "2606:4700::1111"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(!special_address(ip), "{ip}");
        }
    }
}
