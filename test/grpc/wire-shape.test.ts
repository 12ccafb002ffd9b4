// Our sandbox.v1 .proto files are wire-identical to the original's, which its Python SDK is compiled
// against: every field number, name, type and label, every enum value, every RPC and its streaming. The
// original's shape is recorded in original-wire-shape.txt (from its api/proto files); a renumbered or
// retyped field here would decode as garbage in an existing client. What we add beside it (the network
// policy) is new messages, new RPCs, and fields numbered from 100 in the original's messages, where a
// field the original adds later cannot collide.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { wireShape } from '../helpers/grpc-wire-shape.js';

const protoRoot = fileURLToPath(new URL('../../packages/control/proto', import.meta.url));
/** The lowest field number of ours in a message of the original's. */
const OWN_FIELDS_FROM = 100;

/** The message or enum a shape line describes (`message sandbox.v1.Sandbox 3 …` → `sandbox.v1.Sandbox`). */
function typeOf(line: string): string | undefined {
  return /^(?:message|enum) (\S+)/.exec(line)?.[1];
}

describe('sandbox.v1 wire shape', () => {
  it("matches the original's field for field, and adds only new RPCs, messages and fields ≥ 100", async () => {
    const recorded = (await readFile(new URL('original-wire-shape.txt', import.meta.url), 'utf8'))
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'));
    const ours = wireShape(
      ['sandbox/v1/common.proto', 'sandbox/v1/codebase.proto', 'sandbox/v1/sandbox.proto'],
      [protoRoot, '/usr/include'],
    );
    expect(recorded.length).toBeGreaterThan(100);
    expect(recorded.filter((line) => !ours.includes(line))).toEqual([]);

    const originalTypes = new Set(recorded.map(typeOf));
    const originalRpcs = new Set(recorded.filter((l) => l.startsWith('rpc ')).map((l) => l.split(' ')[1]));
    const added = ours.filter((line) => !recorded.includes(line));
    const misplaced = added.filter((line) => {
      if (line.startsWith('rpc ')) return originalRpcs.has(line.split(' ')[1]);
      if (!originalTypes.has(typeOf(line))) return false;
      return !line.startsWith('message ') || Number(line.split(' ')[2]) < OWN_FIELDS_FROM;
    });
    expect(misplaced).toEqual([]);
    // The additions this checks are there: the network policy's fields and RPCs.
    expect(added).toEqual(
      expect.arrayContaining([
        'message sandbox.v1.CreateSandboxRequest 100 network_policy LABEL_OPTIONAL TYPE_MESSAGE NetworkPolicy',
        'message sandbox.v1.Sandbox 100 network_policy LABEL_OPTIONAL TYPE_MESSAGE NetworkPolicy',
        'message sandbox.v1.CreateSandboxRequest 101 secrets LABEL_REPEATED TYPE_MESSAGE Secret',
        'rpc /sandbox.v1.SandboxService/SetNetworkPolicy SetNetworkPolicyRequest -> Sandbox',
        'rpc /sandbox.v1.SandboxService/GetNetworkAudit GetNetworkAuditRequest -> GetNetworkAuditResponse',
        'rpc /sandbox.v1.SandboxService/SetSecret SetSecretRequest -> Sandbox',
        'rpc /sandbox.v1.SandboxService/CreateCheckpoint CreateCheckpointRequest -> Checkpoint',
        'rpc /sandbox.v1.SandboxService/RestoreCheckpoint RestoreCheckpointRequest -> RestoreCheckpointResponse',
      ]),
    );
  });
});
