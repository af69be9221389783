//! `deny-sockets`: a plug component that exports every `wasi:sockets`
//! interface and refuses every call.
//!
//! Why it exists: an interpreter built by componentize-py (CPython) links
//! wasi-libc's socket functions, so its component imports `wasi:sockets`
//! even though its Python has no `socket` module. gatehouse links
//! `wasi:sockets` only with `network:sites`, so that component would be
//! refused with `IMPORT_NOT_GRANTED` under a manifest with no network.
//! `wac plug` composes this component into the interpreter (see
//! `guests/python/build.sh`): the composed component no longer imports
//! `wasi:sockets` at all, and a socket call inside it is refused here,
//! inside the guest, with `access-denied`. It hands out no authority: it
//! imports nothing but the `wasi:io` types its signatures name.
//!
//! No socket, datagram stream or name-lookup stream is ever created (every
//! constructor returns `access-denied`), so their resource types are
//! uninhabited enums and their methods are proven unreachable by `match
//! *self {}` rather than asserted.

wit_bindgen::generate!({ path: "wit", world: "deny-sockets", generate_all });

use exports::wasi::sockets::instance_network::Guest as InstanceNetwork;
use exports::wasi::sockets::ip_name_lookup::{
    Guest as NameLookup, GuestResolveAddressStream, IpAddress, ResolveAddressStream,
};
use exports::wasi::sockets::network::{
    ErrorCode, Guest as NetworkGuest, GuestNetwork, IpAddressFamily, IpSocketAddress, Network,
};
use exports::wasi::sockets::tcp::{
    Duration, Guest as Tcp, GuestTcpSocket, InputStream, OutputStream, Pollable, ShutdownType,
    TcpSocket,
};
use exports::wasi::sockets::tcp_create_socket::Guest as TcpCreate;
use exports::wasi::sockets::udp::{
    Guest as Udp, GuestIncomingDatagramStream, GuestOutgoingDatagramStream, GuestUdpSocket,
    IncomingDatagram, IncomingDatagramStream, OutgoingDatagram, OutgoingDatagramStream, UdpSocket,
};
use exports::wasi::sockets::udp_create_socket::Guest as UdpCreate;

struct Deny;

/// The one network handle: it names no network, and every use is refused.
pub struct NoNetwork;

impl GuestNetwork for NoNetwork {}

/// A socket or stream that cannot exist: nothing constructs one.
pub enum Never {}

impl NetworkGuest for Deny {
    type Network = NoNetwork;
}

impl InstanceNetwork for Deny {
    fn instance_network() -> Network {
        Network::new(NoNetwork)
    }
}

impl NameLookup for Deny {
    type ResolveAddressStream = Never;

    fn resolve_addresses(
        _network: exports::wasi::sockets::network::NetworkBorrow<'_>,
        _name: String,
    ) -> Result<ResolveAddressStream, ErrorCode> {
        Err(ErrorCode::AccessDenied)
    }
}

impl GuestResolveAddressStream for Never {
    fn resolve_next_address(&self) -> Result<Option<IpAddress>, ErrorCode> {
        match *self {}
    }
    fn subscribe(&self) -> Pollable {
        match *self {}
    }
}

impl TcpCreate for Deny {
    fn create_tcp_socket(_family: IpAddressFamily) -> Result<TcpSocket, ErrorCode> {
        Err(ErrorCode::AccessDenied)
    }
}

impl UdpCreate for Deny {
    fn create_udp_socket(_family: IpAddressFamily) -> Result<UdpSocket, ErrorCode> {
        Err(ErrorCode::AccessDenied)
    }
}

impl Tcp for Deny {
    type TcpSocket = Never;
}

type NetworkBorrow<'a> = exports::wasi::sockets::network::NetworkBorrow<'a>;

