import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Integration tests start server processes; two cores.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
