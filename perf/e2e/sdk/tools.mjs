// Tool use through the official OpenAI and Anthropic Node SDKs, unmodified,
// against kvgate's simulated engines, which call the first tool offered and
// answer a tool result by quoting it (perf/sim/toolcall.go). KVGATE_URL and
// KVGATE_KEY come from ../tools_test.go. Prints "ok" or throws.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";

const base = process.env.KVGATE_URL;
const key = process.env.KVGATE_KEY;
const model = "Qwen/Qwen3-8B";
const weather = {
  type: "object",
  properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } },
  required: ["city"],
};

// OpenAI: the streaming helper assembles the call from its deltas.
const openai = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0 });
const tools = [{ type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: weather, strict: true } }];
const question = { role: "user", content: "What is the weather in Paris?" };
const stream = openai.chat.completions.stream({ model, max_tokens: 300, tools, messages: [question] });
const done = [];
let argDeltas = 0, reasoning = "";
stream.on("tool_calls.function.arguments.delta", () => argDeltas++);
stream.on("tool_calls.function.arguments.done", (e) => done.push(e));
stream.on("chunk", (c) => { reasoning += c.choices[0]?.delta?.reasoning_content ?? ""; });
const completion = await stream.finalChatCompletion();
assert.equal(completion.choices[0].finish_reason, "tool_calls");
const call = completion.choices[0].message.tool_calls[0];
assert.equal(call.type, "function");
assert.equal(call.function.name, "get_weather");
assert.deepEqual(JSON.parse(call.function.arguments), { city: "sim", unit: "celsius" });
assert.equal(done.length, 1);
assert.deepEqual(done[0].parsed_arguments, { city: "sim", unit: "celsius" });
assert.ok(argDeltas >= 1, "argument deltas");
assert.match(reasoning, /calling get_weather/);

// The tool's answer goes back as a tool message; the model answers.
const answer = await openai.chat.completions.create({
  model, max_tokens: 100, tools,
  messages: [question, completion.choices[0].message, { role: "tool", tool_call_id: call.id, content: "18 C and sunny" }],
});
assert.equal(answer.choices[0].finish_reason, "stop");
assert.match(answer.choices[0].message.content, /The tool answered: 18 C and sunny/);
await assert.rejects(openai.chat.completions.create({ model, messages: [{ role: "tool", content: "x" }] }),
  (e) => e.status === 400 && /tool_call_id/.test(e.message));

// Anthropic: the tool-use loop, streamed then whole.
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
const atools = [{ name: "get_weather", description: "Weather of a city", input_schema: weather }];
const messages = [{ role: "user", content: "What is the weather in Paris?" }];
const ms = anthropic.messages.stream({ model, max_tokens: 300, tools: atools, messages });
let jsonDeltas = 0;
ms.on("inputJson", () => jsonDeltas++);
const first = await ms.finalMessage();
assert.equal(first.stop_reason, "tool_use");
const use = first.content.find((b) => b.type === "tool_use");
assert.equal(use.name, "get_weather");
assert.deepEqual(use.input, { city: "sim", unit: "celsius" });
assert.ok(jsonDeltas >= 1, "input_json_delta events");
messages.push({ role: "assistant", content: first.content });
messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: [{ type: "text", text: "18 C and sunny" }] }] });
const final = await anthropic.messages.create({ model, max_tokens: 100, tools: atools, messages });
assert.equal(final.stop_reason, "end_turn");
assert.equal(final.content[0].type, "text");
assert.equal(final.content[0].text, "The tool answered: 18 C and sunny");

// Thinking on: a thinking block before the tool_use.
const thought = await anthropic.messages.create({
  model, max_tokens: 300, tools: atools, thinking: { type: "enabled", budget_tokens: 1024 },
  messages: [{ role: "user", content: "What is the weather in Paris?" }],
});
assert.deepEqual(thought.content.map((b) => b.type), ["thinking", "tool_use"]);
assert.match(thought.content[0].thinking, /calling get_weather/);

// A tool_result with no tool_use is the client's error, named.
await assert.rejects(anthropic.messages.create({ model, max_tokens: 10, tools: atools, messages: [
  { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_nope", content: "x" }] }] }),
  (e) => e.status === 400 && /tool_use_id/.test(e.message));
console.log("ok");
