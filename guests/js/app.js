// gatehouse `js` executor: a small JavaScript "code interpreter".
//
// Built with ComponentizeJS 0.23 (SpiderMonkey inside StarlingMonkey) for the
// world `js-executor` (js-world.wit): gatehouse:executor@0.1.0's `executor`
//
//     import log;
//     export run: func(input: string) -> result<string, error>;
//
// plus wasi:filesystem (preopens, types), for `fs` below.
//
// Input (JSON):  {"code": "<JavaScript source>", "stdin": "<text, optional>"}
// Output (JSON): {"stdout": "...", "stderr": "...", "exception": null | "..."}
// (the same contract as guests/python).
//
// * The code runs as a classic script through indirect eval, so top-level
//   `var`/function declarations become globals and `console.log(1+2)` works
//   as it would in a script. Code that only parses as the body of an async
//   function (top-level `await`) is run as one instead.
// * console.log/info/debug/dir/table/count/time* go to `stdout`,
//   console.error/warn/trace/assert to `stderr`. Each line is captured for
//   the JSON result AND written through to the real WASI stdout/stderr as it
//   happens, so gatehouse's per-stream output cap (LIMIT_OUTPUT) sees a print
//   flood while it runs.
// * An exception thrown by the code, a rejected promise it returns or
//   awaits, or an exception thrown in a timer/microtask callback is a normal
//   result: `exception` holds "Name: message" and the code's stack frames
//   (`<code>:line:col`).
// * Bad input (not JSON, not an object, no `code` string, `stdin` not a
//   string, an unknown field) is the WIT error `invalid-input`.
// * Globals the code gets besides StarlingMonkey's web APIs: `stdin` (the
//   text), `readline()`, `fs` (readFileSync, writeFileSync, appendFileSync,
//   readdirSync, statSync, existsSync, mkdirSync, unlinkSync) and
//   `require('fs')`, and `process.env`: the environment variables the
//   turn's `env:read` grants (none without one), read at each run. There is
//   no other `process` API and no subprocess.
//
// How ComponentizeJS maps the WIT result (checked in the spike):
// * returning a string            -> ok(string)
// * throwing {tag, val}           -> err(error) of that variant case, e.g.
//                                    {tag: 'invalid-input', val: 'reason'}
// * throwing anything else (an Error) is NOT converted: the generated
//   binding aborts and the component traps. So `run` must catch everything
//   and only ever throw a well-formed variant.
//
// `run` is an async function: ComponentizeJS turns it into a synchronous
// component export and runs StarlingMonkey's event loop (microtasks, timers,
// and, in a build with the `http` feature, fetch) until the returned promise
// settles. Work the code leaves pending after that (a long unawaited timer)
// is dropped when `run` returns.

import { log } from 'gatehouse:executor/log@0.1.0';
// Files: StarlingMonkey has no file API of its own (its engine imports
// wasi:filesystem only for stdio). Our world (js-world.wit) imports the
// WASI filesystem interfaces, so ComponentizeJS generates bindings for them
// and `fs` below is built on those. gatehouse links them as baseline; the
// preopens they show come only from the manifest's fs:read / fs:write grants
// (none: getDirectories() is empty and every path is ENOENT).
import { getDirectories } from 'wasi:filesystem/preopens@0.2.12';
// The environment variables the turn's grants give (none without
// `env:read`): read in `run`, never at build time, when the snapshot is
// taken (the build machine's environment must not end up in it).
import { getEnvironment } from 'wasi:cli/environment@0.2.12';
// Written by build.mjs next to the copy it builds: whether this build has `fetch`.
import { NETWORK } from './build-config.js';

// In the plain build (no `http` feature) StarlingMonkey still defines
// `fetch`, but its wasi:http imports are stubbed out and calling it traps
// the whole component (`unreachable`). Replace it with one that rejects
// like a network error, so the code sees an exception it can catch.
// (Headers, Request, Response, streams work without wasi:http.)
if (!NETWORK) {
  globalThis.fetch = async function fetch() {
    throw new TypeError(
      'fetch is not available: this js executor is built without network access ' +
        '(no wasi:http; the js-net build with a network:sites grant has it)',
    );
  };
}

