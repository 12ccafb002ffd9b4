// Attack: outlive your command with a leaderless thread group (helpers/leaderless.ts), Docker. Each command's
// session is killed from the host when it ends (runtime-docker container/cgroup.ts killSession); the kill skipped
// zombies, so a zombie leader whose other thread lived on survived. Defence (protocol
// runtime/thread-group.ts): a process is dead only when none of its threads lives.
import { afterAll, beforeAll, describe, inject } from 'vitest';
import { leaderlessAttack } from '../helpers/leaderless.js';

const docker = inject('docker');

describe.skipIf(docker.dockerHost === null)(
  `a leaderless thread group does not outlive its command (docker${docker.unavailable === null ? '' : `, skipped: ${docker.unavailable}`})`,
  () => {
    const saved = process.env['DOCKER_HOST'];
    beforeAll(() => {
      process.env['DOCKER_HOST'] = docker.dockerHost ?? '';
    });
    afterAll(() => {
      if (saved === undefined) delete process.env['DOCKER_HOST'];
      else process.env['DOCKER_HOST'] = saved;
    });
    leaderlessAttack('docker');
  },
);
