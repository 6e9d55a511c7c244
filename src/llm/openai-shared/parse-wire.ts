import { z } from "zod";
import { InvalidResponseError } from "../errors.js";

/**
 * Validates one incoming wire value (a chunk, an event, a response body) against its schema.
 * A provider that sends something else is an {@link InvalidResponseError}, with zod's report.
 */
export function parseWire<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  what: string,
): z.infer<Schema> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw new InvalidResponseError(`unexpected ${what} from the model: ${z.prettifyError(result.error)}`, {
    cause: result.error,
  });
}
