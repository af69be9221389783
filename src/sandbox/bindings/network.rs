//! `network:sites` → name lookup for the granted host names only, and TCP
//! connections only to the addresses those lookups returned (or to a
//! granted IP literal), on the granted ports. Nothing else: no UDP, no
//! bind, no listen, no accept.
//!
//! Two pieces, both built from the plan's [`HostPattern`]s:
//!
//! - `wasi:sockets/ip-name-lookup` is gatehouse's own host, not
//!   wasmtime-wasi's: wasmtime-wasi's lookup is all-or-nothing
//!   (`allow_ip_name_lookup`) and has no per-name hook. Ours answers a name
//!   only if a granted pattern names it, asks the host resolver only then
//!   (or `[network] resolve`, as the HTTP sender does), and records every
//!   address it hands out in an [`AllowSet`]. A name matched only through
//!   a wildcard is never handed, nor allowed, a special address (the HTTP
//!   sender's rule, [`may_connect`]).
//! - The rest of `wasi:sockets` is wasmtime-wasi's, linked interface by
//!   interface, with a `socket_addr_check` that admits a TCP connect only to
//!   an `(address, port)` in that [`AllowSet`].
//!
//! Without a `network:sites` grant none of this is linked (the import check
//! refuses a `wasi:sockets` import first), and the context keeps
//! `allow_tcp(false)`.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::future::Future;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::{self as p2, sync};
use wasmtime_wasi::p2::{DynPollable, Network, Pollable};
use wasmtime_wasi::sockets::{SocketAddrUse, WasiSockets};

use super::{Open, OpenError, Prepare, PrepareError, Unit};
use crate::policy::http::{is_wildcard, may_connect};
use crate::policy::target::{is_host_name, parse_ip};
use crate::policy::HostPattern;
use crate::sandbox::HostState;

mod generated {
    // Only `ip-name-lookup` is linked from here. The resources it shares
    // with the rest of WASI are mapped to wasmtime-wasi's types, so a
    // `network` handle from wasmtime-wasi's `instance-network` is accepted
    // here and our stream's pollable works with wasmtime-wasi's `poll`;
    // `error-code` and `ip-address` are plain values, checked structurally.
    // (Aliasing whole interfaces instead does not compile: the world's
    // generated `add_to_linker` then calls wasmtime-wasi's with the wrong
    // arguments.) The inline WIT repeats the 0.2.12 definitions
    // (wasmtime-wasi 48's version) so that guests built against any 0.2.x
    // match by semver, as they do for the rest of WASI.
    wasmtime::component::bindgen!({
        // One file, not the `wit/` directory, whose `deps/` would define
        // these WASI packages a second time.
        path: "wit/executor.wit",
        inline: "
            package gatehouse:network;

            world sites {
                import wasi:sockets/ip-name-lookup@0.2.12;
            }

            package wasi:io@0.2.12 {
                interface poll {
                    resource pollable;
                }
            }

            package wasi:sockets@0.2.12 {
                interface network {
                    resource network;
                    enum error-code {
                        unknown,
                        access-denied,
                        not-supported,
                        invalid-argument,
                        out-of-memory,
                        timeout,
                        concurrency-conflict,
                        not-in-progress,
                        would-block,
                        invalid-state,
                        new-socket-limit,
                        address-not-bindable,
                        address-in-use,
                        remote-unreachable,
                        connection-refused,
                        connection-reset,
                        connection-aborted,
                        datagram-too-large,
                        name-unresolvable,
                        temporary-resolver-failure,
                        permanent-resolver-failure,
                    }
                    enum ip-address-family { ipv4, ipv6 }
                    type ipv4-address = tuple<u8, u8, u8, u8>;
                    type ipv6-address = tuple<u16, u16, u16, u16, u16, u16, u16, u16>;
                    variant ip-address {
                        ipv4(ipv4-address),
                        ipv6(ipv6-address),
                    }
                }

                interface ip-name-lookup {
                    use wasi:io/poll@0.2.12.{pollable};
                    use network.{network, error-code, ip-address};

                    resource resolve-address-stream {
                        resolve-next-address: func() -> result<option<ip-address>, error-code>;
                        subscribe: func() -> pollable;
                    }

                    resolve-addresses: func(network: borrow<network>, name: string) -> result<resolve-address-stream, error-code>;
                }
            }
        ",
        world: "gatehouse:network/sites",
        imports: { default: trappable },
        with: {
            "wasi:io/poll.pollable": wasmtime_wasi::p2::DynPollable,
            "wasi:sockets/network.network": wasmtime_wasi::p2::Network,
            "wasi:sockets/ip-name-lookup.resolve-address-stream": crate::sandbox::network::ResolvedAddresses,
        },
    });
}

