/**
 * A small well-formedness check for generated SVG: tags balance, attribute values are quoted,
 * no stray `<` or unescaped `&` in text. Enough to catch a renderer's escaping and nesting bugs
 * without an XML parser dependency.
 */
export function checkWellFormed(xml: string): string[] {
  const problems: string[] = [];
  const stack: string[] = [];
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g;
  let last = 0;
  for (const match of xml.matchAll(tag)) {
    const between = xml.slice(last, match.index);
    if (between.includes("<")) problems.push(`stray "<" near offset ${last}`);
    checkText(between, last, problems);
    last = match.index + match[0].length;
    const [, closing, name, attributes, selfClosing] = match;
    checkText(attributes ?? "", match.index, problems);
    if (closing) {
      const open = stack.pop();
      if (open !== name) problems.push(`</${name}> closes <${open}>`);
    } else if (!selfClosing) {
      stack.push(name!);
    }
  }
  const rest = xml.slice(last);
  if (rest.includes("<")) problems.push(`stray "<" near offset ${last}`);
  if (stack.length > 0) problems.push(`unclosed: ${stack.join(", ")}`);
  return problems;
}

function checkText(text: string, offset: number, problems: string[]): void {
  for (const match of text.matchAll(/&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);)/g)) {
    problems.push(`unescaped "&" near offset ${offset + match.index}`);
  }
}
