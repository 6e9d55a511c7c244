import { InvalidRequestError } from "../errors.js";
import type { ContentPart } from "../types.js";

type ImagePart = Extract<ContentPart, { type: "image" }>;

/** The URL OpenAI takes for an image part: its own URL, or a base64 `data:` URL. */
export function imageUrlOf(part: ImagePart): string {
  if (part.url) return part.url;
  if (part.data) return `data:${part.mediaType ?? "image/png"};base64,${part.data}`;
  throw new InvalidRequestError("an image part needs either data or a url");
}
