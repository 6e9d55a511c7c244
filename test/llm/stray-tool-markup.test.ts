import { describe, expect, it } from "vitest";
import {
  findStrayToolMarkup,
  mayHoldToolMarkup,
  STRAY_MARKUP_WINDOW,
} from "../../src/llm/stray-tool-markup.js";

const tools = ["current_time", "todo_list"];

describe("findStrayToolMarkup finds tool calls written as text", () => {
  const cases: Array<[string, string, string]> = [
    [
      "Hermes / Qwen XML",
      '<tool_call>\n{"name": "current_time", "arguments": {}}\n</tool_call>',
      "<tool_call>",
    ],
    ["GLM XML", "<tool_call>todo_list<arg_key>plan</arg_key>", "<tool_call>"],
    ["MiniMax namespaced XML", '<minimax:tool_call><invoke name="current_time">', "<minimax:tool_call>"],
    ["Nemotron", '<TOOLCALL>[{"name": "current_time"}]</TOOLCALL>', "<TOOLCALL>"],
    ["Claude-style XML", '<function_calls>\n<invoke name="current_time">\n</invoke>', "<function_calls>"],
    ["a bare invoke tag", 'Sure. <invoke name="todo_list">', "<invoke name="],
    [
      "Llama custom-tool format",
      '<function=current_time>{"tz": "UTC"}</function>',
      "<function=current_time>",
    ],
    ["Granite special token", '<|tool_call|>[{"name": "current_time", "arguments": {}}]', "<|tool_call|>"],
    ["Mistral", '[TOOL_CALLS][{"name": "current_time", "arguments": {}}]', "[TOOL_CALLS]"],
    ["Llama python tag", "<|python_tag|>current_time.call()", "<|python_tag|>"],
    [
      "DeepSeek full-width tokens",
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>current_time",
      "<｜tool▁calls▁begin｜>",
    ],
    ["DeepSeek ASCII tokens", "<|tool_calls_begin|><|tool_call_begin|>current_time", "<|tool_calls_begin|>"],
    ["Kimi K2", "<|tool_calls_section_begin|> functions.current_time:0", "<|tool_calls_section_begin|>"],
    [
      "gpt-oss harmony",
      "<|start|>assistant<|channel|>commentary to=functions.current_time <|constrain|>json<|message|>{}<|call|>",
      "<|start|>",
    ],
    ["gpt-oss recipient only", "commentary to=functions.todo_list json", "to=functions.todo_list"],
    ["Gemma tool_code fence", "```tool_code\nprint(default_api.current_time())\n```", "```tool_code"],
    ["FunctionGemma", "<start_function_call>call:current_time{}<end_function_call>", "<start_function_call>"],
    ["Qwen-Agent legacy", "✿FUNCTION✿: current_time\n✿ARGS✿: {}", "✿FUNCTION✿"],
    ["OpenAI parallel wrapper", 'multi_tool_use.parallel({"tool_uses": []})', "multi_tool_use.parallel"],
    [
      "JSON name + arguments",
      'I will check. {"name": "current_time", "arguments": {}}',
      '{"name": "current_time", "arguments":',
    ],
    [
      "JSON in a fence",
      '```json\n{"name": "todo_list", "arguments": {"plan": []}}\n```',
      '{"name": "todo_list", "arguments":',
    ],
    [
      "Llama JSON with type first and parameters",
      '{"type": "function", "name": "current_time", "parameters": {}}',
      '{"type": "function", "name": "current_time", "parameters":',
    ],
    [
      "JSON arguments first",
      '{"arguments": {}, "name": "current_time"}',
      '{"arguments": {}, "name": "current_time"',
    ],
    [
      "JSON tool key with input",
      '{"tool": "todo_list", "tool_input": {"plan": []}}',
      '{"tool": "todo_list", "tool_input":',
    ],
    ["JSON tool key alone", 'Calling {"tool": "current_time"}', '{"tool": "current_time"'],
    [
      "OpenAI tool_calls array",
      '"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "current_time"',
      '"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "current_time"',
    ],
    ["Llama 3.2 pythonic", "[current_time(), todo_list(plan=[])]", "[current_time("],
  ];

  it.each(cases)("%s", (_label, text, found) => {
    expect(findStrayToolMarkup(text, tools)).toBe(found);
    // The quick check that lets clean answers skip the patterns never skips markup.
    expect(mayHoldToolMarkup(text)).toBe(true);
    expect(mayHoldToolMarkup(found)).toBe(true);
  });

  it("finds a closing tag left in the last window of a long call", () => {
    const text = `Here is my answer.${" filler".repeat(300)}</tool_call>`;
    expect(findStrayToolMarkup(text, tools)).toBe("</tool_call>");
  });

  it("returns a one-line excerpt of at most 120 characters", () => {
    const long = `{"type": "function", "description": "${"x".repeat(200)}", "name": "current_time", "arguments": {}}`;
    const found = findStrayToolMarkup(long, tools);
    expect(found).toHaveLength(120);
    expect(found?.endsWith("…")).toBe(true);
    expect(findStrayToolMarkup('{"name":\n  "current_time",\n  "arguments": {}}', tools)).toBe(
      '{"name": "current_time", "arguments":',
    );
  });
});

