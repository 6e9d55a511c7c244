import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { parseNatsUrl } from "../src/bus/nats-url.js";
import { runCli } from "./support/cli.js";
import { startNatsServer } from "./support/nats-server.js";

/**
 * `docker-compose.yml`: a three-node NATS cluster with JetStream (passwords required, published on
 * loopback only), two hosts sharing the sessions, the logger and the UI (loopback, token). Checked
 * with `docker compose config` where the compose plugin is installed, and always structurally: the
 * file is parsed here (a small YAML subset parser: the file keeps to block maps, `- item` lists,
 * JSON-style flow lists and plain or double-quoted scalars) and every agentloop command in it is
 * checked against the real CLI's argument parser.
 */

const COMPOSE_PATH = fileURLToPath(new URL("../docker-compose.yml", import.meta.url));
const DOCKERFILE_PATH = fileURLToPath(new URL("../Dockerfile", import.meta.url));
const NATS_CONFIG_PATH = fileURLToPath(new URL("../docker/nats.conf", import.meta.url));
/** Where the compose file mounts docker/nats.conf in each NATS container. */
const NATS_CONFIG_MOUNT = "./docker/nats.conf:/etc/nats/agentloop.conf:ro";
/** The passwords compose passes to NATS and puts into the agentloop services' NATS URLs. */
const PASSWORDS = {
  AGENTLOOP_NATS_HOST_PASSWORD: "hostsecret123",
  AGENTLOOP_NATS_UI_PASSWORD: "uisecret456",
};

/**
 * A value as compose would pass it: `${NAME}`, `${NAME:-default}` and `${NAME:?error}` replaced
 * from `env` (a missing `:?` variable throws with its message, as compose refuses to start).
 */
function interpolate(value: string, env: Record<string, string>): string {
  return value.replace(
    /\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}/g,
    (_, name: string, kind?: string, rest?: string) => {
      const found = env[name];
      if (found !== undefined && found !== "") return found;
      if (kind === ":?") throw new Error(rest ?? `${name} is required`);
      return kind === ":-" ? (rest ?? "") : "";
    },
  );
}

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
  volumes?: string[];
  healthcheck?: { test: string[] };
  stop_grace_period?: string;
};

function loadCompose(): { services: Record<string, Service>; volumes: Record<string, unknown> } {
  return parseYamlSubset(readFileSync(COMPOSE_PATH, "utf8")) as never;
}

/** The value after `flag` in a command line (undefined when the flag is absent). */
function flagValue(command: readonly string[] | undefined, flag: string): string | undefined {
  const index = command?.indexOf(flag) ?? -1;
  return index < 0 ? undefined : command?.[index + 1];
}

const NATS_SERVICES = ["nats1", "nats2", "nats3"];
const HOST_SERVICES = ["host-1", "host-2"];
const AGENTLOOP_SERVICES = [...HOST_SERVICES, "logger", "ui"];

