import { readFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { extname, join, normalize, sep } from "node:path";

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json; charset=utf-8",
};

/**
 * Serves a file of the page from `root`. Returns false when there is no such file (the caller
 * answers 404); paths that climb out of `root` never match.
 */
export async function serveStaticFile(
  root: string,
  urlPath: string,
  response: ServerResponse,
): Promise<boolean> {
  const relative = urlPath === "/" ? "index.html" : decodeSafely(urlPath.slice(1));
  if (relative === undefined || relative.includes("\0")) return false;
  const resolvedRoot = normalize(root.endsWith(sep) ? root : root + sep);
  const path = normalize(join(resolvedRoot, relative));
  if (!path.startsWith(resolvedRoot)) return false;
  const type = CONTENT_TYPES[extname(path).toLowerCase()];
  if (type === undefined) return false;
  let body: Buffer;
  try {
    body = await readFile(path);
  } catch {
    return false;
  }
  response.writeHead(200, {
    "content-type": type,
    "content-length": body.length,
    // The page is tiny and changes with each build; always revalidate.
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
  });
  response.end(body);
  return true;
}

function decodeSafely(path: string): string | undefined {
  try {
    return decodeURIComponent(path);
  } catch {
    return undefined;
  }
}