// The engine's own console, kept before we replace the methods. We only ever
// hand it one preformatted string so that what reaches the real stream is
// byte for byte what we capture.
const realConsole = {
  log: console.log.bind(console),
  error: console.error.bind(console),
};

// ---------------------------------------------------------------------------
// Formatting values the way a console does (close to Node's util.inspect,
// simplified: no colours, no getters, depth 2).

function formatError(e) {
  let head;
  try {
    head = `${e.name ?? 'Error'}: ${e.message ?? ''}`;
  } catch {
    head = 'Error';
  }
  let stack = '';
  try {
    stack = typeof e.stack === 'string' ? e.stack.trimEnd() : '';
  } catch {}
  // SpiderMonkey stacks are "fn@file:line:col" lines without the message.
  stack = stack && cleanStack(stack);
  return stack ? `${head}\n${stack}` : head;
}

// The user's code is compiled by eval/new Function inside this file, so its
// frames read "app.js line N > eval:L:C". Name them `<code>:L:C` and drop
// this executor's own frames (everything from the first `@app.js:` frame on,
// and the generated bindings' `export_run`).
function cleanStack(stack) {
  const out = [];
  for (const line of stack.split('\n')) {
    if (/@app\.js:\d+|initializer\.js:\d+/.test(line)) break;
    out.push(
      line
        // new Function / AsyncFunction bodies start 2 lines into their wrapper
        .replace(/app\.js line \d+ > \w*Function:(\d+):(\d+)/g, (_, l, c) => `<code>:${l - 2}:${c}`)
        .replace(/app\.js line \d+ > eval/g, '<code>'),
    );
  }
  return out.join('\n');
}

