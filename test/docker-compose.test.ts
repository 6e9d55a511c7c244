import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runCli } from "./support/cli.js";

/**
 * `docker-compose.yml` (SPEC §13): NATS with JetStream, the host, the logger and the UI. Checked
 * with `docker compose config` where the compose plugin is installed, and always structurally: the
 * file is parsed here (a small YAML subset parser: the file keeps to block maps, `- item` lists,
 * JSON-style flow lists and plain or double-quoted scalars) and every agentloop command in it is
 * checked against the real CLI's argument parser.
 */

const COMPOSE_PATH = fileURLToPath(new URL("../docker-compose.yml", import.meta.url));
const DOCKERFILE_PATH = fileURLToPath(new URL("../Dockerfile", import.meta.url));

type YamlValue = string | YamlValue[] | { [key: string]: YamlValue };

interface Line {
  indent: number;
  text: string;
  number: number;
}

/** Parses the YAML subset the compose file uses; throws (naming the line) on anything else. */
function parseYamlSubset(source: string): YamlValue {
  const lines: Line[] = [];
  source.split("\n").forEach((raw, index) => {
    const text = raw.replace(/(^|\s)#.*$/, "").trimEnd();
    if (text.trim() === "") return;
    if (raw.includes("\t")) throw new Error(`line ${index + 1}: tab`);
    lines.push({ indent: text.length - text.trimStart().length, text: text.trim(), number: index + 1 });
  });
  let position = 0;

  const scalar = (text: string, line: Line): YamlValue => {
    if (text.startsWith("[")) return JSON.parse(text) as string[];
    if (text.startsWith('"')) return JSON.parse(text) as string;
    if (/^[&*|>{!]/.test(text)) throw new Error(`line ${line.number}: unsupported YAML: ${text}`);
    return text;
  };

  const block = (indent: number): YamlValue => {
    const first = lines[position];
    if (first === undefined || first.indent !== indent)
      throw new Error(`line ${first?.number}: bad indentation`);
    if (first.text.startsWith("- ")) {
      const list: YamlValue[] = [];
      while (lines[position]?.indent === indent && lines[position]?.text.startsWith("- ")) {
        const line = lines[position++]!;
        list.push(scalar(line.text.slice(2).trim(), line));
      }
      return list;
    }
    const map: { [key: string]: YamlValue } = {};
    while (lines[position]?.indent === indent) {
      const line = lines[position++]!;
      const match = /^([A-Za-z0-9_.-]+):(?:\s+(.*))?$/.exec(line.text);
      if (match === null) throw new Error(`line ${line.number}: expected "key: value", got ${line.text}`);
      const [, key, value] = match as unknown as [string, string, string | undefined];
      if (key in map) throw new Error(`line ${line.number}: duplicate key ${key}`);
      if (value !== undefined) map[key] = scalar(value, line);
      else if ((lines[position]?.indent ?? -1) > indent) map[key] = block(lines[position]!.indent);
      else map[key] = {};
    }
    return map;
  };

  const root = block(0);
  if (position !== lines.length) throw new Error(`line ${lines[position]?.number}: bad indentation`);
  return root;
}

type Service = {
  image?: string;
  build?: string;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  stop_grace_period?: string;
};

function loadCompose(): { services: Record<string, Service>; volumes: Record<string, unknown> } {
  return parseYamlSubset(readFileSync(COMPOSE_PATH, "utf8")) as never;
}

describe("docker-compose.yml", () => {
  it("defines nats with JetStream, the host, the logger and the UI", () => {
    const { services, volumes } = loadCompose();
    expect(Object.keys(services).sort()).toEqual(["host", "logger", "nats", "ui"]);
    const { nats, host, logger, ui } = services as Record<string, Service>;
    expect(nats?.command).toContain("-js");
    expect(nats?.healthcheck?.test.join(" ")).toContain("js-enabled-only=true");
    expect(host?.command?.[0]).toBe("serve");
    expect(logger?.command?.[0]).toBe("tail");
    expect(ui?.command?.[0]).toBe("ui");
    expect(ui?.ports).toContain("8080:8080");
    for (const name of ["host", "logger", "ui"]) {
      const service = services[name]!;
      expect(service.image).toBe("agentloop:local");
      expect(service.build).toBe(".");
      expect(service.environment?.NATS_URL).toBe("nats://nats:4222");
      expect(service.depends_on?.nats?.condition).toBe("service_healthy");
    }
    expect(host?.environment?.AGENTLOOP_DB).toMatch(/^\/data\//);
    // Longer than the host's default 30 s grace period, so running chats can finish.
    expect(Number.parseInt(host?.stop_grace_period ?? "0", 10)).toBeGreaterThan(30);
    expect(Object.keys(volumes).sort()).toEqual(["host-data", "logs", "nats-data"]);
  });

  it("runs the built CLI in its image", () => {
    const dockerfile = readFileSync(DOCKERFILE_PATH, "utf8");
    expect(dockerfile).toMatch(/^FROM node:20/m);
    expect(dockerfile).toContain('ENTRYPOINT ["node", "dist/src/cli/bin.js"]');
  });

  it("gives every agentloop service a command line the CLI accepts", async () => {
    const { services } = loadCompose();
    for (const name of ["host", "logger", "ui"]) {
      // --help makes the CLI parse every flag and stop before running anything.
      const run = await runCli([...(services[name]?.command ?? []), "--help"]);
      expect({ name, code: run.code, stderr: run.stderr }).toEqual({ name, code: 0, stderr: "" });
    }
  });

  it("is a valid compose file: `docker compose config` where the plugin exists, else the subset parse", () => {
    const probe = spawnSync("docker", ["compose", "version"], { encoding: "utf8", timeout: 20_000 });
    if (probe.status !== 0) {
      // No compose plugin (the docker CLI alone cannot read compose files): the file must at least
      // parse completely as the YAML subset, every line accounted for.
      expect(() => parseYamlSubset(readFileSync(COMPOSE_PATH, "utf8"))).not.toThrow();
      return;
    }
    const result = spawnSync("docker", ["compose", "-f", COMPOSE_PATH, "config", "--quiet"], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: "" });
  });
});
