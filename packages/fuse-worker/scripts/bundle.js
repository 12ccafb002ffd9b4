// Bundles the worker program (dist/main.js, tsc's output, and everything it imports: the protocol package,
// msgpackr, picomatch) into one ES module, dist/worker.js, which spawnWorker() runs. Run by `pnpm build` and
// by the test setup, after `tsc -b`.
//
// Why: one idle worker runs per sandbox, so its memory is multiplied by the number of sandboxes. Loaded as
// ~80 separate ES modules, each module costs V8 a module record, a namespace, its loader job and the
// resolution state on top of its code; one bundled module measured 2.1 MiB less private memory per idle
// mounted worker (13.6 -> 11.5 MiB, bench/README.md "Idle memory"). Not minified: stack traces in the
// worker's log keep their names and lines (minifying saved only another 0.15 MiB).
//
// The list of input files goes to dist/worker.inputs.json, so spawnWorker() can tell a bundle that is older
// than its inputs (a `tsc -b` without this step) and fall back to dist/main.js instead of running stale code.
import { writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');

const result = await build({
  entryPoints: [join(dist, 'main.js')],
  outfile: join(dist, 'worker.js'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // fuse-native loads its compiled addon relative to its own package; msgpackr's optional native string
  // extractor is not used by the worker (its messages are small; WORKER_ENV disables the attempt).
  external: ['fuse-native', 'fuse-native/*', 'msgpackr-extract'],
  // Bundled CommonJS dependencies (picomatch) call require() for Node built-ins.
  banner: {
    js: "import { createRequire as __workerRequire } from 'node:module';\nconst require = __workerRequire(import.meta.url);",
  },
  sourcemap: 'linked',
  sourcesContent: false,
  metafile: true,
  absWorkingDir: root,
  logLevel: 'warning',
});

const inputs = Object.keys(result.metafile.inputs).map((input) => resolve(root, input));
await writeFile(join(dist, 'worker.inputs.json'), `${JSON.stringify(inputs, null, 1)}\n`);