function quote(s) {
  return JSON.stringify(s).replace(/^"|"$/g, "'").replace(/\\"/g, '"');
}

function inspect(v, depth = 0, seen = new Set()) {
  switch (typeof v) {
    case 'string':
      return depth === 0 ? v : quote(v);
    case 'number':
      return Object.is(v, -0) ? '-0' : String(v);
    case 'bigint':
      return `${v}n`;
    case 'undefined':
      return 'undefined';
    case 'boolean':
      return String(v);
    case 'symbol':
      return v.toString();
    case 'function':
      return `[${/^class\s/.test(Function.prototype.toString.call(v)) ? 'class' : 'Function'}: ${v.name || '(anonymous)'}]`;
  }
  if (v === null) return 'null';
  if (seen.has(v)) return '[Circular]';
  if (v instanceof Error) return depth === 0 ? formatError(v) : `[${formatError(v).split('\n')[0]}]`;
  if (v instanceof Date) return isNaN(v) ? 'Invalid Date' : v.toISOString();
  if (v instanceof RegExp) return String(v);
  if (v instanceof Promise) return 'Promise { <pending?> }';
  if (depth > 2) return Array.isArray(v) ? '[Array]' : '[Object]';
  seen.add(v);
  try {
    const next = (x) => inspect(x, depth + 1, seen);
    if (Array.isArray(v) || ArrayBuffer.isView(v)) {
      const items = Array.from(v.length > 100 ? Array.prototype.slice.call(v, 0, 100) : v, next);
      if (v.length > 100) items.push(`... ${v.length - 100} more items`);
      const prefix = Array.isArray(v) ? '' : `${v.constructor.name}(${v.length}) `;
      return items.length ? `${prefix}[ ${items.join(', ')} ]` : `${prefix}[]`;
    }
    if (v instanceof Map) {
      const items = [...v].map(([k, x]) => `${next(k)} => ${next(x)}`);
      return `Map(${v.size}) { ${items.join(', ')} }`.replace('{  }', '{}');
    }
    if (v instanceof Set) {
      return `Set(${v.size}) { ${[...v].map(next).join(', ')} }`.replace('{  }', '{}');
    }
    const keys = Object.keys(v);
    const items = keys.map((k) => `${/^[A-Za-z_$][\w$]*$/.test(k) ? k : quote(k)}: ${next(v[k])}`);
    const ctor = v.constructor && v.constructor !== Object ? `${v.constructor.name} ` : '';
    return items.length ? `${ctor}{ ${items.join(', ')} }` : `${ctor}{}`;
  } catch (e) {
    return '[Uninspectable]';
  } finally {
    seen.delete(v);
  }
}

// console.log's printf-like first argument: %s %d %i %f %j %o %O %c %%.
function format(args) {
  let out = [];
  let rest = args;
  if (typeof args[0] === 'string' && args[0].includes('%')) {
    let i = 1;
    const first = args[0].replace(/%([sdifjoOc%])/g, (m, f) => {
      if (f === '%') return '%';
      if (i >= args.length) return m;
      const a = args[i++];
      switch (f) {
        case 's': return typeof a === 'string' ? a : inspect(a, 1);
        case 'd': return typeof a === 'bigint' ? `${a}n` : String(Number(a));
        case 'i': return typeof a === 'bigint' ? `${a}n` : String(parseInt(a));
        case 'f': return String(parseFloat(a));
        case 'j': try { return JSON.stringify(a); } catch { return '[Circular]'; }
        case 'c': return '';
        default: return inspect(a, 1);
      }
    });
    out.push(first);
    rest = args.slice(i);
  } else if (args.length) {
    out.push(inspect(args[0]));
    rest = args.slice(1);
  }
  for (const a of rest) out.push(inspect(a));
  return out.join(' ');
}

// ---------------------------------------------------------------------------
// Capturing console output for one run.

function makeCapture() {
  // Each stream keeps its chunks in an array, joined once at the end. A
  // write past the host's output cap stops the run there (the host traps
  // it and reports LIMIT_OUTPUT), so nothing here needs to count.
  const streams = { stdout: { parts: [] }, stderr: { parts: [] } };
  function emit(which, line) {
    // Write through first, as it happens: the host counts it (and caps it).
    (which === 'stdout' ? realConsole.log : realConsole.error)(line);
    streams[which].parts.push(line + '\n');
  }
  const counters = new Map();
  const timers = new Map();
  let group = '';
  const out = (which) => (...args) => emit(which, indent(format(args)));
  const indent = (text) => (group ? text.replace(/^/gm, group) : text);
  const consoleImpl = {
    log: out('stdout'),
    info: out('stdout'),
    debug: out('stdout'),
    error: out('stderr'),
    warn: out('stderr'),
    trace: (...args) => {
      let stack = '';
      try { stack = new Error().stack.split('\n').slice(1).join('\n').trimEnd(); } catch {}
      emit('stderr', indent(`Trace: ${format(args)}${stack ? '\n' + stack : ''}`));
    },
    dir: (v) => emit('stdout', indent(inspect(v, 1))),
    table: (v) => emit('stdout', indent(inspect(v, 1))),
    assert: (cond, ...args) => {
      if (!cond) emit('stderr', indent(`Assertion failed${args.length ? ': ' + format(args) : ''}`));
    },
    count: (label = 'default') => {
      const n = (counters.get(label) ?? 0) + 1;
      counters.set(label, n);
      emit('stdout', indent(`${label}: ${n}`));
    },
    countReset: (label = 'default') => counters.delete(label),
    time: (label = 'default') => timers.set(label, performance.now()),
    timeLog: (label = 'default', ...args) =>
      emit('stdout', indent(`${label}: ${(performance.now() - (timers.get(label) ?? 0)).toFixed(3)}ms${args.length ? ' ' + format(args) : ''}`)),
    timeEnd: (label = 'default') => {
      consoleImpl.timeLog(label);
      timers.delete(label);
    },
    group: (...args) => {
      if (args.length) emit('stdout', indent(format(args)));
      group += '  ';
    },
    groupEnd: () => { group = group.slice(2); },
  };
  consoleImpl.groupCollapsed = consoleImpl.group;
  const result = (which) => streams[which].parts.join('');
  return { consoleImpl, result };
}

// ---------------------------------------------------------------------------
// Evaluating the code.

const AsyncFunction = (async () => {}).constructor;

// Returns a function that runs `code`, or throws the SyntaxError of the
// script form. Compiling with `new Function` only parses; nothing runs.
function compile(code) {
  try {
    new Function(code); // parse check only
    // Indirect eval: global scope, classic script semantics, completion value.
    return () => (0, eval)(code);
  } catch (scriptError) {
    if (!(scriptError instanceof SyntaxError)) throw scriptError;
    try {
      // Top-level `await`: run the code as the body of an async function.
      const fn = new AsyncFunction(code);
      return () => fn();
    } catch {
      throw scriptError;
    }
  }
}

// JSON.stringify of one large string needs a lot of linear memory in
// StarlingMonkey: measured, JSON.stringify of a 1 MB string alone passes the
// 64 MiB cap (LIMIT_MEMORY), while returning the same string is fine. So the
// result is quoted in 64 Ki-unit slices (a surrogate pair cut in two becomes
// two \u escapes, which decode back to the same pair).
function jsonString(str) {
  const SLICE = 65536;
  if (str.length <= SLICE) return JSON.stringify(str);
  const parts = [];
  for (let i = 0; i < str.length; i += SLICE) parts.push(JSON.stringify(str.slice(i, i + SLICE)).slice(1, -1));
  return `"${parts.join('')}"`;
}

function invalid(reason) {
  return { tag: 'invalid-input', val: reason };
}

function parseInput(input) {
  let req;
  try {
    req = JSON.parse(input);
  } catch (e) {
    throw invalid(`the input is not JSON: ${e.message}`);
  }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) {
    throw invalid('the input must be an object: {"code": "console.log(1)"}');
  }
  // Messages as the `python` executor's (guests/python/app.py).
  if (typeof req.code !== 'string') throw invalid('the input needs `code`, a string: {"code": "console.log(1)"}');
  if (req.stdin !== undefined && req.stdin !== null && typeof req.stdin !== 'string') {
    throw invalid('`stdin` must be a string');
  }
  const unknown = Object.keys(req).filter((k) => k !== 'code' && k !== 'stdin').sort();
  if (unknown.length) throw invalid(`unknown field \`${unknown[0]}\` (expected \`code\`, \`stdin\`)`);
  return { code: req.code, stdin: req.stdin ?? '' };
}

