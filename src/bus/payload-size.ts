/**
 * Whether `data` takes more than `maxBytes` bytes of UTF-8. O(1) for the usual small payload: a
 * UTF-16 code unit is 1 to 3 bytes, so the string is only measured when its length alone cannot
 * decide. `maxBytes` may be Infinity (a transport without a limit).
 */
export function isOverMaxPayload(data: string, maxBytes: number): boolean {
  // Written so that a limit that is not a number (a partial test double) means no limit.
  if (!(data.length * 3 > maxBytes)) return false;
  if (data.length > maxBytes) return true;
  return Buffer.byteLength(data, "utf8") > maxBytes;
}
