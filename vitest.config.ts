import { defineConfig } from 'vitest/config';

// Workspace packages resolve to their TypeScript source under this condition (see package.json `exports`).
const conditions = ['@agentfense/source'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['packages/*/test/**/*.test.ts'],
          setupFiles: ['test/helpers/fail-on-warning.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'system',
          // The one-shot CLI's run helper (packages/control/src/cli/run-helper/) would outlive each test
          // file's `run`s; off unless asked for. test/cli/run-helper*.test.ts and the helper's security
          // test switch it on for their own runs.
          env: { AGENTFENSE_RUN_HELPER: process.env['AGENTFENSE_RUN_HELPER'] ?? '0' },
          include: ['test/**/*.test.ts'],
          setupFiles: ['test/helpers/fail-on-warning.ts'],
          // Real processes are launched from dist/: build it first so no test runs a stale build.
          globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/docker-setup.ts'],
          // Real mounts and sandboxes share one kernel and two cores: run these files one at a time.
          fileParallelism: false,
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
    ],
  },
});
