//! `[network]` and `[providers.NAME]` of `gatehouse.toml`: how the host's
//! HTTP sender connects, and the credentials it adds for `provider:access`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use serde::Deserialize;

use crate::policy::UrlPattern;

/// `[network]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNetwork {
    ca_file: Option<String>,
    #[serde(default)]
    resolve: BTreeMap<String, Vec<String>>,
}

/// `[providers.NAME]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvider {
    base_url: Option<String>,
    #[serde(default)]
    base_urls: Vec<String>,
    header: Option<String>,
    format: Option<String>,
    value_env: Option<String>,
    value_file: Option<String>,
}

/// `[approvals] notify` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNotify {
    url: String,
    header: Option<String>,
    format: Option<String>,
    value_env: Option<String>,
    value_file: Option<String>,
}

/// `[approvals] notify`: where a queued approval is announced, as a
/// JSON `POST`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifyDef {
    /// `https://…` (plain `http://` only to a loopback address).
    pub url: String,
    /// The header that carries a credential, if any: its name (default
    /// `Authorization`), its format (default `Bearer {value}`) and where
    /// its value is read from at each notice.
    pub header: Option<(String, String, ValueSource)>,
}

pub(super) fn notify(
    raw: RawNotify,
    base: &std::path::Path,
) -> Result<NotifyDef, (String, String)> {
    let field = |f: &str| format!("approvals.notify.{f}");
    let uri: http::Uri = raw
        .url
        .parse()
        .map_err(|_| (field("url"), format!("`{}` is not a url", raw.url)))?;
    let host = uri.host().unwrap_or_default();
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match uri.scheme_str() {
        Some("https") if !host.is_empty() => {}
        Some("http") if loopback => {}
        _ => {
            return Err((
                field("url"),
                format!(
                    "`{}` is not an https url (plain http only to a loopback address)",
                    raw.url
                ),
            ))
        }
    }
    let header = match (raw.header, raw.format, raw.value_env, raw.value_file) {
        (None, None, None, None) => None,
        (header, format, value_env, value_file) => {
            let format = format.unwrap_or_else(|| "Bearer {value}".into());
            if !format.contains("{value}") {
                return Err((
                    field("format"),
                    format!("`{format}` does not hold `{{value}}`"),
                ));
            }
            let header = header.unwrap_or_else(|| "Authorization".into());
            if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
                return Err((field("header"), format!("`{header}` is not a header name")));
            }
            let value = match (value_env, value_file) {
                (Some(var), None) => ValueSource::Env(var),
                (None, Some(file)) => ValueSource::File(base.join(file)),
                _ => {
                    return Err((
                        field("value_env"),
                        "a header needs exactly one of `value_env` and `value_file`".into(),
                    ))
                }
            };
            Some((header, format, value))
        }
    };
    Ok(NotifyDef {
        url: raw.url,
        header,
    })
}

/// `[network]`.
///
/// Defaults: the webpki roots only; every name through the system
/// resolver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkConfig {
    /// `ca_file`: PEM certificates trusted besides the webpki roots.
    pub ca_file: Option<PathBuf>,
    /// `resolve`: names the sender, and the `wasi:sockets` lookup, answer
    /// with these addresses instead of asking the system resolver (the
    /// addresses are vetted all the same).
    pub resolve: BTreeMap<String, Vec<IpAddr>>,
}

/// Where a provider's value comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueSource {
    /// The host's environment variable.
    Env(String),
    /// A file, mode 0600 or stricter (or refused).
    File(PathBuf),
}

/// One `[providers.NAME]`: never the value itself, which the host reads
/// at each turn that uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderDef {
    /// The provider's name, the `provider:access` target.
    pub name: String,
    /// `base_url`, or `base_urls`: `scheme://host[:port][/path]`.
    pub base_urls: Vec<String>,
    /// Default `Authorization`.
    pub header: String,
    /// Default `Bearer {value}`.
    pub format: String,
    /// Where the credential is read from at each turn.
    pub value: ValueSource,
}

pub(super) fn network(
    raw: Option<RawNetwork>,
    base: &std::path::Path,
) -> Result<NetworkConfig, (String, String)> {
    let raw = raw.unwrap_or_default();
    let mut resolve = BTreeMap::new();
    for (name, ips) in raw.resolve {
        let field = format!("network.resolve.{name}");
        if ips.is_empty() {
            return Err((field, "give at least one address".into()));
        }
        let mut out = Vec::new();
        for ip in &ips {
            out.push(
                ip.parse::<IpAddr>()
                    .map_err(|_| (field.clone(), format!("`{ip}` is not an IP address")))?,
            );
        }
        resolve.insert(
            name.to_ascii_lowercase().trim_end_matches('.').to_string(),
            out,
        );
    }
    Ok(NetworkConfig {
        ca_file: raw.ca_file.map(|f| base.join(f)),
        resolve,
    })
}

pub(super) fn providers(
    raw: BTreeMap<String, RawProvider>,
    base: &std::path::Path,
) -> Result<Vec<ProviderDef>, (String, String)> {
    let mut out = Vec::new();
    for (name, p) in raw {
        let field = |f: &str| format!("providers.{name}.{f}");
        let mut base_urls: Vec<String> = p.base_url.into_iter().collect();
        base_urls.extend(p.base_urls);
        if base_urls.is_empty() {
            return Err((
                field("base_url"),
                "a provider needs `base_url` or `base_urls`".into(),
            ));
        }
        for u in &base_urls {
            // Checked as the sender will use it: the requests under it.
            UrlPattern::under(u).map_err(|e| (field("base_url"), e.to_string()))?;
            if u.contains('*') {
                return Err((
                    field("base_url"),
                    format!("`{u}` must be a URL without wildcards"),
                ));
            }
        }
        let format = p.format.unwrap_or_else(|| "Bearer {value}".into());
        if !format.contains("{value}") {
            return Err((
                field("format"),
                format!("`{format}` does not hold `{{value}}`"),
            ));
        }
        let header = p.header.unwrap_or_else(|| "Authorization".into());
        if http::HeaderName::from_bytes(header.as_bytes()).is_err() {
            return Err((field("header"), format!("`{header}` is not a header name")));
        }
        let value = match (p.value_env, p.value_file) {
            (Some(var), None) => ValueSource::Env(var),
            (None, Some(file)) => ValueSource::File(base.join(file)),
            _ => {
                return Err((
                    field("value_env"),
                    "give exactly one of `value_env` and `value_file`".into(),
                ))
            }
        };
        out.push(ProviderDef {
            name,
            base_urls,
            header,
            format,
            value,
        });
    }
    Ok(out)
}
