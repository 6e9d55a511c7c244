import type {
  Attributes,
  AttributeValue,
  Context,
  Exception,
  Link,
  Span,
  SpanContext,
  SpanOptions,
  SpanStatus,
  TimeInput,
  Tracer,
} from "@opentelemetry/api";
import type { SecretRedactor } from "../text/secret-redactor.js";

/**
 * `tracer` with every span it starts hiding the configured secrets: attribute values (on start
 * and later), event attributes, links' attributes, the status message, recorded exceptions and the
 * span's name go through `redactor` before the span sees them. Spans leave the process (an OTLP
 * collector) like events do, and they carry what events do not: the error a model request failed
 * with (a provider's message may quote the key it was sent) and, with content capture on, the
 * prompts and completions. Wrapping the tracer covers every span of the session at one place,
 * whoever sets the attribute. With no secrets, `tracer` itself is returned.
 */
export function redactingTracer(tracer: Tracer, redactor: SecretRedactor): Tracer {
  if (!redactor.isActive) return tracer;
  const wrap = (span: Span): Span => new RedactingSpan(span, redactor);
  const options = (spanOptions: SpanOptions | undefined): SpanOptions | undefined =>
    spanOptions === undefined
      ? undefined
      : {
          ...spanOptions,
          ...(spanOptions.attributes === undefined
            ? {}
            : { attributes: redactAttributes(spanOptions.attributes, redactor) }),
          ...(spanOptions.links === undefined
            ? {}
            : { links: spanOptions.links.map((link) => redactLink(link, redactor)) }),
        };
  return {
    startSpan: (name: string, spanOptions?: SpanOptions, context?: Context) =>
      wrap(tracer.startSpan(redactor.redact(name), options(spanOptions), context)),
    startActiveSpan: ((name: string, ...rest: unknown[]) => {
      const fn = rest.pop() as (span: Span) => unknown;
      const [spanOptions, context] = rest as [SpanOptions | undefined, Context | undefined];
      const wrapped = (span: Span) => fn(wrap(span));
      if (context !== undefined) {
        return tracer.startActiveSpan(redactor.redact(name), options(spanOptions) ?? {}, context, wrapped);
      }
      if (spanOptions !== undefined) {
        return tracer.startActiveSpan(redactor.redact(name), options(spanOptions) ?? {}, wrapped);
      }
      return tracer.startActiveSpan(redactor.redact(name), wrapped);
    }) as Tracer["startActiveSpan"],
  };
}

/** A span that redacts everything given to it, then hands it to the real span. */
class RedactingSpan implements Span {
  readonly #span: Span;
  readonly #redactor: SecretRedactor;

  constructor(span: Span, redactor: SecretRedactor) {
    this.#span = span;
    this.#redactor = redactor;
  }

  spanContext(): SpanContext {
    return this.#span.spanContext();
  }

  setAttribute(key: string, value: AttributeValue): this {
    this.#span.setAttribute(key, redactAttributeValue(value, this.#redactor));
    return this;
  }

  setAttributes(attributes: Attributes): this {
    this.#span.setAttributes(redactAttributes(attributes, this.#redactor));
    return this;
  }

  addEvent(name: string, attributesOrStartTime?: Attributes | TimeInput, startTime?: TimeInput): this {
    const redactedName = this.#redactor.redact(name);
    if (isAttributes(attributesOrStartTime)) {
      this.#span.addEvent(redactedName, redactAttributes(attributesOrStartTime, this.#redactor), startTime);
    } else {
      this.#span.addEvent(redactedName, attributesOrStartTime, startTime);
    }
    return this;
  }

  addLink(link: Link): this {
    this.#span.addLink(redactLink(link, this.#redactor));
    return this;
  }

  addLinks(links: Link[]): this {
    this.#span.addLinks(links.map((link) => redactLink(link, this.#redactor)));
    return this;
  }

  setStatus(status: SpanStatus): this {
    this.#span.setStatus(
      status.message === undefined ? status : { ...status, message: this.#redactor.redact(status.message) },
    );
    return this;
  }

  updateName(name: string): this {
    this.#span.updateName(this.#redactor.redact(name));
    return this;
  }

  end(endTime?: TimeInput): void {
    this.#span.end(endTime);
  }

  isRecording(): boolean {
    return this.#span.isRecording();
  }

  recordException(exception: Exception, time?: TimeInput): void {
    this.#span.recordException(redactException(exception, this.#redactor), time);
  }
}

function redactAttributeValue(value: AttributeValue, redactor: SecretRedactor): AttributeValue {
  if (typeof value === "string") return redactor.redact(value);
  if (Array.isArray(value)) return redactor.redactValue(value);
  return value;
}

function redactAttributes(attributes: Attributes, redactor: SecretRedactor): Attributes {
  let copy: Attributes | undefined;
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined) continue;
    const redacted = redactAttributeValue(value, redactor);
    if (redacted !== value) {
      copy ??= { ...attributes };
      copy[key] = redacted;
    }
  }
  return copy ?? attributes;
}

function redactLink(link: Link, redactor: SecretRedactor): Link {
  return link.attributes === undefined
    ? link
    : { ...link, attributes: redactAttributes(link.attributes, redactor) };
}

/**
 * The exception as the SDK will read it (name, message, code, stack), redacted. An Error's
 * message and stack are own properties the SDK reads; a plain copy keeps the original intact.
 */
function redactException(exception: Exception, redactor: SecretRedactor): Exception {
  if (typeof exception === "string") return redactor.redact(exception);
  const { name, message, code, stack } = exception;
  return {
    ...(code === undefined ? {} : { code: typeof code === "string" ? redactor.redact(code) : code }),
    ...(name === undefined ? {} : { name: redactor.redact(name) }),
    ...(message === undefined ? {} : { message: redactor.redact(message) }),
    ...(stack === undefined ? {} : { stack: redactor.redact(stack) }),
  } as Exception;
}

function isAttributes(value: Attributes | TimeInput | undefined): value is Attributes {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}
