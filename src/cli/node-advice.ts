/** The Node lines agentloop is built and tested for. */
export const SUPPORTED_NODE_LINES = [22, 24] as const;

/**
 * The one line `npm start` prints on a Node older than the supported lines (Node 20 reached its
 * end of life in April 2026 and some dependencies already require 22), or undefined. Only for
 * `npm start` (npm sets `npm_lifecycle_event`): a newcomer's first command is where it helps, and
 * scripts that run `agentloop` directly keep their output as it was.
 */
export function nodeAdvice(nodeVersion: string, env: NodeJS.ProcessEnv): string | undefined {
  if (env.npm_lifecycle_event !== "start") return undefined;
  const major = Number(/^v?(\d+)\./.exec(nodeVersion)?.[1]);
  if (!Number.isInteger(major) || major >= SUPPORTED_NODE_LINES[0]) return undefined;
  return `agentloop: Node ${nodeVersion.replace(/^v/, "")} works, on a best-effort basis; Node 22 or 24 is recommended (Node 20 reached its end of life in April 2026)`;
}
