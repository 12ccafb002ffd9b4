// Lint: typescript-eslint with type information, plus Node-version checks (we target Node 20).
import { fileURLToPath } from 'node:url';
import js from '@eslint/js';
import n from 'eslint-plugin-n';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'coverage/**',
      // Generated from the .proto files at build time (packages/control/scripts/gen-proto.js).
      'packages/control/src/grpc/gen/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: [
            '*.js',
            '*.ts',
            'scripts/*.js',
            'packages/*/bin/*.js',
            'packages/*/bench/*.js',
            // A bench split into small modules (control's bench/workloads).
            'packages/*/bench/*/*.js',
            'packages/*/scripts/*.js',
          ],
          // The bench scripts (one or more per package, control's workloads bench in modules), scripts
          // and configs: more than the default cap of 8.
          maximumDefaultProjectFileMatchCount_THIS_WILL_SLOW_DOWN_LINTING: 56,
        },
        tsconfigRootDir: fileURLToPath(new URL('.', import.meta.url)),
      },
    },
    plugins: { n },
    settings: { n: { version: '>=20.19.0' } },
    rules: {
      'n/no-unsupported-features/node-builtins': 'error',
      'n/no-unsupported-features/es-syntax': 'off',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-console': 'off',
      eqeqeq: ['error', 'always', { null: 'ignore' }],
    },
  },
  {
    files: ['**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    // Plain ESM scripts (bin, bench, demo) run on Node: its globals are defined.
    languageOptions: { globals: n.configs['flat/recommended-module'].languageOptions.globals },
  },
);