use generated::wasi::sockets::ip_name_lookup;
use generated::wasi::sockets::network::{ErrorCode, IpAddress};

/// Resolves a host name to its addresses. A plain function so that tests
/// can stand in for the host resolver and count the queries.
type Resolver = fn(&str) -> std::io::Result<Vec<IpAddr>>;

/// The host resolver (`getaddrinfo`). It blocks, which is fine: the store
/// is synchronous, and the run's deadline and hostcall fuel bound how
/// often a guest can call it (though not how long one query takes).
fn system_resolver(name: &str) -> std::io::Result<Vec<IpAddr>> {
    Ok((name, 0).to_socket_addrs()?.map(|a| a.ip()).collect())
}

/// The `(address, port)` pairs a guest may connect to: the granted IP
/// literals, and every address a granted name resolved to during this run.
/// `None` as the port means any port (a pattern without one).
#[derive(Debug, Default)]
pub struct AllowSet {
    entries: BTreeSet<(IpAddr, Option<u16>)>,
}

impl AllowSet {
    fn insert(&mut self, ip: IpAddr, port: Option<u16>) {
        self.entries.insert((ip.to_canonical(), port));
    }

    /// Whether a connection to `addr` is allowed.
    pub fn permits(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        self.entries.contains(&(ip, None)) || self.entries.contains(&(ip, Some(addr.port())))
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The decision of `socket_addr_check`, for one use of one address.
///
/// Only TCP connect is ever allowed, and only to the [`AllowSet`]. An
/// unbound socket's `connect` first asks to bind the wildcard address on
/// port 0 (the kernel picks the local end; nothing listens there), so that
/// one bind is allowed too; any other bind is refused, and a socket bound
/// that way still cannot `listen`. Every variant is listed, with no
/// catch-all, so a new use in a wasmtime upgrade fails to compile here
/// instead of being silently decided.
fn permits_use(allowed: &Mutex<AllowSet>, addr: SocketAddr, use_: SocketAddrUse) -> bool {
    match use_ {
        SocketAddrUse::TcpConnect => match allowed.lock() {
            Ok(set) => set.permits(addr),
            // A poisoned set is not trusted: refuse.
            Err(_) => false,
        },
        SocketAddrUse::TcpBind => addr.ip().is_unspecified() && addr.port() == 0,
        SocketAddrUse::TcpListen
        | SocketAddrUse::TcpAccept
        | SocketAddrUse::UdpBind
        | SocketAddrUse::UdpSend
        | SocketAddrUse::UdpReceive => false,
    }
}

/// Whether the host part of `pattern` names `name`: the policy core's one
/// host matcher ([`HostPattern::matches_host`]), so that a grant, the gate
/// and this layer never disagree (`*.0.0.1` never covers `127.0.0.1`).
fn host_matches(pattern: &HostPattern, name: &str, _ip: Option<IpAddr>) -> bool {
    pattern.matches_host(name)
}

/// Names the host answers itself (`[network] resolve`), shared with the
/// HTTP sender: both interfaces see a name resolve to the same addresses.
type Pinned = Arc<super::http::HttpClient>;

/// The `network:sites` state of one run: the granted patterns and the
/// addresses handed out so far.
pub struct Sites {
    patterns: Vec<HostPattern>,
    /// Shared with the context's `socket_addr_check`, which reads it at
    /// every connect.
    allowed: Arc<Mutex<AllowSet>>,
    resolver: Resolver,
    pinned: Option<Pinned>,
}

impl Sites {
    /// The sites of `hosts` (none without `network:sites`), with the
    /// granted IP literals already allowed.
    pub fn new(hosts: &[HostPattern]) -> Sites {
        Sites::with_resolver(hosts.to_vec(), system_resolver)
    }

    /// The same sites, answering the names of `[network] resolve` with
    /// its addresses first, as the HTTP sender does.
    pub fn pinned(mut self, client: Pinned) -> Sites {
        self.pinned = Some(client);
        self
    }

    fn with_resolver(patterns: Vec<HostPattern>, resolver: Resolver) -> Sites {
        let mut set = AllowSet::default();
        for p in &patterns {
            // A literal needs no lookup: `127.0.0.1:8080` granted is a
            // connection the guest may open directly.
            if let Some(ip) = parse_ip(p.host()) {
                set.insert(ip, p.port());
            }
        }
        Sites {
            patterns,
            allowed: Arc::new(Mutex::new(set)),
            resolver,
            pinned: None,
        }
    }

    /// Whether `network:sites` was granted at all.
    pub fn granted(&self) -> bool {
        !self.patterns.is_empty()
    }

    /// Resolves `name` if a granted pattern names it, and allows its
    /// addresses on the ports of every pattern that names it.
    ///
    /// # Security
    /// This is the only place a guest's name reaches the host resolver, and
    /// only after the name matched a grant: an ungranted name is
    /// `name-unresolvable` without any query (so it cannot be used to leak
    /// data through DNS). A pattern that names the host itself grants
    /// whatever it resolves to, private or loopback included; one that
    /// matched it only through a wildcard never grants an address in the
    /// special ranges ([`may_connect`], the rule the HTTP sender applies
    /// too). The guest is answered only the addresses it may connect to:
    /// none left is `name-unresolvable` ("no suitable address").
    pub fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, ErrorCode> {
        self.lookup_until(name, None)
    }

    /// [`Sites::lookup`], giving up on the host resolver at `deadline`
    /// (the run's): a resolver that never answers cannot hold the run. The
    /// query then finishes on its own thread and its answer is dropped.
    pub fn lookup_until(
        &self,
        name: &str,
        deadline: Option<std::time::Instant>,
    ) -> Result<Vec<IpAddr>, ErrorCode> {
        let name = name.to_ascii_lowercase();
        let ip = parse_ip(&name);
        if ip.is_none() && !is_host_name(&name) {
            return Err(ErrorCode::InvalidArgument);
        }
        // Each matching pattern's port, and whether it matched only
        // through a wildcard.
        let ports: Vec<(Option<u16>, bool)> = self
            .patterns
            .iter()
            .filter(|p| host_matches(p, &name, ip))
            .map(|p| (p.port(), is_wildcard(p)))
            .collect();
        if ports.is_empty() {
            return Err(ErrorCode::NameUnresolvable);
        }
        let pinned = self
            .pinned
            .as_ref()
            .and_then(|c| c.resolve.get(&name))
            .cloned();
        let resolved = match (ip, pinned) {
            // As WASI specifies: an address is returned as-is, unresolved.
            (Some(ip), _) => vec![ip],
            (None, Some(pinned)) => pinned,
            (None, None) => match deadline {
                None => (self.resolver)(&name).map_err(|_| ErrorCode::NameUnresolvable)?,
                Some(deadline) => {
                    let (resolver, query) = (self.resolver, name.clone());
                    let (tx, rx) = std::sync::mpsc::channel();
                    std::thread::Builder::new()
                        .name("gatehouse-resolve".into())
                        .spawn(move || {
                            let _ = tx.send(resolver(&query));
                        })
                        .map_err(|_| ErrorCode::TemporaryResolverFailure)?;
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    match rx.recv_timeout(left) {
                        Ok(answer) => answer.map_err(|_| ErrorCode::NameUnresolvable)?,
                        Err(_) => return Err(ErrorCode::TemporaryResolverFailure),
                    }
                }
            },
        };
        // getaddrinfo repeats an address per socket type; keep the first.
        // Only the addresses some matching pattern may reach.
        let mut addrs: Vec<IpAddr> = Vec::new();
        for ip in resolved.into_iter().map(|ip| ip.to_canonical()) {
            let reachable = ports.iter().any(|(_, wild)| may_connect(*wild, ip));
            if reachable && !addrs.contains(&ip) {
                addrs.push(ip);
            }
        }
        if addrs.is_empty() {
            return Err(ErrorCode::NameUnresolvable);
        }
        // Record before returning, so a connect can never see an address
        // the allow-set does not hold yet.
        let mut set = self
            .allowed
            .lock()
            .map_err(|_| ErrorCode::PermanentResolverFailure)?;
        for ip in &addrs {
            for (port, wild) in &ports {
                if may_connect(*wild, *ip) {
                    set.insert(*ip, *port);
                }
            }
        }
        Ok(addrs)
    }

    /// Whether a TCP connection to `addr` is allowed now.
    pub fn permits(&self, addr: SocketAddr) -> bool {
        permits_use(&self.allowed, addr, SocketAddrUse::TcpConnect)
    }
}

/// The WIT form of an address.
fn ip_address(ip: IpAddr) -> IpAddress {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            IpAddress::Ipv4((a, b, c, d))
        }
        IpAddr::V6(v6) => {
            let [a, b, c, d, e, f, g, h] = v6.segments();
            IpAddress::Ipv6((a, b, c, d, e, f, g, h))
        }
    }
}

