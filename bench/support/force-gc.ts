import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/**
 * A full garbage collection, available whether or not node was started with `--expose-gc`
 * (`npm run bench` starts it without): the flag can be set at run time, and a fresh context then
 * sees `gc`.
 */
function resolveGc(): () => void {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
}

const gc = resolveGc();

/** Collects garbage twice (the second pass frees what finalisers of the first released). */
export function forceGc(): void {
  gc();
  gc();
}
