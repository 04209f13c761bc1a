// The Responses API through the official OpenAI Node SDK, unmodified:
// text, a function call and its output, streamed and whole, against
// kvgate's simulated engines (perf/sim/toolcall.go). KVGATE_URL and
// KVGATE_KEY come from ../tools_test.go. Prints "ok" or throws.
import OpenAI from "openai";
import assert from "node:assert/strict";

const openai = new OpenAI({ baseURL: process.env.KVGATE_URL + "/v1", apiKey: process.env.KVGATE_KEY, maxRetries: 0 });
const model = "Qwen/Qwen3-8B";

const hi = await openai.responses.create({ model, input: "Say hi", max_output_tokens: 5 });
assert.equal(hi.object, "response");
assert.equal(typeof hi.output_text, "string");
assert.ok(hi.usage.input_tokens > 0);

const tools = [{ type: "function", name: "get_weather", description: "Weather of a city", strict: true,
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false } }];
const input = [{ role: "user", content: "What is the weather in Paris?" }];
const stream = openai.responses.stream({ model, tools, input, instructions: "Use the tools." });
let argDeltas = 0;
stream.on("response.function_call_arguments.delta", () => argDeltas++);
const first = await stream.finalResponse();
assert.equal(first.status, "completed");
const call = first.output.find((o) => o.type === "function_call");
assert.equal(call.name, "get_weather");
assert.deepEqual(JSON.parse(call.arguments), { city: "sim" });
assert.ok(argDeltas >= 1, "argument deltas");
assert.ok(first.output.some((o) => o.type === "reasoning"), "a reasoning item");

const answer = await openai.responses.create({ model, tools, input: [...input, call,
  { type: "function_call_output", call_id: call.call_id, output: "18 C and sunny" }] });
assert.equal(answer.output_text, "The tool answered: 18 C and sunny");
await assert.rejects(openai.responses.create({ model, input: "x", previous_response_id: "resp_x" }),
  (e) => e.status === 400 && /previous_response_id/.test(e.message));
console.log("ok");