/// The `resolve-address-stream` resource: the addresses of one lookup,
/// resolved before the stream was handed out.
pub struct ResolvedAddresses {
    addrs: std::vec::IntoIter<IpAddr>,
}

// The addresses are already there, so the stream's pollable is always
// ready. (This is `async_trait`'s expansion of `async fn ready(&mut self)`.)
impl Pollable for ResolvedAddresses {
    fn ready<'a, 'b>(&'a mut self) -> Pin<Box<dyn Future<Output = ()> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(std::future::ready(()))
    }
}

/// What the lookup host works on: the run's [`Sites`] and resource table.
pub struct SitesView<'a> {
    /// The hosts the run may look up.
    pub sites: &'a Sites,
    /// The run's resource table.
    pub table: &'a mut ResourceTable,
    /// The run's deadline: a lookup waits for the resolver no longer.
    pub deadline: std::time::Instant,
}

impl ip_name_lookup::Host for SitesView<'_> {
    fn resolve_addresses(
        &mut self,
        network: Resource<Network>,
        name: String,
    ) -> wasmtime::Result<Result<Resource<ResolvedAddresses>, ErrorCode>> {
        // The network handle is the capability to call this; as in
        // wasmtime-wasi, it only has to be a live one.
        self.table.get(&network)?;
        Ok(match self.sites.lookup_until(&name, Some(self.deadline)) {
            Ok(addrs) => Ok(self.table.push(ResolvedAddresses {
                addrs: addrs.into_iter(),
            })?),
            // Surfaced at once, as wasmtime-wasi does for its own errors.
            Err(code) => Err(code),
        })
    }
}

