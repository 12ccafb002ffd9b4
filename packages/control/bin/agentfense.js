#!/usr/bin/env node
// The `agentfense` executable: runs the built CLI (`pnpm build` after changing the sources). It runs the
// bundle (scripts/bundle-cli.js: one module instead of ~150, what makes a single invocation quick) when the
// bundle is at least as new as every package's last `tsc -b` — tsc rewrites a project's .tsbuildinfo
// whenever it emits, so after a bare `tsc -b` the bundle would run stale code and tsc's output
// (dist/cli/bin.js) runs instead. Likewise after a `pnpm install` that changed a dependency (pnpm rewrites
// node_modules/.modules.yaml; the bundle holds some dependencies and paths into node_modules/.pnpm).
// Eight stats, not one per input file.
import { statSync } from 'node:fs';

const PACKAGES = [
  'protocol',
  'blobs',
  'fuse-worker',
  'runtime-bwrap',
  'runtime-docker',
  'node-agent',
  'control',
];
const INPUTS = [
  ...PACKAGES.map((name) => new URL(`../../${name}/dist/.tsbuildinfo`, import.meta.url)),
  new URL('../../../node_modules/.modules.yaml', import.meta.url),
];
const BUNDLE = new URL('../dist/bundle/', import.meta.url);

function bundleIsFresh() {
  const bundle = statSync(new URL('cli.js', BUNDLE), { throwIfNoEntry: false });
  if (bundle === undefined) return false;
  return INPUTS.every((input) => {
    const info = statSync(input, { throwIfNoEntry: false });
    return info === undefined || info.mtimeMs <= bundle.mtimeMs;
  });
}

const dir = bundleIsFresh() ? BUNDLE : new URL('../dist/cli/', import.meta.url);
// First the prelude (closes leaked fds; hands a `run` to the data directory's run helper, or starts its
// worker), then the CLI unless the helper ran the command.
const status = await (await import(new URL('prelude.js', dir).href)).prelude(process.argv.slice(2));
if (status === undefined) await import(new URL(dir === BUNDLE ? 'cli.js' : 'bin.js', dir).href);
else process.exitCode = status;
