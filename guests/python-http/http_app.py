"""gatehouse's `python-http` executor: the `python` executor with HTTP.

The code runs as in the `python` executor (../python/app.py, which
build.sh copies beside this file: the same input, output and grants), and
it can also make HTTP requests through `wasi:http/outgoing-handler`, each
one decided by gatehouse's policy against the turn's `network:sites`
grants:

- `requests` (`requests.get(url)`, `requests.Session()`): every session
  has requests-wasi-http's `WasiHttpAdapter` mounted for `http://` and
  `https://`, instead of urllib3's sockets. A refused request raises
  `requests.exceptions.ConnectionError`.
- `urllib.request.urlopen(url)` (and `build_opener()`): its `HTTPHandler`
  is replaced by one that sends through the same adapter and also handles
  `https://`. A refused request raises `urllib.error.URLError`; an HTTP
  error status raises `urllib.error.HTTPError`, as usual.

TLS is the host's (there is no `ssl` module). Sockets are not there:
`build.sh` plugs `deny-sockets` into the component's `wasi:sockets`
imports, so `socket` (and `http.client`'s connections) fail to connect.

componentize-py runs this module at build time and snapshots the
interpreter after it, so everything the code may import is imported here
(app.py's STDLIB, and requests with its dependencies).
"""
import io
import socket
import sys
import types
import urllib.error
import urllib.request
import urllib.response
from http.client import HTTPMessage

# urllib3 (imported by requests) probes for IPv6 at import by binding a
# socket. Done at build time, that makes wasi-libc keep the build's
# `wasi:sockets` network handle in the snapshot, a handle no turn has: a
# socket call in the code would then trap instead of failing. So no socket
# is made here (urllib3 sends nothing in this executor: the adapter does).
_has_ipv6, socket.has_ipv6 = socket.has_ipv6, False
try:
    import requests
finally:
    socket.has_ipv6 = _has_ipv6
import wit_world.imports.outgoing_handler  # noqa: E402
import wit_world.imports.wasi_http_types  # noqa: E402
from componentize_py_types import Err  # noqa: E402
from wasi_http_adapter import WasiHttpAdapter  # noqa: E402


def _bindings_package(name):
    """The bindings as requests-wasi-http looks them up: `NAME.types.Err`,
    `NAME.imports.types` (wasi:http/types) and
    `NAME.imports.outgoing_handler`. componentize-py names wasi:http's
    `types` `wasi_http_types` here, since the world also imports
    gatehouse's `types`."""
    modules = {
        name: types.ModuleType(name),
        f"{name}.types": types.ModuleType(f"{name}.types"),
        f"{name}.imports": types.ModuleType(f"{name}.imports"),
        f"{name}.imports.types": wit_world.imports.wasi_http_types,
        f"{name}.imports.outgoing_handler": wit_world.imports.outgoing_handler,
    }
    modules[f"{name}.types"].Err = Err
    sys.modules.update(modules)
    return name


ADAPTER = WasiHttpAdapter(_bindings_package("gatehouse_wasi_http"))

_session_init = requests.Session.__init__


def _session_with_wasi_http(self, *args, **kwargs):
    _session_init(self, *args, **kwargs)
    self.mount("https://", ADAPTER)
    self.mount("http://", ADAPTER)


requests.Session.__init__ = _session_with_wasi_http


class WasiHttpHandler(urllib.request.HTTPHandler):
    """urllib's HTTP (and HTTPS) handler over wasi:http: the request as
    urllib prepared it, sent through `ADAPTER`; redirects and error
    statuses are left to urllib's other handlers, as with http.client."""

    https_request = urllib.request.HTTPHandler.http_request

    def http_open(self, req):
        session = requests.Session()
        session.headers.clear()
        session.trust_env = False
        timeout = req.timeout if isinstance(req.timeout, (int, float)) else None
        try:
            r = session.request(
                req.get_method(),
                req.full_url,
                data=req.data,
                headers=dict(req.header_items()),
                timeout=timeout,
                allow_redirects=False,
            )
        except requests.RequestException as e:
            raise urllib.error.URLError(e) from e
        headers = HTTPMessage()
        for name, value in r.headers.items():
            headers[name] = value
        response = urllib.response.addinfourl(io.BytesIO(r.content), headers, req.full_url, r.status_code)
        response.msg = response.reason = r.reason
        return response

    https_open = http_open


# `urlopen` and `build_opener()` take the module's HTTPHandler when called.
urllib.request.HTTPHandler = WasiHttpHandler

from app import WitWorld  # noqa: E402  (after the transports are in place)

__all__ = ["WitWorld"]
