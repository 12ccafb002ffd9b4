// System tests launch workers and the CLI from dist/: build every package first (incremental, fast when fresh).
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  execFileSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, '-b'], {
    cwd: root,
    stdio: 'inherit',
  });
}
