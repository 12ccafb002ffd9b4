// The sandbox CA's name constraints, read back by OpenSSL: permitted DNS subtrees are exactly the bound
// hosts (a `*.domain` binding as its domain), every address range is excluded, and the extension is
// critical. What a verifier then does with a leaf for another name is test/security/secrets-ca.test.ts.
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { LeafCertificates, createSandboxCa, permittedSubtrees } from '../src/ca.js';

function text(pem: string): string {
  return execFileSync('openssl', ['x509', '-noout', '-text'], { input: pem, encoding: 'utf8' });
}

/** The Name Constraints block of `openssl x509 -text`: its header line and indented entries. */
function constraints(pem: string): string[] {
  const lines = text(pem).split('\n');
  const at = lines.findIndex((l) => l.includes('X509v3 Name Constraints'));
  if (at === -1) return [];
  const indent = (l: string): number => l.length - l.trimStart().length;
  const block = [lines[at] ?? ''];
  for (const line of lines.slice(at + 1)) {
    if (indent(line) <= indent(lines[at] ?? '')) break;
    block.push(line);
  }
  return block.map((l) => l.trim());
}

describe('sandbox CA', () => {
  it('is constrained, critically, to the bound hosts and to no address', () => {
    const ca = createSandboxCa({
      sandboxId: 'sb_test',
      hosts: ['pub.test', '*.example.com', 'api.example.com', 'pub.test'],
    });
    expect(constraints(ca.cert)).toEqual([
      'X509v3 Name Constraints: critical',
      'Permitted:',
      'DNS:api.example.com',
      'DNS:example.com',
      'DNS:pub.test',
      'Excluded:',
      'IP:0.0.0.0/0.0.0.0',
      'IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0',
    ]);
    expect(new X509Certificate(ca.cert).ca).toBe(true);
    // The leaves it signs name their host alone, inside the constraint.
    const leaf = new X509Certificate(new LeafCertificates(ca).for('a.example.com').cert);
    expect(leaf.subjectAltName).toBe('DNS:a.example.com');
    expect(leaf.checkIssued(new X509Certificate(ca.cert))).toBe(true);
  });

  it('maps a wildcard binding to its domain, and refuses a CA for no host', () => {
    expect(permittedSubtrees(['*.a.test', 'b.test', 'a.test'])).toEqual(['a.test', 'b.test']);
    expect(() => createSandboxCa({ sandboxId: 'sb_test', hosts: [] })).toThrow(/at least one bound host/);
  });
});
