// The run helper's entry (spawned by spawn.ts): `node main.js --data DIR`. Output goes to the data
// directory's control log (the control plane's logger); stdio is /dev/null.
import { parseArgs } from 'node:util';
import { DEFAULT_IDLE_SECONDS, RUN_HELPER_IDLE_ENV } from './protocol.js';
import { serveRuns } from './server.js';

function idleMs(): number {
  const raw = process.env[RUN_HELPER_IDLE_ENV];
  const seconds = raw === undefined || raw === '' ? DEFAULT_IDLE_SECONDS : Number(raw);
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : DEFAULT_IDLE_SECONDS * 1000;
}

const { values } = parseArgs({ options: { data: { type: 'string' } }, strict: true });
if (values.data === undefined) throw new Error('usage: main.js --data DIR');
try {
  await serveRuns({ dataDir: values.data, idleMs: idleMs() });
  process.exit(0);
} catch (err) {
  process.stderr.write(
    `agentfense run helper: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
}
