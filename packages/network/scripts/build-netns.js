// Builds packages/network/dist/netns.node from native/netns.c (part of `pnpm build`): sockets opened in a
// sandbox's network namespace and the original destination of a redirected connection (src/native.ts);
// and dist/relay.node from native/relay.c and native/fast*.c: the splice relay of allowed tunnels
// (src/relay.ts) and the accept path in C on its thread (src/fast-accept.ts), the explicit proxy's
// CONNECT included (fast-connect.c).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildAddon } from '../../../scripts/build-addon.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
buildAddon({ source: join(root, 'native', 'netns.c'), output: join(root, 'dist', 'netns.node') });
buildAddon({
  sources: ['relay.c', 'fast.c', 'fast-connect.c', 'fast-http.c', 'fast-js.c', 'fast-table.c'].map((file) =>
    join(root, 'native', file),
  ),
  includes: ['relay.h', 'fast.h', 'fast-table.h'].map((file) => join(root, 'native', file)),
  output: join(root, 'dist', 'relay.node'),
  libs: ['-lpthread'],
});
