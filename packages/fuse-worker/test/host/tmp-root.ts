// Test helper: a fresh directory under os.tmpdir(), removed after the test.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/** Creates a temp dir removed when the current test finishes. */
export async function tempRoot(prefix = 'af-host-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  onTestFinished(() => rm(dir, { recursive: true, force: true }));
  return dir;
}
