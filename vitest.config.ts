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
