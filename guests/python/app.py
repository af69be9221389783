"""gatehouse's `python` executor: runs the Python code it is given.

Input: `{"code": "...", "stdin": "..."}` (`stdin` optional). Output, as the
executor's result: `{"stdout": "...", "stderr": "...", "exception": null}`,
or with `exception` holding the traceback when the code raised. An
exception in the code is a result, not a failure of the executor; only
input that is not such an object is refused (`invalid-input`).

The code runs in this component's CPython (componentize-py), under the
grants of its turn and nothing else: files beneath the preopened roots
(the working directory is the workspace), no environment unless granted,
no sockets (the component has none: `build.sh` plugs `deny-sockets` into
its `wasi:sockets` imports) and no subprocesses (WASI has none).
"""
import importlib
import io
import json
import sys
import traceback

# The standard library the code can import. componentize-py runs this
# module at build time and snapshots the interpreter after it; a turn has
# no filesystem holding the standard library, so a module that is not
# imported here (or by one imported here) cannot be imported by the code.
# Modules that need sockets, subprocesses or threads are left out: a turn
# has none of them.
STDLIB = [
    "abc", "argparse", "array", "base64", "binascii", "bisect", "calendar",
    "cmath", "codecs", "collections", "collections.abc", "colorsys",
    "configparser", "contextlib", "copy", "csv", "dataclasses", "datetime",
    "decimal", "difflib", "email", "email.message", "email.parser", "enum",
    "errno", "fnmatch", "fractions", "functools", "glob", "graphlib", "gzip",
    "hashlib", "heapq", "hmac", "html", "html.parser", "inspect", "io",
    "ipaddress", "itertools", "json", "keyword", "locale", "logging", "math",
    "numbers", "operator", "os", "pathlib", "pickle", "pprint", "queue",
    "random", "re", "secrets", "shlex", "shutil", "statistics", "string",
    "struct", "tarfile", "tempfile", "textwrap", "time", "timeit", "tokenize",
    "tomllib", "types", "typing", "unicodedata", "urllib.parse", "uuid",
    "warnings", "weakref", "xml.dom.minidom", "xml.etree.ElementTree",
    "zipfile", "zlib",
]
for _name in STDLIB:
    importlib.import_module(_name)

import wit_world
from componentize_py_types import Err
try:
    from wit_world.imports.types import Error_InvalidInput
except ImportError:
    # A world that also imports wasi:http/types (python-http): componentize-py
    # then names gatehouse's `types` after its package.
    from wit_world.imports.gatehouse_executor_types import Error_InvalidInput


class _Tee(io.TextIOBase):
    """Keeps what the code prints and passes it on as it is written to the
    real stream, so that the host's output cap (`LIMIT_OUTPUT`) stops a
    print flood while it happens instead of after it filled memory."""

    def __init__(self, real):
        self._real = real
        self._parts = []

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self._parts.append(s)
        self._real.write(s)
        return len(s)

    def flush(self):
        self._real.flush()

    def value(self):
        return "".join(self._parts)


def _invalid(message):
    return Err(Error_InvalidInput(message))


def _request(input):
    """The code and stdin of `input`, or the refusal naming what is wrong."""
    try:
        request = json.loads(input)
    except ValueError as e:
        raise _invalid(f"the input is not JSON: {e}")
    if not isinstance(request, dict):
        raise _invalid('the input must be an object: {"code": "print(1)"}')
    code = request.get("code")
    if not isinstance(code, str):
        raise _invalid('the input needs `code`, a string: {"code": "print(1)"}')
    stdin = request.get("stdin", "")
    if not isinstance(stdin, str):
        raise _invalid("`stdin` must be a string")
    unknown = sorted(set(request) - {"code", "stdin"})
    if unknown:
        raise _invalid(f"unknown field `{unknown[0]}` (expected `code`, `stdin`)")
    return code, stdin


def _traceback(e):
    """The traceback of `e` from the code's own frames on: the frame of
    this file that ran it is left out."""
    tb = e.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "<code>":
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb))


class WitWorld(wit_world.WitWorld):
    def run(self, input: str) -> str:
        code, stdin = _request(input)
        out, err = _Tee(sys.__stdout__), _Tee(sys.__stderr__)
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(stdin), out, err
        exception = None
        try:
            compiled = compile(code, "<code>", "exec")
            exec(compiled, {"__name__": "__main__", "__builtins__": __builtins__})
        except SystemExit as e:
            if e.code not in (None, 0):
                exception = f"SystemExit: {e.code}"
        except BaseException as e:  # the code's failure is its result
            exception = _traceback(e)
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved
            try:
                out.flush()
                err.flush()
            except OSError:
                pass  # past the output cap: the host reports LIMIT_OUTPUT
        return json.dumps({"stdout": out.value(), "stderr": err.value(), "exception": exception})
