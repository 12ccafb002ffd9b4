// The host-wide lease table of sandbox uids (src/host-ids/leases.ts) over a temporary file, with the
// host's accounts, processes and owners replaced by sets the tests control.
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { HostIdLeases, parseUidRange } from '../src/host-ids/leases.js';
import type { HostFacts } from '../src/host-ids/leases.js';
import { dirOwner, hostAccountIds, ownerExists, processOwner } from '../src/host-ids/host-facts.js';
import { processStartTime } from '@agentfense/protocol';

describe('host uid leases', () => {
  let dir: string;
  const accounts = new Set<number>();
  const running = new Set<number>();
  const gone = new Set<string>();
  let scans = 0;
  const host: HostFacts = {
    accounts: () => accounts,
    inUse: () => {
      scans++;
      return running;
    },
    ownerExists: (owner) => !gone.has(owner),
  };
  const open = (count = 4): HostIdLeases =>
    HostIdLeases.open({ file: join(dir, 'ids', 'host-ids.db'), range: { first: 100_000, count }, host });

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'af-leases-'));
    accounts.clear();
    running.clear();
    gone.clear();
    scans = 0;
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('gives each owner its own uid (gid the same), and the same one again when asked again', () => {
    const leases = open();
    const a = leases.lease('dir:/a');
    const b = leases.lease('dir:/b');
    expect(a).toEqual({ uid: 100_000, gid: 100_000 });
    expect(b).toEqual({ uid: 100_001, gid: 100_001 });
    expect(leases.lease('dir:/a')).toEqual(a);
    leases.close();
  });

  it('is one table for every process: two handles never hand out the same uid', () => {
    const one = open();
    const two = open();
    const uids = [one.lease('dir:/a'), two.lease('dir:/b'), one.lease('dir:/c'), two.lease('dir:/d')];
    expect(new Set(uids.map((u) => u.uid)).size).toBe(4);
    one.close();
    two.close();
  });

  it('skips host accounts, moves on after a release, and refuses when the range is used up', () => {
    accounts.add(100_001);
    const leases = open(3);
    expect(leases.lease('dir:/a').uid).toBe(100_000);
    expect(leases.lease('dir:/b').uid).toBe(100_002);
    leases.release('dir:/a');
    // The cursor wrapped: the released uid is reused only now, without a scan of the processes.
    expect(leases.lease('dir:/c').uid).toBe(100_000);
    expect(scans).toBe(0);
    expect(() => leases.lease('dir:/d')).toThrow(/every host uid from 100000 to 100002 is leased/);
    leases.close();
  });

  it('takes back a lease whose owner is gone only when no process runs under the uid', () => {
    const leases = open(2);
    leases.lease('dir:/a');
    leases.lease('dir:/b');
    gone.add('dir:/a');
    running.add(100_000);
    expect(() => leases.lease('dir:/c')).toThrow(/is leased/);
    running.clear();
    expect(leases.lease('dir:/c').uid).toBe(100_000);
    expect(leases.ownerOf(100_000)).toBe('dir:/c');
    leases.close();
  });

  it("re-takes a sandbox's recorded uid, but not from another live owner", () => {
    const leases = open();
    const a = leases.lease('dir:/a');
    leases.release('dir:/a');
    // A reboot, or the table lost: the recorded uid comes back to its owner.
    expect(leases.lease('dir:/a', a)).toEqual(a);
    expect(() => leases.lease('dir:/b', a)).toThrow(/is leased to dir:\/a/);
    accounts.add(100_003);
    expect(() => leases.lease('dir:/c', { uid: 100_003, gid: 100_003 })).toThrow(/host account/);
    leases.close();
  });

  it('moves a lease from its process owner to a sandbox', () => {
    const leases = open();
    const pooled = leases.lease('process:1:2');
    leases.transfer(pooled.uid, 'process:1:2', 'dir:/a');
    expect(leases.lease('dir:/a')).toEqual(pooled);
    expect(() => leases.transfer(pooled.uid, 'process:1:2', 'dir:/b')).toThrow(/not leased to/);
    leases.close();
  });

  it('starts a new table when the file is damaged (a kernel crash without fsync), keeping the old aside', () => {
    const file = join(dir, 'ids', 'host-ids.db');
    open().close();
    writeFileSync(file, 'not a database, only garbage '.repeat(200));
    const leases = open();
    expect(leases.lease('dir:/a')).toEqual({ uid: 100_000, gid: 100_000 });
    leases.close();
    expect(readdirSync(join(dir, 'ids')).some((n) => n.startsWith('host-ids.db.damaged-'))).toBe(true);
  });

  it('reads ranges as FIRST-LAST and refuses ranges that reach login users or past the last uid', () => {
    expect(parseUidRange(undefined)).toEqual({ first: 2_000_000_001, count: 65_536 });
    expect(parseUidRange('3000000000-3000000009')).toEqual({ first: 3_000_000_000, count: 10 });
    expect(() => parseUidRange('1000-2000')).toThrow(/AGENTFENSE_UID_RANGE/);
    expect(() => parseUidRange('4294967290-4294967295')).toThrow(/AGENTFENSE_UID_RANGE/);
    expect(() => parseUidRange('200000-100000')).toThrow(/AGENTFENSE_UID_RANGE/);
  });
});

describe('host facts', () => {
  it('a directory owner exists while its directory does; a process owner while its process does', () => {
    const dir = mkdtempSync(join(tmpdir(), 'af-owner-'));
    expect(ownerExists(dirOwner(dir))).toBe(true);
    rmSync(dir, { recursive: true });
    expect(ownerExists(dirOwner(dir))).toBe(false);
    expect(ownerExists(processOwner(process.pid, processStartTime(process.pid) ?? '', 'a'))).toBe(true);
    expect(ownerExists(processOwner(process.pid, 'another-start', 'a'))).toBe(false);
  });

  it('host accounts are the uids of passwd and the gids of group', () => {
    const dir = mkdtempSync(join(tmpdir(), 'af-accounts-'));
    const passwd = join(dir, 'passwd');
    const group = join(dir, 'group');
    writeFileSync(passwd, 'root:x:0:0::/root:/bin/sh\nu:x:1000:1000::/home/u:/bin/sh\n');
    writeFileSync(group, 'root:x:0:\nonly-group:x:4242:\n');
    expect([...hostAccountIds({ passwd, group })].sort((x, y) => x - y)).toEqual([0, 1000, 4242]);
    rmSync(dir, { recursive: true });
  });
});
