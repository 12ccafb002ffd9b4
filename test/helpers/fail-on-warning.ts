// A Node warning (unhandled rejection, MaxListeners leak, deprecation) is a bug: fail the test file.
import { afterAll } from 'vitest';

const warnings: Error[] = [];
const onWarning = (warning: Error): void => {
  warnings.push(warning);
};
process.on('warning', onWarning);

afterAll(() => {
  process.off('warning', onWarning);
  if (warnings.length > 0) {
    throw new Error(`Node emitted warnings:\n${warnings.map((w) => `${w.name}: ${w.message}`).join('\n')}`);
  }
});
