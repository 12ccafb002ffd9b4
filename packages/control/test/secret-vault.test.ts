// What the control plane keeps of a sandbox's secrets, without a sandbox: each one's source (never its
// value) at create, and what a process that does not hold the values reads again at a start.
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretVault } from '../src/sandboxes/secrets.js';

const OPEN = { mode: 'open', rules: [] } as const;
const VALUE = 'sk-vault-value-0123456789abcdef';

describe('secret vault', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'af-secret-vault-'));
    await writeFile(join(dir, 'key'), `${VALUE}\n`);
    process.env['AF_TEST_VAULT_KEY'] = VALUE;
  });
  afterAll(async () => {
    delete process.env['AF_TEST_VAULT_KEY'];
    await rm(dir, { recursive: true, force: true });
  });

  it('keeps each source, never a value; a value given as it is has none', async () => {
    const { secrets, stored } = await SecretVault.prepare(
      [
        { name: 'A', hosts: ['A.test'], env: 'AF_TEST_VAULT_KEY' },
        { name: 'B', hosts: ['b.test'], file: join(dir, 'key'), header: { name: 'X', value: 'k {value}' } },
        { name: 'C', hosts: ['*.c.test'], command: ['printf', '%s', VALUE] },
        { name: 'D', hosts: ['d.test'], value: VALUE },
      ],
      OPEN,
    );
    expect(secrets.map((s) => s.value)).toEqual([VALUE, VALUE, VALUE, VALUE]);
    expect(stored.map(({ placeholder: _placeholder, ...rest }) => rest)).toEqual([
      { name: 'A', hosts: ['a.test'], source: { env: 'AF_TEST_VAULT_KEY' } },
      {
        name: 'B',
        hosts: ['b.test'],
        header: { name: 'X', value: 'k {value}' },
        source: { file: join(dir, 'key') },
      },
      { name: 'C', hosts: ['*.c.test'], source: { command: ['printf', '%s', VALUE] } },
      { name: 'D', hosts: ['d.test'], source: null },
    ]);
    expect(stored.map((s) => s.placeholder)).toEqual(secrets.map((s) => s.placeholder));
    // The command's argv is kept (it names the value only in this test); the values themselves never.
    expect(JSON.stringify(stored.slice(0, 2))).not.toContain(VALUE);
  });

  it('refuses two sources at once, and a sandbox without a network before reading any', async () => {
    await expect(
      SecretVault.prepare([{ name: 'A', hosts: ['a.test'], value: 'x', env: 'HOME' }], OPEN),
    ).rejects.toThrow(/secret A: give exactly one of value, env, file, command \(got value, env\)/);
    const marker = join(dir, 'ran');
    await expect(
      SecretVault.prepare([{ name: 'A', hosts: ['a.test'], command: ['touch', marker] }], {
        mode: 'none',
        rules: [],
      }),
    ).rejects.toThrow(/has no network/);
    expect(existsSync(marker)).toBe(false);
  });

  it('a process without the values reads them from their sources; one given by value stays unusable', async () => {
    const { stored } = await SecretVault.prepare(
      [
        { name: 'A', hosts: ['a.test'], env: 'AF_TEST_VAULT_KEY' },
        { name: 'D', hosts: ['d.test'], value: VALUE },
        { name: 'E', hosts: ['e.test'], env: 'AF_TEST_VAULT_KEY' },
      ],
      OPEN,
    );
    // E's source fails in the new process.
    const later = stored.map((s) => (s.name === 'E' ? { ...s, source: { env: 'AF_TEST_VAULT_UNSET' } } : s));
    const vault = new SecretVault();
    const held = await vault.load('sb_x', later);
    expect(held.usable.map((s) => [s.name, s.value, s.placeholder])).toEqual([
      ['A', VALUE, stored[0]?.placeholder],
    ]);
    expect(held.placeholders).toEqual(Object.fromEntries(stored.map((s) => [s.name, s.placeholder])));
    expect(held.reason).toMatch(
      /^secret D was given by value, which is never stored.*; secret E: the environment variable AF_TEST_VAULT_UNSET is not set: its placeholder is set but never replaced/,
    );
    expect(held.reason).not.toContain(VALUE);
    expect(vault.get('sb_x').map((s) => s.name)).toEqual(['A']);
    // Once its source works, the next start reads it.
    process.env['AF_TEST_VAULT_UNSET'] = VALUE;
    try {
      expect((await vault.load('sb_x', later)).usable.map((s) => s.name)).toEqual(['A', 'E']);
    } finally {
      delete process.env['AF_TEST_VAULT_UNSET'];
    }
  });
});