// The stdin the code can read: the whole text as `stdin`, and `readline()`
// (as in the SpiderMonkey shell) returning the next line without its
// newline, or null at the end. StarlingMonkey has no `process`, `require`
// or file API; these globals are ours.
function installStdin(text) {
  let pos = 0;
  globalThis.stdin = text;
  globalThis.readline = () => {
    if (pos >= text.length) return null;
    let nl = text.indexOf('\n', pos);
    if (nl < 0) nl = text.length;
    const line = text.slice(pos, nl).replace(/\r$/, '');
    pos = nl + 1;
    return line;
  };
}

// ---------------------------------------------------------------------------
// `fs`: a small, synchronous, Node-like file API over wasi:filesystem.
//
// Paths are resolved against the preopens gatehouse grants: a directory of
// the workspace is named by its place there (`.` for the root, `out`), a
// directory outside it by its `mount` (`/data`). The longest matching
// preopen wins, so `out/x.txt` goes through the read-write `out` preopen
// even when `.` is granted read-only. `..` never leaves a preopen (the host
// resolves beneath it and refuses).

const FS_CODES = {
  access: 'EACCES', 'not-permitted': 'EPERM', 'read-only': 'EROFS', exist: 'EEXIST',
  'no-entry': 'ENOENT', 'is-directory': 'EISDIR', 'not-directory': 'ENOTDIR',
  'not-empty': 'ENOTEMPTY', 'bad-descriptor': 'EBADF', invalid: 'EINVAL', loop: 'ELOOP',
  'name-too-long': 'ENAMETOOLONG', 'insufficient-space': 'ENOSPC', quota: 'EDQUOT',
  'file-too-large': 'EFBIG', busy: 'EBUSY', io: 'EIO', unsupported: 'ENOTSUP',
};

function fsError(e, syscall, path) {
  // ComponentizeJS throws a WASI error-code as an Error whose message and
  // `payload` are the code's name ('no-entry').
  const wasi = e && typeof e.payload === 'string' ? e.payload : null;
  if (!wasi) return e;
  const code = FS_CODES[wasi] ?? 'EIO';
  const err = new Error(`${code}: ${wasi}, ${syscall} '${path}'`);
  err.code = code;
  err.syscall = syscall;
  err.path = path;
  return err;
}