impl GuestTcpSocket for Never {
    fn start_bind(&self, _: NetworkBorrow<'_>, _: IpSocketAddress) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn finish_bind(&self) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn start_connect(&self, _: NetworkBorrow<'_>, _: IpSocketAddress) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn finish_connect(&self) -> Result<(InputStream, OutputStream), ErrorCode> {
        match *self {}
    }
    fn start_listen(&self) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn finish_listen(&self) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn accept(&self) -> Result<(TcpSocket, InputStream, OutputStream), ErrorCode> {
        match *self {}
    }
    fn local_address(&self) -> Result<IpSocketAddress, ErrorCode> {
        match *self {}
    }
    fn remote_address(&self) -> Result<IpSocketAddress, ErrorCode> {
        match *self {}
    }
    fn is_listening(&self) -> bool {
        match *self {}
    }
    fn address_family(&self) -> IpAddressFamily {
        match *self {}
    }
    fn set_listen_backlog_size(&self, _: u64) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn keep_alive_enabled(&self) -> Result<bool, ErrorCode> {
        match *self {}
    }
    fn set_keep_alive_enabled(&self, _: bool) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn keep_alive_idle_time(&self) -> Result<Duration, ErrorCode> {
        match *self {}
    }
    fn set_keep_alive_idle_time(&self, _: Duration) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn keep_alive_interval(&self) -> Result<Duration, ErrorCode> {
        match *self {}
    }
    fn set_keep_alive_interval(&self, _: Duration) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn keep_alive_count(&self) -> Result<u32, ErrorCode> {
        match *self {}
    }
    fn set_keep_alive_count(&self, _: u32) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn hop_limit(&self) -> Result<u8, ErrorCode> {
        match *self {}
    }
    fn set_hop_limit(&self, _: u8) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn receive_buffer_size(&self) -> Result<u64, ErrorCode> {
        match *self {}
    }
    fn set_receive_buffer_size(&self, _: u64) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn send_buffer_size(&self) -> Result<u64, ErrorCode> {
        match *self {}
    }
    fn set_send_buffer_size(&self, _: u64) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn subscribe(&self) -> Pollable {
        match *self {}
    }
    fn shutdown(&self, _: ShutdownType) -> Result<(), ErrorCode> {
        match *self {}
    }
}

impl Udp for Deny {
    type UdpSocket = Never;
    type IncomingDatagramStream = Never;
    type OutgoingDatagramStream = Never;
}

impl GuestUdpSocket for Never {
    fn start_bind(&self, _: NetworkBorrow<'_>, _: IpSocketAddress) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn finish_bind(&self) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn stream(
        &self,
        _: Option<IpSocketAddress>,
    ) -> Result<(IncomingDatagramStream, OutgoingDatagramStream), ErrorCode> {
        match *self {}
    }
    fn local_address(&self) -> Result<IpSocketAddress, ErrorCode> {
        match *self {}
    }
    fn remote_address(&self) -> Result<IpSocketAddress, ErrorCode> {
        match *self {}
    }
    fn address_family(&self) -> IpAddressFamily {
        match *self {}
    }
    fn unicast_hop_limit(&self) -> Result<u8, ErrorCode> {
        match *self {}
    }
    fn set_unicast_hop_limit(&self, _: u8) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn receive_buffer_size(&self) -> Result<u64, ErrorCode> {
        match *self {}
    }
    fn set_receive_buffer_size(&self, _: u64) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn send_buffer_size(&self) -> Result<u64, ErrorCode> {
        match *self {}
    }
    fn set_send_buffer_size(&self, _: u64) -> Result<(), ErrorCode> {
        match *self {}
    }
    fn subscribe(&self) -> Pollable {
        match *self {}
    }
}

impl GuestIncomingDatagramStream for Never {
    fn receive(&self, _: u64) -> Result<Vec<IncomingDatagram>, ErrorCode> {
        match *self {}
    }
    fn subscribe(&self) -> Pollable {
        match *self {}
    }
}

impl GuestOutgoingDatagramStream for Never {
    fn check_send(&self) -> Result<u64, ErrorCode> {
        match *self {}
    }
    fn send(&self, _: Vec<OutgoingDatagram>) -> Result<u64, ErrorCode> {
        match *self {}
    }
    fn subscribe(&self) -> Pollable {
        match *self {}
    }
}

export!(Deny);