impl ip_name_lookup::HostResolveAddressStream for SitesView<'_> {
    fn resolve_next_address(
        &mut self,
        this: Resource<ResolvedAddresses>,
    ) -> wasmtime::Result<Result<Option<IpAddress>, ErrorCode>> {
        let stream = self.table.get_mut(&this)?;
        Ok(Ok(stream.addrs.next().map(ip_address)))
    }

    fn subscribe(
        &mut self,
        this: Resource<ResolvedAddresses>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        wasmtime_wasi::p2::subscribe(self.table, this)
    }

    fn drop(&mut self, this: Resource<ResolvedAddresses>) -> wasmtime::Result<()> {
        self.table.delete(this)?;
        Ok(())
    }
}

struct HasSites;

impl HasData for HasSites {
    type Data<'a> = SitesView<'a>;
}

fn sites_view(s: &mut HostState) -> SitesView<'_> {
    SitesView {
        sites: &s.network,
        table: &mut s.table,
        deadline: s.deadline,
    }
}

/// Links `wasi:sockets`: gatehouse's name lookup, and wasmtime-wasi's
/// network, TCP and UDP interfaces.
///
/// UDP is linked because Rust's std imports it in every socket-using
/// guest; the context the unit prepares refuses to create a UDP socket
/// and `socket_addr_check` refuses every UDP address, so it carries no
/// authority.
///
/// # Security
/// Hands the guest the sockets the store's `WasiCtx` allows; call it only
/// together with the unit's `prepare`, which builds that context from
/// the part.
pub fn add_to_linker(l: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::sockets::WasiSocketsView;
    let options = p2::sockets::network::LinkOptions::default();
    p2::sockets::network::add_to_linker::<HostState, WasiSockets>(l, &options, HostState::sockets)?;
    p2::sockets::instance_network::add_to_linker::<HostState, WasiSockets>(l, HostState::sockets)?;
    p2::sockets::tcp_create_socket::add_to_linker::<HostState, WasiSockets>(l, HostState::sockets)?;
    sync::sockets::tcp::add_to_linker::<HostState, WasiSockets>(l, HostState::sockets)?;
    // `create-udp-socket` is async in wasmtime-wasi's default bindings;
    // the store is synchronous, so it comes from `sync` (like `tcp`, `udp`).
    sync::sockets::udp_create_socket::add_to_linker::<HostState, WasiSockets>(
        l,
        HostState::sockets,
    )?;
    sync::sockets::udp::add_to_linker::<HostState, WasiSockets>(l, HostState::sockets)?;
    ip_name_lookup::add_to_linker::<HostState, HasSites>(l, sites_view)?;
    Ok(())
}