function normalize(path) {
  if (typeof path !== 'string') throw new TypeError('path must be a string');
  const abs = path.startsWith('/');
  const out = [];
  for (const seg of path.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..' && out.length && out[out.length - 1] !== '..') out.pop();
    else out.push(seg);
  }
  return (abs ? '/' : '') + out.join('/');
}

let preopens = null;
function resolvePath(path, syscall) {
  preopens ??= getDirectories().map(([dir, name]) => [dir, normalize(name)]);
  const p = normalize(path);
  let best = null;
  for (const [dir, name] of preopens) {
    let rest = null;
    if (name === '') rest = p.startsWith('/') ? null : p; // the workspace root `.`: relative paths
    else if (name === '/') rest = p.startsWith('/') ? p.slice(1) : null; // a mount at `/`
    else if (p === name) rest = '';
    else if (p.startsWith(name + '/')) rest = p.slice(name.length + 1);
    if (rest !== null && (!best || name.length > best.name.length)) best = { dir, name, rest };
  }
  if (!best) {
    const err = new Error(`ENOENT: no granted directory holds '${path}', ${syscall}`);
    err.code = 'ENOENT';
    throw err;
  }
  return { dir: best.dir, rel: best.rest === '' ? '.' : best.rest };
}

// Drops a WASI resource now. ComponentizeJS gives imported resources a
// [Symbol.dispose] (else only a FinalizationRegistry frees them, at some
// GC): without it, 4096 open descriptors end the run with LIMIT_RESOURCES.
function drop(resource) {
  try { resource?.[Symbol.dispose]?.(); } catch {}
}

function withFile(path, syscall, pathFlags, openFlags, descFlags, fn) {
  const { dir, rel } = resolvePath(path, syscall);
  let fd;
  try {
    fd = rel === '.' && !openFlags.create ? dir : dir.openAt(pathFlags, rel, openFlags, descFlags);
    return fn(fd);
  } catch (e) {
    throw fsError(e, syscall, path);
  } finally {
    if (fd && fd !== dir) drop(fd); // never the preopen itself
  }
}

const CHUNK = 65536;
const encodeText = (data) => (typeof data === 'string' ? new TextEncoder().encode(data) : new Uint8Array(data.buffer ?? data, data.byteOffset ?? 0, data.byteLength ?? data.length));

function writeAll(fd, bytes, offset) {
  let off = 0;
  while (off < bytes.length) {
    const n = Number(fd.write(bytes.subarray(off, off + CHUNK), BigInt(offset + off)));
    off += n;
  }
}

const fs = {
  readFileSync(path, options) {
    const encoding = typeof options === 'string' ? options : options?.encoding;
    const bytes = withFile(path, 'open', { symlinkFollow: true }, {}, { read: true }, (fd) => {
      const parts = [];
      let total = 0;
      for (;;) {
        const [chunk, eof] = fd.read(BigInt(CHUNK), BigInt(total));
        parts.push(chunk);
        total += chunk.length;
        if (eof || chunk.length === 0) break;
      }
      const all = new Uint8Array(total);
      let o = 0;
      for (const c of parts) { all.set(c, o); o += c.length; }
      return all;
    });
    return encoding ? new TextDecoder(encoding === 'utf8' ? 'utf-8' : encoding).decode(bytes) : bytes;
  },
  writeFileSync(path, data) {
    withFile(path, 'open', {}, { create: true, truncate: true }, { write: true }, (fd) => writeAll(fd, encodeText(data), 0));
  },
  appendFileSync(path, data) {
    withFile(path, 'open', {}, { create: true }, { write: true }, (fd) => writeAll(fd, encodeText(data), Number(fd.stat().size)));
  },
  readdirSync(path = '.') {
    return withFile(path, 'scandir', { symlinkFollow: true }, { directory: true }, { read: true }, (fd) => {
      const names = [];
      const stream = fd.readDirectory();
      try {
        for (let e; (e = stream.readDirectoryEntry()); ) names.push(e.name);
      } finally {
        drop(stream);
      }
      return names.sort();
    });
  },
  statSync(path) {
    const st = withFile(path, 'stat', { symlinkFollow: true }, {}, { read: true }, (fd) => fd.stat());
    return { size: Number(st.size), isFile: () => st.type === 'regular-file', isDirectory: () => st.type === 'directory', type: st.type };
  },
  existsSync(path) {
    try { fs.statSync(path); return true; } catch { return false; }
  },
  mkdirSync(path) {
    const { dir, rel } = resolvePath(path, 'mkdir');
    try { dir.createDirectoryAt(rel); } catch (e) { throw fsError(e, 'mkdir', path); }
  },
  unlinkSync(path) {
    const { dir, rel } = resolvePath(path, 'unlink');
    try { dir.unlinkFileAt(rel); } catch (e) { throw fsError(e, 'unlink', path); }
  },
};
// The code sees `fs`, and `require('fs')` / `require('node:fs')` for
// Node-style snippets; nothing else is requirable.
globalThis.fs = fs;
globalThis.require = (name) => {
  if (name === 'fs' || name === 'node:fs') return fs;
  throw new Error(`Cannot find module '${name}' (only 'fs' is available)`);
};

