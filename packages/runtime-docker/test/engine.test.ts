// Engine errors: every message the engine gives for a known failure maps to a stable code and a fix.
import { describe, expect, it } from 'vitest';
import { engineError } from '../src/engine/engine-errors.js';
import type { DockerCli } from '../src/setup/cli.js';

const cli: DockerCli = { path: '/usr/bin/docker', env: {}, host: 'unix:///run/x.sock' };

describe('engineError', () => {
  it.each([
    [
      'Cannot connect to the Docker daemon at unix:///run/x.sock. Is the docker daemon running?',
      'AF_UNAVAILABLE',
      /agentfense setup docker/,
    ],
    [
      'permission denied while trying to connect to the Docker daemon socket',
      'AF_UNAVAILABLE',
      /no Docker engine answers/,
    ],
    [
      'Error response from daemon: No such image: agentfense/base:latest',
      'AF_UNAVAILABLE',
      /build it with `agentfense setup docker`/,
    ],
    [
      'Error response from daemon: path /x is mounted on / but it is not a shared or slave mount',
      'AF_INVALID_ARGUMENT',
      /make-shared/,
    ],
    ['Error response from daemon: No such container: abc', 'AF_WRONG_STATE', /not running/],
    ['Error response from daemon: Container abc is not running', 'AF_WRONG_STATE', /not running/],
    // runc, for an exec that raced the container's end (its pid 1 died).
    ['cannot exec in a stopped state: unknown\r\n', 'AF_WRONG_STATE', /not running/],
    ['something else entirely', 'AF_INTERNAL', /docker failed while doing it/],
  ])('%s → %s', (stderr, code, message) => {
    const err = engineError(stderr, { action: 'doing it', cli, image: 'agentfense/base:latest' });
    expect(err.code).toBe(code);
    expect(err.message).toMatch(message);
  });

  it('tells users of a custom image to build or load it (never pulled)', () => {
    const err = engineError('No such image: mine:1', { action: 'x', cli, image: 'mine:1' });
    expect(err.message).toMatch(/build or load it/);
  });
});