/// The hosts `network:sites` was granted on (empty: no socket interface
/// is linked, and the context keeps TCP, UDP and lookup off).
#[derive(Debug, Clone, Default, Serialize)]
pub struct NetworkPart {
    /// The host patterns granted.
    pub hosts: Vec<HostPattern>,
}

/// The network unit.
pub struct NetworkSites;

impl Unit for NetworkSites {
    type Part = NetworkPart;
    type State = Sites;
    type Runtime = ();

    fn open(_: &Open<'_>) -> Result<(), OpenError> {
        Ok(())
    }

    /// With hosts granted: TCP on, UDP off, the address check (the
    /// interfaces are linked by the table, [`crate::sandbox::table`]).
    /// Without: nothing.
    ///
    /// # Security
    /// Grants TCP connections to the addresses the sites allow, which grow
    /// as granted names are resolved during the run.
    fn prepare(part: &NetworkPart, _: &(), cx: &mut Prepare<'_>) -> Result<Sites, PrepareError> {
        let sites = Sites::new(&part.hosts);
        if !sites.granted() {
            return Ok(sites);
        }
        let sites = sites.pinned(cx.runtimes.http.client.clone());
        // wasmtime-wasi's own lookup stays off: ours is linked in its
        // place, and this flag would only matter to wasmtime-wasi's.
        cx.wasi
            .allow_tcp(true)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        let allowed = Arc::clone(&sites.allowed);
        cx.wasi.socket_addr_check(move |addr, use_| {
            // Decided now, not in the future: the answer needs no I/O.
            let ok = permits_use(&allowed, addr, use_);
            Box::pin(std::future::ready(ok))
        });
        Ok(sites)
    }

