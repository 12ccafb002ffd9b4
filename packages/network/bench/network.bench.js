// Network policy benchmark (`pnpm bench:network`, root): what the policy point costs a sandbox's traffic,
// measured side by side in one run against the same transfers made from the host directly and through
// the peer's proxy (srt). The steps are in steps.js and setup-step.js (its floor relays in floor.js);
// the test server and its namespace in server.js; srt in srt.js. Everything the bench starts (server, namespace, sandboxes, the /etc/hosts line for srt) is
// stopped and removed at the end, on failure and on SIGINT/SIGTERM too.
//   BENCH_ROUNDS (default 3): rounds of the 1 GiB downloads; BENCH_ISOLATION_ROUNDS (default 5): of the
//   isolation step's; BENCH_LOAD_RATE (bytes a second, default 131072): the pace the server gives each
//   of A's 100 downloads there; BENCH_ONLY (default "download,setup,isolation"; BENCH_STEPS is the same).
//   AGENTFENSE_NETWORK_RELAY=node measures the policy point with its tunnels piped in Node (the download's
//   explicit-proxy line and the set-up step's HTTPS lines are measured beside a policy point that hands
//   tunnels to the kernel relay at once).
import console from 'node:console';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import process from 'node:process';
import { pino } from 'pino';
import { ControlPlane } from '../../control/dist/index.js';
import { firstLine } from './report.js';
import { NAME, SERVER, startTestNet, stopping } from './server.js';
import { addHostsEntry, prepareSrt, removeHostsEntry, writeSrtSettings } from './srt.js';
import { setupStep } from './setup-step.js';
import { downloadStep, isolationStep } from './steps.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ISOLATION_ROUNDS = Number(process.env.BENCH_ISOLATION_ROUNDS ?? 5);
const STEPS = new Set(
  (process.env.BENCH_ONLY ?? process.env.BENCH_STEPS ?? 'download,setup,isolation').split(','),
);

async function main() {
  const dir = await mkdtemp(join(tmpdir(), 'af-bench-net-'));
  let net;
  let cp;
  let cleaning;
  const sandboxes = [];
  const cleanup = () =>
    (cleaning ??= (async () => {
      stopping.abort();
      for (const id of sandboxes) {
        await cp.destroySandbox(id).catch((err) => console.error(`destroying ${id}: ${firstLine(err)}`));
      }
      await cp?.close().catch((err) => console.error(`closing the control plane: ${firstLine(err)}`));
      await net?.stop();
      await removeHostsEntry();
      await rm(dir, { recursive: true, force: true });
    })());
  for (const signal of ['SIGINT', 'SIGTERM'])
    process.once(signal, () => void cleanup().then(() => process.exit(130)));
  try {
    net = await startTestNet(dir);
    await mkdir(join(dir, 'repo'));
    cp = await ControlPlane.open({
      dataDir: join(dir, 'data'),
      logger: pino({ level: 'silent' }),
      network: { hostsFile: net.hostsFile },
    });
    const { id: codebaseId } = await cp.linkCodebase({ path: join(dir, 'repo') });
    const sandbox = async () => {
      const { id } = await cp.createSandbox({
        codebaseId,
        preset: 'agent-safe',
        network: { mode: 'allow', rules: [{ action: 'allow', host: NAME }] },
      });
      sandboxes.push(id);
      await cp.startSandbox(id);
      const runIn = async (argv, options = {}) => {
        const { allowCancel, ...rest } = options;
        const r = await cp.run(id, argv, { timeoutMs: 600_000, ...rest });
        if (allowCancel === true && r.cancelled) return r.stdout;
        if (r.exitCode !== 0) throw new Error(`${argv.join(' ')}: exit ${r.exitCode}: ${r.stderr}`);
        return r.stdout;
      };
      runIn.id = id; // the set-up step finds its policy point by it
      return runIn;
    };
    const a = await sandbox();
    const b = await sandbox();
    // Beside `a`, for the download and set-up steps: a policy point that hands each tunnel to the kernel relay at once
    // (AGENTFENSE_NETWORK_HANDOVER_BYTES=0, read when its process starts) instead of after 512 KiB.
    let handOverAtOnce;
    if (STEPS.has('setup') || STEPS.has('download')) {
      process.env.AGENTFENSE_NETWORK_HANDOVER_BYTES = '0';
      try {
        handOverAtOnce = await sandbox();
      } finally {
        delete process.env.AGENTFENSE_NETWORK_HANDOVER_BYTES;
      }
    }
    const srt = { dir };
    const srtProblem = await prepareSrt();
    if (srtProblem === null) {
      srt.settings = await writeSrtSettings(dir, NAME);
      await addHostsEntry(SERVER, NAME);
    } else srt.error = srtProblem;

    const rows = [];
    if (STEPS.has('download')) rows.push(...(await downloadStep({ a, handOverAtOnce, srt, rounds: ROUNDS })));
    if (STEPS.has('setup')) rows.push(...(await setupStep({ a, handOverAtOnce, srt, dir })));
    await removeHostsEntry();
    if (STEPS.has('isolation')) rows.push(...(await isolationStep({ a, b, rounds: ISOLATION_ROUNDS })));

    console.log('\n| line | ours | beside it, same run | target | |\n|---|---|---|---|---|');
    for (const row of rows) console.log(`| ${row.join(' | ')} |`);
  } finally {
    await cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
