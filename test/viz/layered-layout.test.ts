import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isotonicPlacement, type LayeredEdge, layeredLayout } from "../../src/viz/layered-layout.js";

describe("isotonicPlacement", () => {
  it("keeps order and spacing while staying as close as it can to the wishes", () => {
    expect(isotonicPlacement([0, 100, 200], [1, 1, 1], [50, 50])).toEqual([0, 100, 200]);
    // Two nodes both wanting x = 100 with 40 between them: they share the difference.
    expect(isotonicPlacement([100, 100], [1, 1], [40])).toEqual([80, 120]);
    // A heavier node moves less.
    expect(isotonicPlacement([100, 100], [3, 1], [40])).toEqual([90, 130]);
  });
});

describe("layeredLayout", () => {
  it("ranks a chain top to bottom and reverses a back edge", () => {
    const nodes = ["a", "b", "c"].map((id) => ({ id, width: 60, height: 30 }));
    const edges: LayeredEdge[] = [
      { id: "ab", source: "a", target: "b", label: { width: 40, height: 14 } },
      { id: "bc", source: "b", target: "c" },
      { id: "ca", source: "c", target: "a" },
    ];
    const result = layeredLayout(nodes, edges, { start: "a" });
    expect(["a", "b", "c"].map((id) => result.nodes.get(id)!.rank)).toEqual([0, 1, 2]);
    expect(result.edges.get("ca")!.reversed).toBe(true);
    expect(result.edges.get("ab")!.reversed).toBe(false);
    expect(result.edges.get("ab")!.label).toBeDefined();
    // The back edge's bend points run upwards (from c to a).
    const back = result.edges.get("ca")!.points;
    expect(back[0]!.y).toBeGreaterThan(back[back.length - 1]!.y);
  });

  it("never overlaps nodes, and every edge runs strictly downwards in rank (property)", () => {
    const graphs = fc.integer({ min: 1, max: 8 }).chain((size) =>
      fc.record({
        sizes: fc.array(
          fc.record({ width: fc.integer({ min: 10, max: 120 }), height: fc.integer({ min: 10, max: 60 }) }),
          {
            minLength: size,
            maxLength: size,
          },
        ),
        edges: fc.array(fc.tuple(fc.nat(size - 1), fc.nat(size - 1), fc.boolean()), { maxLength: 14 }),
      }),
    );
    fc.assert(
      fc.property(graphs, ({ sizes, edges }) => {
        const nodes = sizes.map((size, index) => ({ id: `n${index}`, ...size }));
        const layered = edges.map(([from, to, hasLabel], index) => ({
          id: `e${index}`,
          source: `n${from}`,
          target: `n${to}`,
          ...(hasLabel ? { label: { width: 30, height: 14 } } : {}),
        }));
        const result = layeredLayout(nodes, layered, { start: "n0" });
        const boxes = nodes.map((node) => ({ ...node, ...result.nodes.get(node.id)! }));
        for (const a of boxes) {
          expect(a.x).toBeGreaterThanOrEqual(-1e-6);
          expect(a.x + a.width).toBeLessThanOrEqual(result.width + 1e-6);
          expect(a.y + a.height).toBeLessThanOrEqual(result.height + 1e-6);
          for (const b of boxes) {
            if (a === b) continue;
            const apart =
              a.x + a.width <= b.x + 1e-6 ||
              b.x + b.width <= a.x + 1e-6 ||
              a.y + a.height <= b.y + 1e-6 ||
              b.y + b.height <= a.y + 1e-6;
            expect(apart).toBe(true);
          }
        }
        for (const edge of layered) {
          if (edge.source === edge.target) continue;
          const routed = result.edges.get(edge.id)!;
          const [upper, lower] = routed.reversed ? [edge.target, edge.source] : [edge.source, edge.target];
          expect(result.nodes.get(upper)!.rank).toBeLessThan(result.nodes.get(lower)!.rank);
          expect(routed.points.length).toBeGreaterThan(0);
          for (const point of routed.points)
            expect(Number.isFinite(point.x) && Number.isFinite(point.y)).toBe(true);
        }
      }),
      { numRuns: 150 },
    );
  });
});
