// Bundles the `agentfense` executable's program (dist/cli/bin.js, tsc's output, with the workspace packages
// and the small pure-JS dependencies it loads on every invocation) into dist/bundle/, which
// bin/agentfense.js runs. Run by `pnpm build` and by the system tests' setup, after `tsc -b`.
//
// Why: each invocation of the CLI is a new node process, and loading ~150 ES modules one by one (resolve,
// read, compile, link each) cost more than node's own start-up (packages/control/bench/README.md, the
// one-shot CLI's figures). Dynamic imports stay dynamic (splitting: the control plane, the
// runtimes, serve's servers are chunks loaded only by the commands that use them).
//
// Left as they are (external): native addons (better-sqlite3) and dependencies only a
// long-running command loads (serve's fastify and gRPC, MCP, execa for compiling a seccomp filter). pino
// is bundled: its transports (which find their worker file by path) are not used, only pino.destination.
//
// A module that locates files next to itself (`import.meta.url`: the reaper beside the watchdog, the
// worker program, the seccomp compiler, a workspace package's addon) gets the URL of its original file in dist/, so it finds them
// wherever its code lands in the bundle.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const outdir = join(root, 'dist', 'bundle');

/**
 * Packages left out of the bundle. Everything else the CLI imports is bundled, dependencies of bundled
 * packages included (pino and its helpers: ~50 CommonJS files loaded one by one otherwise).
 */
const EXTERNAL = [
  // native addons (and what locates them)
  /^better-sqlite3$/,
  /^msgpackr-extract$/,
  // only long-running commands load these (serve, mcp) or compiling a seccomp filter (execa)
  /^fastify$/,
  /^@fastify\//,
  /^@grpc\//,
  /^@bufbuild\//,
  /^@modelcontextprotocol\//,
  /^ajv$/,
  /^zod$/,
  /^execa$/,
  /^undici$/,
];
/**
 * CommonJS externals the CLI loads on every `run`: required (the banner's require) instead of imported, so
 * node does not run its CommonJS export scanner (cjs-module-lexer) over them first.
 */
const REQUIRED = new Set(['better-sqlite3']);

/**
 * How the bundle imports an external package that `args` imports: by its bare name when this package
 * (control) resolves that name to the same file, else by a path relative to the bundle. Under pnpm a
 * dependency of another workspace package (runtime-docker's undici, msgpackr's optional
 * msgpackr-extract) is not in control's node_modules, so its bare name would not resolve from dist/bundle.
 * A path into node_modules/.pnpm holds until the next install changes that package (`pnpm build` after
 * `pnpm install`, as scripts/setup does).
 */
async function specifierFor(b, args) {
  const probe = (resolveDir) =>
    b.resolve(args.path, { kind: args.kind, resolveDir, pluginData: { probe: true } });
  const wanted = await probe(args.resolveDir);
  // Not installed (an optional dependency): left as it is; its importer handles the failure.
  if (wanted.errors.length > 0) return args.path;
  const ours = await probe(root);
  if (ours.errors.length === 0 && ours.path === wanted.path) return args.path;
  const path = relative(outdir, wanted.path);
  return path.startsWith('.') ? path : `./${path}`;
}

const externals = {
  name: 'externals',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, async (args) => {
      if (args.pluginData?.probe === true) return undefined;
      if (args.path.startsWith('node:')) return { external: true };
      if (!EXTERNAL.some((re) => re.test(args.path))) return undefined;
      if (REQUIRED.has(args.path) && args.namespace !== 'required') {
        return { path: args.path, namespace: 'required' };
      }
      return { path: await specifierFor(b, args), external: true };
    });
    // A CommonJS module of one line: esbuild's own interop gives the importer its default/named exports.
    b.onLoad({ filter: /.*/, namespace: 'required' }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: 'js',
      resolveDir: root,
    }));
  },
};

/**
 * The watchdog's `./reaper.js` is left relative to the bundle: it names the bundle's own reaper entry
 * (dist/bundle/reaper.js), so a bundled run is reaped by a bundled reaper, and tsc's output by tsc's.
 */
const RELATIVE_TO_BUNDLE = [join(root, 'dist', 'cli', 'watchdog.js')];

const ownUrls = {
  name: 'own-urls',
  setup(b) {
    b.onLoad({ filter: /[/]dist[/].*\.js$/ }, async (args) => {
      if (RELATIVE_TO_BUNDLE.includes(args.path)) return undefined;
      const text = await readFile(args.path, 'utf8');
      if (!text.includes('import.meta.url')) return undefined;
      const original = relative(outdir, args.path);
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

const common = {
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // Bundled CommonJS dependencies (commander, picomatch) call require() for Node built-ins.
  banner: {
    js: "import { createRequire as __cliRequire } from 'node:module';\nconst require = __cliRequire(import.meta.url);",
  },
  plugins: [externals, ownUrls],
  sourcemap: 'linked',
  sourcesContent: false,
  absWorkingDir: root,
  logLevel: 'warning',
};

await rm(outdir, { recursive: true, force: true });
// The prelude on its own (no shared chunks): it must spawn `run`'s worker after loading as little as
// possible. It shares nothing with the CLI but the early worker, which fuse-worker keeps on globalThis.
await build({
  ...common,
  entryPoints: { prelude: join(root, 'dist', 'cli', 'prelude.js') },
  outdir,
});
const result = await build({
  ...common,
  // The reaper (watchdog.ts) runs in the background after every `run`, competing with whatever the user
  // runs next: bundled too.
  entryPoints: {
    cli: join(root, 'dist', 'cli', 'bin.js'),
    reaper: join(root, 'dist', 'cli', 'reaper.js'),
  },
  outdir,
  splitting: true,
  metafile: true,
});
if (process.env['BUNDLE_CLI_META'])
  await writeFile(process.env['BUNDLE_CLI_META'], JSON.stringify(result.metafile));
