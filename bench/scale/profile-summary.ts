/**
 * Reads what `chat-cost.js --profile DIR` wrote for one phase (`<n>.cpuprofile`, `<n>.heapprofile`)
 * and prints where the host's CPU time and allocated bytes went, three ways: by the function that
 * spent or allocated them (self), by package or source file, and by the nearest agentloop frame
 * on the stack (so a library's allocation is charged to the agentloop code that asked for it).
 *
 * `node dist/bench/scale/profile-summary.js FILE… [--per N] [--top N]`
 *
 * `--per N` divides every figure by N (the phase's answered chats: figures per chat).
 */
import { readFile } from "node:fs/promises";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface CpuNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: CpuNode[];
  samples: number[];
  timeDeltas: number[];
}

interface HeapNode {
  callFrame: CallFrame;
  selfSize: number;
  children: HeapNode[];
}

interface HeapProfile {
  head: HeapNode;
}

/** One sample's stack, leaf first, with what it weighs (µs of CPU or bytes). */
interface Weighted {
  stack: CallFrame[];
  weight: number;
}

const OWN_CODE = /\/dist\/(src|machines|actors)\//;

function usage(): never {
  throw new Error("usage: profile-summary FILE.cpuprofile|FILE.heapprofile… [--per N] [--top N]");
}

function parseArgs(argv: readonly string[]): { files: string[]; per: number; top: number } {
  const files: string[] = [];
  let per = 1;
  let top = 25;
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index] as string;
    if (arg === "--per" || arg === "--top") {
      const value = Number(argv[++index]);
      if (!(value > 0)) usage();
      if (arg === "--per") per = value;
      else top = value;
    } else if (arg.startsWith("--")) usage();
    else files.push(arg);
  }
  if (files.length === 0) usage();
  return { files, per, top };
}

function cpuSamples(profile: CpuProfile): Weighted[] {
  const byId = new Map<number, CpuNode>();
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parentOf.set(child, node.id);
  }
  const stacks = new Map<number, CallFrame[]>();
  const stackOf = (id: number): CallFrame[] => {
    let stack = stacks.get(id);
    if (stack !== undefined) return stack;
    stack = [];
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
      const node = byId.get(at);
      if (node !== undefined) stack.push(node.callFrame);
    }
    stacks.set(id, stack);
    return stack;
  };
  // A sample lasts until the next one is taken.
  return profile.samples.map((id, index) => ({
    stack: stackOf(id),
    weight: profile.timeDeltas[index + 1] ?? 0,
  }));
}

function heapSamples(profile: HeapProfile): Weighted[] {
  const out: Weighted[] = [];
  const walk = (node: HeapNode, above: CallFrame[]): void => {
    const stack = [node.callFrame, ...above];
    if (node.selfSize > 0) out.push({ stack, weight: node.selfSize });
    for (const child of node.children) walk(child, stack);
  };
  walk(profile.head, []);
  return out;
}

/** `name file:line`, the file shortened to what tells it apart. */
function frameName(frame: CallFrame): string {
  const name = frame.functionName === "" ? "(anonymous)" : frame.functionName;
  if (frame.url === "") return name;
  return `${name} ${shortUrl(frame.url)}:${frame.lineNumber + 1}`;
}

function shortUrl(url: string): string {
  const modules = url.lastIndexOf("/node_modules/");
  if (modules >= 0) return url.slice(modules + "/node_modules/".length);
  const dist = url.indexOf("/dist/");
  if (dist >= 0) return url.slice(dist + "/dist/".length);
  return url.replace(/^file:\/\//, "");
}

/** The package (node_modules), agentloop source file, or node's own code a frame belongs to. */
function placeOf(frame: CallFrame): string {
  const { url } = frame;
  if (url === "") return frame.functionName === "" ? "(native)" : `(${frame.functionName})`;
  const modules = url.lastIndexOf("/node_modules/");
  if (modules >= 0) {
    const parts = url.slice(modules + "/node_modules/".length).split("/");
    return parts[0]?.startsWith("@") === true ? `${parts[0]}/${parts[1]}` : (parts[0] ?? url);
  }
  if (url.startsWith("node:")) return "node";
  return shortUrl(url);
}

function tally(samples: readonly Weighted[], keyOf: (sample: Weighted) => string): Map<string, number> {
  const totals = new Map<string, number>();
  for (const sample of samples) {
    const key = keyOf(sample);
    totals.set(key, (totals.get(key) ?? 0) + sample.weight);
  }
  return totals;
}

function print(
  title: string,
  totals: Map<string, number>,
  options: { all: number; per: number; top: number; unit: (value: number) => string },
): void {
  console.log(`  ${title}`);
  const rows = [...totals.entries()].sort(([, a], [, b]) => b - a).slice(0, options.top);
  for (const [key, value] of rows) {
    const share = ((100 * value) / Math.max(1, options.all)).toFixed(1).padStart(5);
    console.log(`    ${share} %  ${options.unit(value / options.per).padStart(10)}  ${key}`);
  }
}

function summarise(samples: readonly Weighted[], kind: "cpu" | "heap", per: number, top: number): void {
  const all = samples.reduce((sum, sample) => sum + sample.weight, 0);
  const unit =
    kind === "cpu"
      ? (us: number) => `${(us / 1000).toFixed(3)} ms`
      : (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
  const options = { all, per, top, unit };
  console.log(`  total ${unit(all / per)}${per === 1 ? "" : ` per unit (÷ ${per})`}`);
  print(
    "self, by function",
    tally(samples, (sample) => frameName(sample.stack[0] as CallFrame)),
    options,
  );
  print(
    "self, by package or file",
    tally(samples, (sample) => placeOf(sample.stack[0] as CallFrame)),
    options,
  );
  print(
    "by nearest agentloop frame",
    tally(samples, (sample) => {
      const own = sample.stack.find((frame) => OWN_CODE.test(frame.url));
      return own === undefined ? `(none) ${placeOf(sample.stack[0] as CallFrame)}` : frameName(own);
    }),
    options,
  );
  print(
    "by nearest agentloop file",
    tally(samples, (sample) => {
      const own = sample.stack.find((frame) => OWN_CODE.test(frame.url));
      return own === undefined ? `(none) ${placeOf(sample.stack[0] as CallFrame)}` : shortUrl(own.url);
    }),
    options,
  );
}

const { files, per, top } = parseArgs(process.argv.slice(2));
for (const file of files) {
  const profile: unknown = JSON.parse(await readFile(file, "utf8"));
  console.log(file);
  if (file.endsWith(".cpuprofile")) summarise(cpuSamples(profile as CpuProfile), "cpu", per, top);
  else summarise(heapSamples(profile as HeapProfile), "heap", per, top);
}
