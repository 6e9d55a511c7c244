import { describe, expect, it } from "vitest";
import {
  assembleRecords,
  fromLastSnapshot,
  type HistoryRecord,
  parsePartHeader,
  type RecordPart,
  splitBody,
} from "../../src/context/history-records.js";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (body: Uint8Array) => new TextDecoder().decode(body);

function part(
  seq: number,
  batch: string,
  position: string,
  body: string,
  kind: RecordPart["kind"] = "append",
): RecordPart {
  const [index, count] = position.split("/").map(Number);
  return { seq, kind, batch, part: index!, parts: count!, body: bytes(body) };
}

describe("history records", () => {
  it("cuts a body into parts of at most the limit, and one part when it fits or is empty", () => {
    expect(splitBody(bytes("abcdefg"), 3).map(text)).toEqual(["abc", "def", "g"]);
    expect(splitBody(bytes("abc"), 3).map(text)).toEqual(["abc"]);
    expect(splitBody(new Uint8Array(), 3)).toHaveLength(1);
    expect(() => splitBody(bytes("a"), 0)).toThrow(RangeError);
  });

  it("joins a multi-byte character cut between two parts", () => {
    const pieces = splitBody(bytes("é😀é"), 3);
    expect(pieces.length).toBeGreaterThan(2);
    const parts = pieces.map(
      (body, index): RecordPart => ({
        seq: index + 1,
        kind: "append",
        batch: "b",
        part: index + 1,
        parts: pieces.length,
        body,
      }),
    );
    expect(text(assembleRecords(parts)[0]!.body)).toBe("é😀é");
  });

  it("keeps whole records only: a part missing, a stray part, or a record cut short by the next", () => {
    const records = assembleRecords([
      part(1, "a", "1/2", "a1"),
      part(2, "a", "2/2", "a2"),
      part(3, "dead", "1/3", "x"),
      part(4, "dead", "2/3", "y"),
      part(5, "b", "1/1", "b"),
      part(6, "gone", "2/2", "stray"),
      part(7, "c", "1/2", "c1"),
      part(8, "c", "2/2", "c2"),
    ]);
    expect(records.map((record) => [text(record.body), record.firstSeq, record.lastSeq])).toEqual([
      ["a1a2", 1, 2],
      ["b", 5, 5],
      ["c1c2", 7, 8],
    ]);
  });

  it("starts from the last snapshot", () => {
    const record = (kind: HistoryRecord["kind"], seq: number): HistoryRecord => ({
      kind,
      body: bytes(String(seq)),
      firstSeq: seq,
      lastSeq: seq,
    });
    const all = [
      record("append", 1),
      record("snapshot", 2),
      record("append", 3),
      record("snapshot", 4),
      record("append", 5),
    ];
    expect(fromLastSnapshot(all).map((r) => r.firstSeq)).toEqual([4, 5]);
    expect(fromLastSnapshot(all.slice(0, 1)).map((r) => r.firstSeq)).toEqual([1]);
  });

  it("reads a part header, refusing what is not one", () => {
    expect(parsePartHeader("2/3")).toEqual({ part: 2, parts: 3 });
    for (const bad of [undefined, "", "0/1", "3/2", "a/b", "1/2/3"])
      expect(parsePartHeader(bad)).toBeUndefined();
  });
});
