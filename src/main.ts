// Entry point: wired up in src/main.ts once the layers exist.
export {};
