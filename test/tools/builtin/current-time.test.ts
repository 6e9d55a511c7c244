import { afterEach, describe, expect, it } from "vitest";
import { createCurrentTimeToolSet, formatIsoWithOffset } from "../../../src/tools/builtin/current-time.js";
import { createTestToolContext } from "../tool-context.js";

const instant = new Date("2026-12-02T16:04:05.123Z");
const callTime = (toolSet: ReturnType<typeof createCurrentTimeToolSet>) =>
  toolSet.invoke({ id: "c1", name: "current_time", arguments: "" }, createTestToolContext());

describe("formatIsoWithOffset", () => {
  it("writes local time with the offset, +00:00 rather than Z", () => {
    expect(formatIsoWithOffset(instant, 60)).toBe("2026-12-02T17:04:05.123+01:00");
    expect(formatIsoWithOffset(instant, 0)).toBe("2026-12-02T16:04:05.123+00:00");
    expect(formatIsoWithOffset(instant, -300)).toBe("2026-12-02T11:04:05.123-05:00");
    expect(formatIsoWithOffset(instant, 345)).toBe("2026-12-02T21:49:05.123+05:45");
    expect(formatIsoWithOffset(instant, -570)).toBe("2026-12-02T06:34:05.123-09:30");
  });

  it("crosses the date line into the local date", () => {
    expect(formatIsoWithOffset(new Date("2026-12-31T23:30:00.000Z"), 60)).toBe(
      "2027-01-01T00:30:00.000+01:00",
    );
  });

  it("is the same instant once parsed", () => {
    for (const offset of [-720, -330, 0, 330, 840]) {
      expect(new Date(formatIsoWithOffset(instant, offset)).getTime()).toBe(instant.getTime());
    }
  });
});

describe("current_time", () => {
  const originalTz = process.env.TZ;
  afterEach(() => {
    if (originalTz === undefined) delete process.env.TZ;
    else process.env.TZ = originalTz;
  });

  it("offers one tool without arguments", () => {
    const toolSet = createCurrentTimeToolSet();
    expect(toolSet.name).toBe("current_time");
    expect(toolSet.tools()).toHaveLength(1);
    expect(toolSet.tools()[0]).toMatchObject({
      name: "current_time",
      parameters: { type: "object", properties: {} },
    });
    expect(toolSet.copy()).toBe(toolSet);
  });

  it("answers with the injected clock, offset and zone, the ISO string first", async () => {
    const toolSet = createCurrentTimeToolSet({
      now: () => instant,
      utcOffsetMinutes: () => 60,
      timeZone: () => "Europe/Berlin",
    });
    await expect(callTime(toolSet)).resolves.toBe("2026-12-02T17:04:05.123+01:00 (Wednesday, Europe/Berlin)");
  });

  it("uses the host's zone from TZ", async () => {
    process.env.TZ = "Asia/Kolkata";
    const kolkata = await callTime(createCurrentTimeToolSet({ now: () => instant }));
    // ICU reports this zone under its older alias on some builds.
    expect(kolkata).toMatch(/^2026-12-02T21:34:05\.123\+05:30 \(Wednesday, Asia\/(Kolkata|Calcutta)\)$/);

    process.env.TZ = "America/New_York";
    const newYork = await callTime(createCurrentTimeToolSet({ now: () => instant }));
    expect(newYork).toBe("2026-12-02T11:04:05.123-05:00 (Wednesday, America/New_York)");

    process.env.TZ = "UTC";
    const utc = await callTime(createCurrentTimeToolSet({ now: () => instant }));
    expect(utc.split(" ")[0]).toBe("2026-12-02T16:04:05.123+00:00");
  });
});
