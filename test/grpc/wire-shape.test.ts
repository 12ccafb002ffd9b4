// Issue 14: our sandbox.v1 .proto files are wire-identical to the original's, which its Python SDK is
// compiled against: every field number, name, type and label, every enum value, every RPC and its
// streaming. The original's shape is recorded in original-wire-shape.txt (from its api/proto files);
// a renumbered or retyped field here would decode as garbage in an existing client.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { wireShape } from './wire-shape.js';

const protoRoot = fileURLToPath(new URL('../../packages/control/proto', import.meta.url));

describe('sandbox.v1 wire shape', () => {
  it("matches the original's field for field", async () => {
    const recorded = (await readFile(new URL('original-wire-shape.txt', import.meta.url), 'utf8'))
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'));
    const ours = wireShape(
      ['sandbox/v1/common.proto', 'sandbox/v1/codebase.proto', 'sandbox/v1/sandbox.proto'],
      [protoRoot, '/usr/include'],
    );
    expect(recorded.length).toBeGreaterThan(100);
    expect(ours).toEqual(recorded);
  });
});
