import { describe, expect, it } from 'vitest';
import { homedir } from 'node:os';
import { resolveDataDir } from '../src/index.js';
import { isSameProcess, processStartTime, selfIdentity } from '../src/sandboxes/process-identity.js';

describe('data directory resolution', () => {
  it('prefers the option, then AGENTFENSE_DATA_DIR, then XDG_DATA_HOME, then ~/.local/share', () => {
    const env = { AGENTFENSE_DATA_DIR: '/env/dir', XDG_DATA_HOME: '/xdg' };
    expect(resolveDataDir({ dataDir: '/opt/af', env })).toBe('/opt/af');
    expect(resolveDataDir({ env })).toBe('/env/dir');
    expect(resolveDataDir({ env: { XDG_DATA_HOME: '/xdg' } })).toBe('/xdg/agentfense');
    expect(resolveDataDir({ env: { XDG_DATA_HOME: 'relative' } })).toBe(
      `${homedir()}/.local/share/agentfense`,
    );
    expect(resolveDataDir({ env: { AGENTFENSE_DATA_DIR: '' } })).toBe(`${homedir()}/.local/share/agentfense`);
  });

  it('makes a relative choice absolute', () => {
    expect(resolveDataDir({ dataDir: 'rel/data', env: {} })).toBe(`${process.cwd()}/rel/data`);
  });
});

describe('process identity', () => {
  it('knows this process and tells a different start time apart', () => {
    const self = selfIdentity();
    expect(self.pid).toBe(process.pid);
    expect(processStartTime(process.pid)).toBe(self.start);
    expect(isSameProcess(process.pid, self.start)).toBe(true);
    expect(isSameProcess(process.pid, '1')).toBe(false);
    expect(isSameProcess(null, self.start)).toBe(false);
    expect(processStartTime(0)).toBeUndefined();
    expect(processStartTime(2 ** 22 + 12345)).toBeUndefined();
  });
});
