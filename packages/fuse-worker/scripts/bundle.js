// Bundles the worker program (dist/main.js, tsc's output, and everything it imports: the protocol package,
// msgpackr, picomatch) into one ES module, dist/worker.js, which spawnWorker() runs. Run by `pnpm build` and
// by the test setup, after `tsc -b`.
//
// Why: one idle worker runs per sandbox, so its memory is multiplied by the number of sandboxes. Loaded as
// ~80 separate ES modules, each module costs V8 a module record, a namespace, its loader job and the
// resolution state on top of its code; one bundled module measured 2.1 MiB less private memory per idle
// mounted worker (13.6 -> 11.5 MiB, docs/decisions.md, "The worker runs as one bundled ES module with its own
// log writer"). Not minified: stack traces in the worker's log keep their names and lines (minifying saved
// only another 0.15 MiB).
//
// dist/worker.inputs.json lists the .tsbuildinfo of every package whose tsc output went into the bundle,
// so spawnWorker() can tell a bundle older than its package's last `tsc -b` (tsc rewrites a project's
// .tsbuildinfo whenever it emits; a no-op build leaves it) and fall back to dist/main.js instead of running
// stale code: two stats per process instead of one per input file (~150, on every one-shot `run`).
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');

/**
 * The FUSE binding (@agentfense/fuse-native) is bundled too, but it loads its compiled addon relative to
 * its own module (`import.meta.url`): each of its modules keeps the URL of its original file in dist/.
 */
const bindingUrls = {
  name: 'binding-urls',
  setup(b) {
    b.onLoad({ filter: /[/]fuse-native[/]dist[/].*\.js$/ }, async (args) => {
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      const original = relative(dist, args.path);
      return {
        contents: text.replaceAll(
          'import.meta.url',
          `new URL(${JSON.stringify(original)}, import.meta.url).href`,
        ),
        loader: 'js',
        resolveDir: dirname(args.path),
      };
    });
  },
};

const result = await build({
  entryPoints: [join(dist, 'main.js')],
  outfile: join(dist, 'worker.js'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // msgpackr's optional native string extractor is not used by the worker (its messages are small;
  // WORKER_ENV disables the attempt).
  external: ['msgpackr-extract'],
  plugins: [bindingUrls],
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

const builds = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const file = resolve(root, input);
  const dir = file.match(/^(.*[/]dist)[/]/)?.[1];
  if (dir !== undefined && !file.includes('/node_modules/')) builds.add(join(dir, '.tsbuildinfo'));
}
await writeFile(join(dist, 'worker.inputs.json'), `${JSON.stringify([...builds], null, 1)}\n`);
