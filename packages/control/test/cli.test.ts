import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../src/index.js';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(...argv: string[]): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (c: string | Uint8Array) => (stdout += String(c)) },
    stderr: { write: (c: string | Uint8Array) => (stderr += String(c)) },
  };
  const code = await runCli(argv, io);
  return { code, stdout, stderr };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'af-cli-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('agentfense explain', () => {
  it('explains paths under the default preset (agent-safe)', async () => {
    const run = await cli('explain', '/src/app.py', '/.env', '/output/r.txt');
    expect(run.code).toBe(0);
    const lines = run.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^\/src\/app\.py\s+read\s+rule #0 glob \*\*\/\* -> read/);
    expect(lines[1]).toMatch(
      /^\/\.env\s+none\s+rule #\d+ glob \*\*\/\.env\*(\/\*\*)? -> none \(priority 100\)/,
    );
    expect(lines[2]).toMatch(/^\/output\/r\.txt\s+write/);
  });

  it('prints the contract §7 JSON shape, with rule null where nothing matched', async () => {
    const rules = join(dir, 'rules.json');
    await writeFile(rules, JSON.stringify([{ pattern: '/src/', permission: 'read' }]));
    const run = await cli('explain', '--rules', rules, '--json', '/src/a.ts', '/other');
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual([
      {
        path: '/src/a.ts',
        permission: 'read',
        rule: { index: 0, pattern: '/src/', type: 'directory', permission: 'read', priority: 0 },
      },
      { path: '/other', permission: 'none', rule: null },
    ]);
  });

  it('shows the seed exception: /secrets/public.key readable under hidden /secrets/**', async () => {
    const rules = join(dir, 'seed.json');
    await writeFile(
      rules,
      JSON.stringify([
        { pattern: '**/*', permission: 'read' },
        { pattern: '/secrets/**', permission: 'none' },
        { pattern: '/secrets/public.key', permission: 'read' },
      ]),
    );
    const run = await cli(
      'explain',
      '--rules',
      rules,
      '--json',
      '/secrets/public.key',
      '/secrets/private.key',
    );
    const [pub, priv] = JSON.parse(run.stdout) as { permission: string }[];
    expect(pub?.permission).toBe('read');
    expect(priv?.permission).toBe('none');
  });

  it.each([
    [['--rules', '/nonexistent/rules.json'], /rules file \/nonexistent\/rules\.json does not exist/],
    [['--preset', 'nope'], /unknown preset "nope"; known presets: agent-safe/],
    [['--preset', 'read-only', '--rules', 'x.json'], /either --preset or --rules, not both/],
  ])('fails clearly on bad policy input %j', async (flags, message) => {
    const run = await cli('explain', ...flags, '/x');
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(message);
    expect(run.stdout).toBe('');
  });

  it('names the file, the rule index and the problem for an invalid rules file', async () => {
    const bad = join(dir, 'bad.json');
    await writeFile(
      bad,
      JSON.stringify([
        { pattern: '**/*', permission: 'read' },
        { pattern: '/x', permission: 'rw' },
      ]),
    );
    const run = await cli('explain', '--rules', bad, '/x');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/bad\.json: rule 1.*"rw"/);
    const notJson = join(dir, 'broken.json');
    await writeFile(notJson, '[{"pattern": ');
    const broken = await cli('explain', '--rules', notJson, '/x');
    expect(broken.code).toBe(2);
    expect(broken.stderr).toMatch(/broken\.json is not valid JSON \(it ends too early\)/);
    // The error says where, never quotes the file (a root CLI may be pointed at /etc/shadow).
    const secret = join(dir, 'secret.json');
    await writeFile(secret, 'root:$6$very-secret-hash:20200:0:99999:7:::\n');
    const quoted = await cli('explain', '--rules', secret, '/x');
    expect(quoted.code).toBe(2);
    expect(quoted.stderr).toMatch(/secret\.json is not valid JSON/);
    expect(quoted.stderr).not.toMatch(/very-secret|root:|\$6/);
    const late = join(dir, 'late.json');
    await writeFile(late, '[\n  {"pattern": "x", }\n]');
    expect((await cli('explain', '--rules', late, '/x')).stderr).toMatch(
      /late\.json is not valid JSON \(line 2, column \d+\)/,
    );
    const notArray = join(dir, 'object.json');
    await writeFile(notArray, '{"pattern": "**/*"}');
    expect((await cli('explain', '--rules', notArray, '/x')).stderr).toMatch(/must hold a JSON array/);
  });

  it('requires at least one path', async () => {
    const run = await cli('explain');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/give codebase paths to explain, or --host/);
  });
});

describe('agentfense presets', () => {
  it('lists the presets with descriptions', async () => {
    const run = await cli('presets');
    expect(run.code).toBe(0);
    for (const name of ['agent-safe', 'read-only', 'full-access', 'development', 'view-only']) {
      expect(run.stdout).toMatch(new RegExp(`^${name}\\s+\\S`, 'm'));
    }
  });

  it('shows one preset as rules usable with --rules', async () => {
    const run = await cli('presets', 'show', 'read-only', '--json');
    expect(JSON.parse(run.stdout)).toEqual([{ pattern: '**/*', permission: 'read' }]);
    const text = await cli('presets', 'show', 'agent-safe');
    expect(text.stdout).toMatch(/\/output\/\*\*\s+glob\s+write\s+10/);
  });
});

describe('agentfense usage', () => {
  it.each([[[]], [['explain']], [['presets']], [['presets', 'show']]])(
    '--help works for %j',
    async (words) => {
      const run = await cli(...words, '--help');
      expect(run.code).toBe(0);
      expect(run.stdout).toMatch(/^Usage: agentfense/m);
    },
  );

  it('rejects an unknown command on stderr with status 2', async () => {
    const run = await cli('frobnicate');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/unknown command 'frobnicate'/);
  });
});
