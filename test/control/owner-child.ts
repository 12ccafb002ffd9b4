// A control-plane process for the restart tests: opens the data directory given in argv, starts a
// sandbox over the linked directory, writes into its delta, prints one JSON line
// { sandboxId, workerPid, pid }, then waits. On "close" (stdin) it closes normally; otherwise the test
// SIGKILLs it to simulate a crashed owner.
import { createInterface } from 'node:readline';
import { ControlPlane } from '@agentfense/control';

const [dataDir, repo] = process.argv.slice(2);
if (dataDir === undefined || repo === undefined) throw new Error('usage: owner-child.ts DATA_DIR REPO');
const cp = await ControlPlane.open({ dataDir });
const codebaseId = (await cp.linkCodebase({ path: repo })).id;
const { id } = await cp.createSandbox({ codebaseId });
await cp.startSandbox(id);
const r = await cp.exec(id, 'echo kept > /workspace/output/kept.txt');
if (r.exitCode !== 0) throw new Error(`write failed: ${r.stderr.toString()}`);
process.stdout.write(`${JSON.stringify({ sandboxId: id, workerPid: cp.workerPid(id), pid: process.pid })}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  if (line === 'close') {
    await cp.close();
    process.stdout.write('closed\n');
    process.exit(0);
  }
}
