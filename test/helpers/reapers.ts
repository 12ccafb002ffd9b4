// `agentfense run` (the executable) exits as soon as its command is done and leaves the teardown of its
// one-shot sandbox to a detached reaper (packages/control/src/cli/watchdog.ts). Tests that remove their
// data directory afterwards first wait for those reapers, so nothing is removed under a reaper at work.
import { execa } from 'execa';

/** Waits until no reaper works on `dataDir` (at most `timeoutMs`); true if none is left. */
export async function waitForReapers(dataDir: string, timeoutMs = 30_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // The watchdog shell and the reaper both carry `reaper.js --data <dataDir>` in their argv.
    const found = await execa('pgrep', ['-f', `reaper.js --data ${dataDir}`], { reject: false });
    if (found.exitCode !== 0) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
}
