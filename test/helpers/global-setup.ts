// System tests launch workers and the CLI from dist/: build every package first (incremental, fast when fresh).
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export default function setup(): void {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  // The gRPC face's TypeScript is generated from its .proto files first (as `pnpm build` does).
  execFileSync(process.execPath, [`${root}packages/control/scripts/gen-proto.js`], {
    cwd: root,
    stdio: 'inherit',
  });
  execFileSync(process.execPath, [`${root}node_modules/typescript/bin/tsc`, '-b'], {
    cwd: root,
    stdio: 'inherit',
  });
  // af-init, the in-sandbox launcher both runtimes start (packages/launcher/scripts/build-af-init.js).
  execFileSync(process.execPath, [`${root}packages/launcher/scripts/build-af-init.js`], {
    cwd: root,
    stdio: 'inherit',
  });
  // The run helper's SO_PEERCRED addon (packages/control/scripts/build-peercred.js).
  execFileSync(process.execPath, [`${root}packages/control/scripts/build-peercred.js`], {
    cwd: root,
    stdio: 'inherit',
  });
  // The network policy point's namespace-socket addon (packages/network/scripts/build-netns.js).
  execFileSync(process.execPath, [`${root}packages/network/scripts/build-netns.js`], {
    cwd: root,
    stdio: 'inherit',
  });
  // The FUSE binding's addon (packages/fuse-native/scripts/build.js).
  execFileSync(process.execPath, [`${root}packages/fuse-native/scripts/build.js`], {
    cwd: root,
    stdio: 'inherit',
  });
  // Workers run the bundle of the worker program (packages/fuse-worker/scripts/bundle.js).
  execFileSync(process.execPath, [`${root}packages/fuse-worker/scripts/bundle.js`], {
    cwd: root,
    stdio: 'inherit',
  });
  // The `agentfense` executable runs the bundle of the CLI (packages/control/scripts/bundle-cli.js).
  execFileSync(process.execPath, [`${root}packages/control/scripts/bundle-cli.js`], {
    cwd: root,
    stdio: 'inherit',
  });
}
