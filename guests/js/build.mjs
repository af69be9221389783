// Builds the `js` executor (and, with --net, `js-http`) from app.js.
//
//   node build.mjs OUT_DIR          -> OUT_DIR/js.wasm       (no wasi:http)
//   node build.mjs OUT_DIR --net    -> OUT_DIR/js-http.wasm  (fetch through
//                                      wasi:http; needs network:sites)
//
// Calls @bytecodealliance/componentize-js 0.23.0's API directly (pinned in
// package.json and package-lock.json): `jco componentize` (jco 1.35) would
// run its own componentize-js 0.22. AOT (weval) stays off: it downloads a
// binary at build time. The world is js-world.wit (gatehouse's `executor`
// plus the WASI filesystem, for `fs`), with ../../wit as its dependencies.
// Everything generated goes to a temporary directory: the source tree is
// left as it is.

import { componentize } from '@bytecodealliance/componentize-js';
import { copyFile, mkdir, mkdtemp, readdir, rm, writeFile, rename } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const net = args.includes('--net');
const outDir = args.find((a) => !a.startsWith('--'));
if (!outDir) {
  console.error('usage: node build.mjs OUT_DIR [--net]');
  process.exit(3);
}
const out = join(resolve(outDir), net ? 'js-http.wasm' : 'js.wasm');

// StarlingMonkey's features: stdio, random, clocks, http, fetch-event.
// `http` is fetch (wasi:http/outgoing-handler and types); `fetch-event` is
// the incoming-handler event, which also pulls in wasi:http/types, so both
// go for a component without wasi:http. stdio, random and clocks stay:
// they are gatehouse's baseline, and without stdio errors are not reported
// (the component just traps).
const disableFeatures = net ? ['fetch-event'] : ['http', 'fetch-event'];

const work = await mkdtemp(join(tmpdir(), 'gatehouse-js-'));
try {
  // The source, with the build's one setting beside it.
  await copyFile(join(here, 'app.js'), join(work, 'app.js'));
  await writeFile(
    join(work, 'build-config.js'),
    `// Written by build.mjs: whether this build has fetch (the http feature).\nexport const NETWORK = ${net};\n`,
  );
  // The WIT: js-world.wit as the root package, gatehouse's package and the
  // WASI packages as its dependencies.
  const wit = join(work, 'wit');
  const witSource = join(here, '..', '..', 'wit');
  await mkdir(join(wit, 'deps'), { recursive: true });
  await copyFile(join(here, 'js-world.wit'), join(wit, 'world.wit'));
  await copyFile(join(witSource, 'executor.wit'), join(wit, 'deps', 'executor.wit'));
  for (const f of await readdir(join(witSource, 'deps'))) {
    await copyFile(join(witSource, 'deps', f), join(wit, 'deps', f));
  }
  const { component } = await componentize({
    sourcePath: join(work, 'app.js'),
    witPath: wit,
    worldName: 'js-executor',
    disableFeatures,
    enableAot: false,
  });
  await mkdir(dirname(out), { recursive: true });
  await writeFile(`${out}.tmp`, component);
  await rename(`${out}.tmp`, out);
} finally {
  await rm(work, { recursive: true, force: true });
}
