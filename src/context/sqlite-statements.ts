import type Database from "better-sqlite3";

/**
 * better-sqlite3 12 objects must never be garbage: Node 24 added a cleanup-hook check to
 * `node::ObjectWrap`'s destructor that aborts the process (`Assertion failed: (env) != nullptr`)
 * when a GC finalises a Statement or Database outside a JavaScript context, e.g. an idle GC, and
 * better-sqlite3 before 13 derives both from ObjectWrap (13 fixes it but needs Node 22). So every
 * handle opened through here stays referenced for the life of the process (a closed one costs a
 * few hundred bytes), and statements are prepared once per handle and SQL text, then reused: a
 * session that comes and goes leaves nothing for the GC to finalise. `pragma()` prepares a fresh
 * statement on every call, so PRAGMAs go through {@link statement} or `exec` too.
 */
const pinned = new Set<Database.Database>();
const prepared = new WeakMap<Database.Database, Map<string, Database.Statement>>();

/** Keeps `database` (and so its statements) referenced until the process exits; returns it. */
export function pinDatabase<T extends Database.Database>(database: T): T {
  pinned.add(database);
  return database;
}

/**
 * The statement for `sql` on `database`, prepared on first use and kept with the (pinned) handle.
 * `pluck` statements are cached apart from plain ones, since `pluck()` changes the statement.
 */
export function statement(
  database: Database.Database,
  sql: string,
  options: { pluck?: boolean } = {},
): Database.Statement {
  pinDatabase(database);
  let cache = prepared.get(database);
  if (cache === undefined) {
    cache = new Map();
    prepared.set(database, cache);
  }
  const key = options.pluck ? `pluck:${sql}` : sql;
  let cached = cache.get(key);
  if (cached === undefined) {
    cached = database.prepare(sql);
    if (options.pluck) cached.pluck();
    cache.set(key, cached);
  }
  return cached;
}