    fn describe(_: &NetworkPart, sites: &Sites, out: &mut Vec<Cow<'static, str>>) {
        if !sites.granted() {
            return;
        }
        out.push(Cow::Borrowed(
            "wasi:sockets/{network,instance-network,tcp-create-socket,tcp}",
        ));
        out.push(Cow::Borrowed(
            "wasi:sockets/{udp-create-socket,udp} (no udp socket can be created)",
        ));
        out.push(Cow::Borrowed(
            "wasi:sockets/ip-name-lookup (granted names only)",
        ));
        for p in &sites.patterns {
            let what = if parse_ip(p.host()).is_some() {
                "connect"
            } else {
                "name lookup"
            };
            out.push(Cow::Owned(format!("{what}: `{}`", String::from(p.clone()))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn pats(list: &[&str]) -> Vec<HostPattern> {
        list.iter()
            .map(|s| HostPattern::parse(s).unwrap())
            .collect()
    }

    const LOCAL4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const LOCAL6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

    fn fixed(name: &str) -> std::io::Result<Vec<IpAddr>> {
        match name {
            // Each address twice, as getaddrinfo gives one per socket type,
            // and one IPv4-mapped IPv6 address.
            "localhost" => Ok(vec![LOCAL4, LOCAL4, LOCAL6, LOCAL6]),
            "a.example.com" => Ok(vec![IpAddr::V6(
                Ipv4Addr::new(203, 0, 113, 7).to_ipv6_mapped(),
            )]),
            // One public address, then the special ranges a wildcard may
            // not reach.
            "mixed.corp.test" | "mixed.example.com" => Ok(vec![
                "203.0.113.9".parse().unwrap(),
                LOCAL4,
                LOCAL6,
                "10.1.2.3".parse().unwrap(),
                "169.254.169.254".parse().unwrap(),
                "fd00:ec2::254".parse().unwrap(),
                "fe80::1".parse().unwrap(),
                IpAddr::V6(Ipv4Addr::new(192, 168, 1, 1).to_ipv6_mapped()),
            ]),
            "loop.corp.test" => Ok(vec![LOCAL4]),
            _ => Err(std::io::Error::other("no such name")),
        }
    }

    fn at(ip: IpAddr, port: u16) -> SocketAddr {
        SocketAddr::new(ip, port)
    }

    #[test]
    fn host_part_matching() {
        let p = |s: &str| HostPattern::parse(s).unwrap();
        let m = |pat: &str, name: &str| host_matches(&p(pat), name, parse_ip(name));
        assert!(m("localhost:8080", "localhost"));
        assert!(m("localhost", "localhost"));
        assert!(!m("localhost", "localhost.example"));
        assert!(!m("localhost", "xlocalhost"));
        assert!(m("*.example.com", "a.example.com"));
        assert!(m("*.example.com:443", "a.b.example.com"));
        assert!(!m("*.example.com", "example.com"));
        assert!(!m("*.example.com", "aexample.com"));
        assert!(!m("*.example.com", ".example.com"));
        assert!(m("127.0.0.1:80", "127.0.0.1"));
        assert!(!m("127.0.0.1", "127.0.0.2"));
        // Not even a pattern (issue 12, item 7).
        assert!(HostPattern::parse("*.0.0.1").is_err());
        assert!(!m("localhost", "127.0.0.1"));
        assert!(m("[::1]:80", "::1"));
        assert!(m("[::1]", "[::1]"));
        assert!(m("[::1]", "0:0:0:0:0:0:0:1"));
        assert!(!m("[::1]", "::2"));
        assert!(!m("127.0.0.1", "localhost"));
    }

    #[test]
    fn an_ungranted_name_is_refused_without_a_query() {
        static QUERIES: AtomicUsize = AtomicUsize::new(0);
        fn counting(name: &str) -> std::io::Result<Vec<IpAddr>> {
            QUERIES.fetch_add(1, Ordering::SeqCst);
            fixed(name)
        }
        let sites = Sites::with_resolver(pats(&["localhost:8080", "*.example.com"]), counting);
        for name in [
            "example.com",
            "evil.localhost",
            "a.example.org",
            "127.0.0.1",
            "::1",
        ] {
            assert_eq!(
                sites.lookup(name).unwrap_err(),
                ErrorCode::NameUnresolvable,
                "{name}"
            );
        }
        for name in [
            "",
            "localhost.",
            "a b.example.com",
            "x\0.example.com",
            "-a.example.com",
        ] {
            assert_eq!(
                sites.lookup(name).unwrap_err(),
                ErrorCode::InvalidArgument,
                "{name:?}"
            );
        }
        assert_eq!(QUERIES.load(Ordering::SeqCst), 0);
        assert!(sites.allowed.lock().unwrap().is_empty());
        // A granted name is resolved once per lookup.
        assert_eq!(sites.lookup("LocalHost").unwrap(), vec![LOCAL4, LOCAL6]);
        assert_eq!(QUERIES.load(Ordering::SeqCst), 1);
        // A granted name that does not resolve is unresolvable, allowing
        // nothing.
        assert_eq!(
            sites.lookup("b.example.com").unwrap_err(),
            ErrorCode::NameUnresolvable
        );
    }

    #[test]
    fn connects_only_to_resolved_addresses_on_granted_ports() {
        let sites = Sites::with_resolver(
            pats(&["localhost:8080", "localhost:9090", "*.example.com"]),
            fixed,
        );
        // Nothing before a lookup.
        assert!(!sites.permits(at(LOCAL4, 8080)));
        sites.lookup("localhost").unwrap();
        for ip in [LOCAL4, LOCAL6] {
            assert!(sites.permits(at(ip, 8080)));
            assert!(sites.permits(at(ip, 9090)));
            assert!(!sites.permits(at(ip, 8081)));
            assert!(!sites.permits(at(ip, 80)));
        }
        assert!(!sites.permits(at("127.0.0.2".parse().unwrap(), 8080)));
        // A pattern without a port allows every port of what it resolved;
        // IPv4-mapped results are recorded (and checked) as IPv4.
        let public: IpAddr = "203.0.113.7".parse().unwrap();
        assert!(!sites.permits(at(public, 443)));
        assert_eq!(sites.lookup("a.example.com").unwrap(), vec![public]);
        assert!(sites.permits(at(public, 443)));
        assert!(sites.permits(at(public, 1)));
        assert!(sites.permits(at(
            IpAddr::V6(Ipv4Addr::new(203, 0, 113, 7).to_ipv6_mapped()),
            2
        )));
    }

    /// security round 3, item 4: a name matched only through a wildcard
    /// is answered, and allowed, only its addresses outside loopback,
    /// private, link-local (metadata), unique-local and the other special
    /// ranges; a name with none left is unresolvable.
    ///
    /// Positive control: the same name granted by name connects to every
    /// address it resolves to, loopback included.
    #[test]
    fn a_wildcard_match_never_allows_a_special_address() {
        let public: IpAddr = "203.0.113.9".parse().unwrap();
        let wild = Sites::with_resolver(pats(&["*.corp.test:8080"]), fixed);
        assert_eq!(wild.lookup("mixed.corp.test").unwrap(), vec![public]);
        assert!(wild.permits(at(public, 8080)));
        for (ip, _) in wild.allowed.lock().unwrap().entries.iter() {
            assert_eq!(*ip, public);
        }
        assert!(!wild.permits(at(LOCAL4, 8080)));
        assert_eq!(
            wild.lookup("loop.corp.test").unwrap_err(),
            ErrorCode::NameUnresolvable
        );
        assert!(!wild.permits(at(LOCAL4, 8080)));
        // Control: the name itself granted, beside the wildcard.
        let named = Sites::with_resolver(pats(&["*.corp.test:8080", "loop.corp.test:9090"]), fixed);
        assert_eq!(named.lookup("loop.corp.test").unwrap(), vec![LOCAL4]);
        // On the port of the pattern that names it, not the wildcard's.
        assert!(named.permits(at(LOCAL4, 9090)));
        assert!(!named.permits(at(LOCAL4, 8080)));
        let all = Sites::with_resolver(pats(&["mixed.corp.test"]), fixed);
        assert_eq!(all.lookup("mixed.corp.test").unwrap().len(), 8);
        assert!(all.permits(at("169.254.169.254".parse().unwrap(), 80)));
    }

    #[test]
    fn another_port_of_the_same_name_does_not_open_this_one() {
        let sites = Sites::with_resolver(pats(&["localhost:9090"]), fixed);
        sites.lookup("localhost").unwrap();
        assert!(sites.permits(at(LOCAL4, 9090)));
        assert!(!sites.permits(at(LOCAL4, 8080)));
    }

    #[test]
    fn granted_literals_need_no_lookup() {
        let sites = Sites::with_resolver(pats(&["127.0.0.1:8080", "[::1]"]), fixed);
        assert!(sites.permits(at(LOCAL4, 8080)));
        assert!(!sites.permits(at(LOCAL4, 8081)));
        assert!(sites.permits(at(LOCAL6, 1234)));
        // Looking a literal up returns it unresolved, and only if granted.
        assert_eq!(sites.lookup("127.0.0.1").unwrap(), vec![LOCAL4]);
        assert_eq!(
            sites.lookup("127.0.0.2").unwrap_err(),
            ErrorCode::NameUnresolvable
        );
        // A literal grant does not make a name resolvable.
        assert_eq!(
            sites.lookup("localhost").unwrap_err(),
            ErrorCode::NameUnresolvable
        );
    }

    #[test]
    fn only_tcp_connect_and_the_implicit_bind_pass_the_check() {
        let sites = Sites::with_resolver(pats(&["127.0.0.1"]), fixed);
        let a = &sites.allowed;
        let unspecified4 = at(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
        let unspecified6 = at(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0);
        assert!(permits_use(a, at(LOCAL4, 80), SocketAddrUse::TcpConnect));
        assert!(permits_use(a, unspecified4, SocketAddrUse::TcpBind));
        assert!(permits_use(a, unspecified6, SocketAddrUse::TcpBind));
        assert!(!permits_use(a, at(LOCAL4, 80), SocketAddrUse::TcpBind));
        assert!(!permits_use(a, at(LOCAL4, 0), SocketAddrUse::TcpBind));
        assert!(!permits_use(
            a,
            at(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 80),
            SocketAddrUse::TcpBind
        ));
        for use_ in [
            SocketAddrUse::TcpListen,
            SocketAddrUse::TcpAccept,
            SocketAddrUse::UdpBind,
            SocketAddrUse::UdpSend,
            SocketAddrUse::UdpReceive,
        ] {
            assert!(!permits_use(a, at(LOCAL4, 80), use_), "{use_:?}");
            assert!(!permits_use(a, unspecified4, use_), "{use_:?}");
        }
    }

    #[test]
    fn no_grant_links_nothing() {
        let sites = Sites::with_resolver(Vec::new(), fixed);
        assert!(!sites.granted());
        assert_eq!(
            sites.lookup("localhost").unwrap_err(),
            ErrorCode::NameUnresolvable
        );
    }
}
