// Which build a run helper runs: it serves requests only while the build it loaded is the one on disk
// (the same inputs bin/agentfense.js checks, plus the bundle), so a `pnpm build` or `pnpm install` never
// leaves runs served by old code. A few stats per request.
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const PACKAGES = [
  'protocol',
  'launcher',
  'fuse-native',
  'fuse-worker',
  'runtime-bwrap',
  'runtime-docker',
  'control',
];
/** From dist/cli/run-helper/ (tsc's output, where the helper always runs from). */
const INPUTS = [
  ...PACKAGES.map((name) => new URL(`../../../../${name}/dist/.tsbuildinfo`, import.meta.url)),
  new URL('../../../../../node_modules/.modules.yaml', import.meta.url),
  new URL('../../bundle/cli.js', import.meta.url),
  new URL('../../peercred.node', import.meta.url),
].map((url) => fileURLToPath(url));

/** The inputs' modification times, as one string. */
export function buildStamp(): string {
  return INPUTS.map((path) => String(statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? -1)).join(',');
}