// ---------------------------------------------------------------------------
// Exceptions thrown by callbacks the event loop runs (setTimeout,
// setInterval, queueMicrotask) would reach StarlingMonkey's event loop,
// which prints "Exception while (call) event loop error" and traps the whole
// component. Wrap the callbacks: the first such exception becomes the run's
// `exception` (as an uncaught exception ends a Node process), later ones go
// to stderr.
let uncaught = [];
const realSetTimeout = globalThis.setTimeout;
const realSetInterval = globalThis.setInterval;
const realQueueMicrotask = globalThis.queueMicrotask;
function guard(cb) {
  if (typeof cb !== 'function') return cb;
  return function (...args) {
    try {
      return cb.apply(this, args);
    } catch (e) {
      uncaught.push(e);
    }
  };
}
globalThis.setTimeout = (cb, ms, ...args) => realSetTimeout(guard(cb), ms, ...args);
globalThis.setInterval = (cb, ms, ...args) => realSetInterval(guard(cb), ms, ...args);
globalThis.queueMicrotask = (cb) => realQueueMicrotask(guard(cb));

function describe(e) {
  return e instanceof Error ? formatError(e) : `Uncaught ${inspect(e, 1)}`;
}

function isThenable(v) {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof v.then === 'function';
}

export async function run(input) {
  // Never let anything but a well-formed error variant escape (see top).
  try {
    const { code, stdin } = parseInput(input);
    log('debug', `evaluating ${code.length} characters of code, ${stdin.length} of stdin`);

    const { consoleImpl, result } = makeCapture();
    for (const [k, f] of Object.entries(consoleImpl)) console[k] = f;
    installStdin(stdin);
    globalThis.process = { env: Object.fromEntries(getEnvironment()) };

    let exception = null;
    uncaught = [];
    try {
      const value = compile(code)();
      // A promise as the completion value (`main()` / `(async () => …)()`)
      // or from a top-level-await body is awaited, so its output and its
      // rejection belong to this run.
      if (isThenable(value)) await value;
      // Let zero-delay timers and queued microtasks the code left run.
      await new Promise((resolve) => realSetTimeout(resolve, 0));
      if (uncaught.length) throw uncaught.shift();
    } catch (e) {
      exception = describe(e);
    }
    for (const e of uncaught) {
      try {
        consoleImpl.error(e instanceof Error ? `Uncaught ${formatError(e)}` : describe(e));
      } catch {} // past the output cap
    }
    if (exception) log('info', `the code threw: ${exception.split('\n')[0]}`);
    return `{"stdout":${jsonString(result('stdout'))},"stderr":${jsonString(result('stderr'))},"exception":${
      exception === null ? 'null' : jsonString(exception)
    }}`;
  } catch (e) {
    if (e && typeof e === 'object' && typeof e.tag === 'string' && 'val' in e) throw e;
    let msg;
    try { msg = e instanceof Error ? formatError(e) : String(e); } catch { msg = 'unknown failure'; }
    throw { tag: 'failed', val: msg };
  }
}
