/** A later turn of the event loop: requests and timers that are due run before it. */
export function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}