describe("findStrayToolMarkup leaves ordinary text alone", () => {
  const clean: Array<[string, string]> = [
    ["prose naming a tool", "I called current_time earlier and the todo_list tool holds your plan."],
    ["inline code naming a tool", "Use `current_time()` to get the time, then update `todo_list`."],
    ["a JS object literal", 'const call = { name: "current_time", arguments: {} };'],
    ["JSON naming an unknown tool", '{"name": "get_weather", "arguments": {"city": "Paris"}}'],
    ["JSON with a name and no arguments", '{"name": "current_time", "description": "Returns the time"}'],
    ["an API example with another tool", '"tool_calls": [{"function": {"name": "get_weather"}}]'],
    ["HTML and generics", "<div class='tool'>Map<string, number></div> <function> <tool>"],
    ["a markdown table with pipes", "| a | b |\n|---|---|\n| <b> | 1 |"],
    ["ordinary chat tokens", "The reply ended with <|im_end|> and <|eot_id|>."],
    ["a function keyword", "function current_time() { return new Date(); }"],
    ["a markdown link", "See [current_time docs](https://example.com)."],
    ["a pythonic call not at the start", "You could write [current_time()] in Python."],
  ];

  it.each(clean)("%s", (_label, text) => {
    expect(findStrayToolMarkup(text, tools)).toBeUndefined();
  });

  it("ignores markup in the middle of a long answer", () => {
    const padding = "word ".repeat(STRAY_MARKUP_WINDOW);
    const text = `${padding}<tool_call>{"name": "current_time", "arguments": {}}</tool_call>${padding}`;
    expect(findStrayToolMarkup(text, tools)).toBeUndefined();
    expect(findStrayToolMarkup(`${padding}${padding}<tool_call>`, tools)).toBe("<tool_call>");
    expect(findStrayToolMarkup(`<tool_call>${padding}${padding}`, tools)).toBe("<tool_call>");
  });

  it("checks JSON objects only against the offered tool names", () => {
    const json = '{"name": "current_time", "arguments": {}}';
    expect(findStrayToolMarkup(json, [])).toBeUndefined();
    expect(findStrayToolMarkup(json, ["todo_list"])).toBeUndefined();
    expect(findStrayToolMarkup(json, ["current_time"])).toBe('{"name": "current_time", "arguments":');
  });

  it("treats tool names as literal text, not patterns", () => {
    expect(findStrayToolMarkup('{"name": "aXb", "arguments": {}}', ["a.b"])).toBeUndefined();
    expect(findStrayToolMarkup('{"name": "a.b", "arguments": {}}', ["a.b"])).toBe(
      '{"name": "a.b", "arguments":',
    );
  });

  it("finds nothing in an empty text", () => {
    expect(findStrayToolMarkup("", tools)).toBeUndefined();
  });
});
