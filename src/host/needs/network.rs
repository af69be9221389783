//! The need functions of the network's capabilities, whose targets say
//! more than a name: a site with its methods, a provider that must be
//! defined and whose base URLs the executor's sites must cover. (A
//! capability whose only rule is its own decision needs none: its unit
//! fills its part, [`crate::sandbox::bindings::Unit::allow`].)

use super::{Asking, Need, Stop};
use crate::policy::{Capability, DenyCode, HttpRule, SitePattern};
use crate::sandbox::bindings::{
    http::{HttpPart, ProviderPart},
    network::NetworkPart,
};

/// `network:sites` on a host pattern (sockets, and HTTPS to it) or a URL
/// pattern (HTTP only), with the methods the manifest allows.
pub(super) fn network(
    sockets: &mut NetworkPart,
    http: &mut HttpPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
    let Some(site) = need.target.and_then(|t| SitePattern::parse(t).ok()) else {
        return Err(Stop::new(
            DenyCode::TargetMismatch,
            "`network:sites` needs a host or URL pattern target",
        ));
    };
    sockets.hosts.extend(site.socket_host().cloned());
    http.rules.push(HttpRule {
        site,
        methods: need.methods.map(<[String]>::to_vec),
    });
    Ok(())
}

/// `provider:access` on a provider's name: the host must define it, and
/// the executor's `network:sites` targets must cover each of its base
/// URLs (the credential goes nowhere the executor may not call).
pub(super) fn provider(
    http: &mut HttpPart,
    asking: &mut Asking<'_>,
    need: &Need<'_>,
) -> Result<(), Stop> {
    asking.capability(need, None)?;
    let name = need.target.unwrap_or_default();
    let Some(def) = need.units.http.provider(name) else {
        return Err(Stop::new(
            DenyCode::UnknownTarget,
            format!("provider `{name}` is not defined in this host's `[providers]`"),
        ));
    };
    let sites: Vec<SitePattern> = need
        .manifest
        .capabilities
        .iter()
        .filter(|c| c.capability == Capability::NetworkSites)
        .filter_map(|c| c.target.as_deref().and_then(|t| SitePattern::parse(t).ok()))
        .collect();
    if let Some(uncovered) = def
        .base_urls
        .iter()
        .find(|b| !sites.iter().any(|s| s.covers(b)))
    {
        return Err(Stop::new(
            DenyCode::TargetMismatch,
            format!("provider `{name}`: no `network:sites` target of the executor covers its base URL `{uncovered}`"),
        ));
    }
    http.providers.push(ProviderPart {
        name: def.name.clone(),
        base_urls: def.base_urls.clone(),
        header: def.header.clone(),
        format: def.format.clone(),
    });
    Ok(())
}