describe("docker-compose.yml", () => {
  it("defines a three-node NATS cluster with JetStream, two hosts, the logger and the UI", () => {
    const { services, volumes } = loadCompose();
    expect(Object.keys(services).sort()).toEqual([...HOST_SERVICES, "logger", ...NATS_SERVICES, "ui"]);
    expect(services.logger?.command?.[0]).toBe("tail");
    expect(services.ui?.command?.[0]).toBe("ui");
    expect(services.ui?.ports).toEqual(["127.0.0.1:8080:8080"]);
    expect(Object.keys(volumes).sort()).toEqual(["logs", "nats1-data", "nats2-data", "nats3-data"]);
  });

  it("routes each NATS node to the other two, one cluster, each with JetStream on its own volume", () => {
    const { services } = loadCompose();
    const nodes = NATS_SERVICES.map((name) => ({ name, service: services[name]! }));
    // `--cluster nats://0.0.0.0:PORT`: where the node takes routes; the others reach it at `nats://<service>:PORT`.
    const routeUrlOf = (name: string) => {
      const listen = new URL(flagValue(services[name]?.command, "--cluster") ?? "nats://missing:0");
      return `nats://${name}:${listen.port}`;
    };
    const clientPorts = new Set<string>();
    for (const { name, service } of nodes) {
      expect(service.image).toMatch(/^nats:2\.(9|1\d)/);
      expect(service.command).toContain("-js");
      expect(flagValue(service.command, "-n")).toBe(name);
      expect(flagValue(service.command, "--cluster_name")).toBe("agentloop");
      const routes = flagValue(service.command, "--routes")?.split(",").sort();
      expect({ name, routes }).toEqual({
        name,
        routes: NATS_SERVICES.filter((other) => other !== name)
          .map(routeUrlOf)
          .sort(),
      });
      const storeDir = flagValue(service.command, "-sd");
      expect(service.volumes).toEqual([`${name}-data:${storeDir}`, NATS_CONFIG_MOUNT]);
      expect(service.healthcheck?.test.join(" ")).toContain(
        `127.0.0.1:${flagValue(service.command, "-m")}/healthz`,
      );
      for (const mapping of service.ports ?? []) {
        // Published on the machine's loopback only: `127.0.0.1:HOSTPORT:4222`.
        const [address, port, inside] = mapping.split(":");
        expect({ name, address, inside }).toEqual({ name, address: "127.0.0.1", inside: "4222" });
        clientPorts.add(port!);
      }
    }
    // Each node reachable from the machine running compose, on a port of its own.
    expect([...clientPorts].sort()).toEqual(["4222", "4223", "4224"]);
  });

  it("runs two hosts with distinct ids, the JetStream history and 3 replicas", () => {
    const { services } = loadCompose();
    const ids = HOST_SERVICES.map((name) => {
      const host = services[name]!;
      expect(host.command?.[0]).toBe("serve");
      expect(flagValue(host.command, "--history")).toBe("nats");
      expect(flagValue(host.command, "--js-replicas")).toBe("3");
      // Stateless: histories, leases, replies and the journal are in JetStream; no database file.
      expect(host.environment?.AGENTLOOP_DB).toBeUndefined();
      expect(host.volumes).toBeUndefined();
      // Longer than the host's default 30 s grace period, so running chats can finish.
      expect(Number.parseInt(host.stop_grace_period ?? "0", 10)).toBeGreaterThan(30);
      return flagValue(host.command, "--host-id");
    });
    expect(ids).toEqual(["host-1", "host-2"]);
  });

  it("points every agentloop service at all three NATS nodes and starts it once they are healthy", () => {
    const { services } = loadCompose();
    for (const name of AGENTLOOP_SERVICES) {
      const service = services[name]!;
      expect(service.image).toBe("agentloop:local");
      expect(service.build).toBe(".");
      // The URL as the CLI reads it (a comma-separated list), once compose filled in the password.
      const { servers, user, pass } = parseNatsUrl(
        interpolate(service.environment?.NATS_URL ?? "", PASSWORDS),
      );
      expect({ name, servers }).toEqual({ name, servers: NATS_SERVICES.map((node) => `${node}:4222`) });
      // The hosts connect as `host`; the UI and the logger, which only watch and forward, as `ui`.
      const expected = HOST_SERVICES.includes(name)
        ? { user: "host", pass: PASSWORDS.AGENTLOOP_NATS_HOST_PASSWORD }
        : { user: "ui", pass: PASSWORDS.AGENTLOOP_NATS_UI_PASSWORD };
      expect({ name, user, pass }).toEqual({ name, ...expected });
      // Each role may read only its own replies (docker/nats.conf allows `_INBOX_host.>` to the
      // hosts and `_INBOX_ui.>` to the UI and the logger, never `_INBOX.>`).
      const inboxPrefix = HOST_SERVICES.includes(name) ? "_INBOX_host" : "_INBOX_ui";
      expect({ name, prefix: service.environment?.AGENTLOOP_INBOX_PREFIX }).toEqual({
        name,
        prefix: inboxPrefix,
      });
      expect(readFileSync(NATS_CONFIG_PATH, "utf8")).toContain(`"${inboxPrefix}.>"`);
      for (const node of NATS_SERVICES) {
        expect({ name, node, condition: service.depends_on?.[node]?.condition }).toEqual({
          name,
          node,
          condition: "service_healthy",
        });
      }
    }
  });

  it("starts NATS with docker/nats.conf, its passwords required from the environment", () => {
    const { services } = loadCompose();
    for (const name of NATS_SERVICES) {
      const service = services[name]!;
      expect(flagValue(service.command, "-c")).toBe("/etc/nats/agentloop.conf");
      const environment = service.environment ?? {};
      expect(Object.keys(environment).sort()).toEqual(Object.keys(PASSWORDS).sort());
      for (const [variable, value] of Object.entries(environment)) {
        expect(interpolate(value, PASSWORDS)).toBe(PASSWORDS[variable as keyof typeof PASSWORDS]);
        // Unset, compose refuses to start and says which variable to set.
        expect(() => interpolate(value, {})).toThrow(new RegExp(`set ${variable}`));
      }
    }
  });

  it("publishes the UI on loopback only, behind its token (made up at start unless AGENTLOOP_UI_TOKEN is set)", () => {
    const { services } = loadCompose();
    const ui = services.ui!;
    // Inside the container it listens on every interface, which makes the token required.
    expect(flagValue(ui.command, "--host")).toBe("0.0.0.0");
    const token = ui.environment?.AGENTLOOP_UI_TOKEN ?? "missing";
    expect(interpolate(token, { AGENTLOOP_UI_TOKEN: "mine-0123456789abc" })).toBe("mine-0123456789abc");
    expect(interpolate(token, {})).toBe("");
    for (const [name, service] of Object.entries(services)) {
      for (const mapping of service.ports ?? [])
        expect({ name, mapping }).toEqual({ name, mapping: expect.stringMatching(/^127\.0\.0\.1:/) });
    }
  });

  it("docker/nats.conf refuses a client without the password and lets in host and ui with theirs", async () => {
    // nats-server reads the passwords from its environment, as in the containers.
    const saved = { ...process.env };
    Object.assign(process.env, PASSWORDS);
    let server: Awaited<ReturnType<typeof startNatsServer>>;
    try {
      server = await startNatsServer({ args: ["-c", NATS_CONFIG_PATH], isPrivate: true });
    } finally {
      for (const variable of Object.keys(PASSWORDS)) {
        if (saved[variable] === undefined) delete process.env[variable];
        else process.env[variable] = saved[variable];
      }
    }
    try {
      const servers = new URL(server.url).host;
      await expect(connect({ servers, reconnect: false })).rejects.toThrow(/authorization/i);
      await expect(connect({ servers, user: "host", pass: "wrong", reconnect: false })).rejects.toThrow(
        /authorization/i,
      );
      for (const [user, pass] of [
        ["host", PASSWORDS.AGENTLOOP_NATS_HOST_PASSWORD],
        ["ui", PASSWORDS.AGENTLOOP_NATS_UI_PASSWORD],
      ] as const) {
        const connection = await connect({ servers, user, pass, reconnect: false });
        await connection.flush();
        await connection.close();
      }
    } finally {
      await server.stop();
    }
  });

  it("runs the built CLI in its image", () => {
    const dockerfile = readFileSync(DOCKERFILE_PATH, "utf8");
    expect(dockerfile).toMatch(/^FROM node:20/m);
    expect(dockerfile).toContain('ENTRYPOINT ["node", "dist/src/cli/bin.js"]');
  });

  it("gives every agentloop service a command line the CLI accepts", async () => {
    const { services } = loadCompose();
    for (const name of AGENTLOOP_SERVICES) {
      // --help makes the CLI parse every flag and stop before running anything.
      const run = await runCli([...(services[name]?.command ?? []), "--help"]);
      expect({ name, code: run.code, stderr: run.stderr }).toEqual({ name, code: 0, stderr: "" });
    }
    for (const name of HOST_SERVICES) {
      // serve checks every flag's value before it connects: reaching "cannot reach NATS" (exit 1,
      // not a usage error's 2) means --history, --js-replicas and --host-id were all accepted.
      const run = await runCli([...(services[name]?.command ?? []), "--nats", "nats://127.0.0.1:1"]);
      expect({ name, code: run.code }).toEqual({ name, code: 1 });
      expect(run.stderr).toMatch(/^agentloop serve: cannot reach NATS at nats:\/\/127\.0\.0\.1:1: /);
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
      env: { ...process.env, ...PASSWORDS },
    });
    expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: "" });
  });
});
