// Drives kvgate with the official OpenAI and Anthropic Node SDKs, unmodified.
// KVGATE_URL and KVGATE_KEY come from ../sdk_test.go. Prints "ok" or throws.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";

const base = process.env.KVGATE_URL;
const key = process.env.KVGATE_KEY;
const model = "Qwen/Qwen3-8B";

const openai = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0 });
const chat = await openai.chat.completions.create({
  model, max_tokens: 5, messages: [{ role: "user", content: "Say hi" }], ignore_eos: true,
});
assert.equal(chat.object, "chat.completion");
assert.equal(typeof chat.choices[0].message.content, "string");
assert.equal(chat.usage.completion_tokens, 5);

let text = "", usage = null, chunks = 0;
const stream = await openai.chat.completions.create({
  model, max_tokens: 6, stream: true, stream_options: { include_usage: true }, ignore_eos: true,
  messages: [{ role: "system", content: "be brief" }, { role: "user", content: "Stream please" }],
});
for await (const chunk of stream) {
  chunks++;
  if (chunk.choices.length > 0 && chunk.choices[0].delta.content) text += chunk.choices[0].delta.content;
  if (chunk.usage) usage = chunk.usage;
}
assert.ok(chunks >= 3, "chunks");
assert.equal(usage.completion_tokens, 6);

const comp = await openai.completions.create({ model, prompt: "Once upon a time", max_tokens: 4, ignore_eos: true });
assert.equal(comp.choices[0].finish_reason, "length");

const bad = new OpenAI({ baseURL: base + "/v1", apiKey: "wrong", maxRetries: 0 });
await assert.rejects(bad.models.list(), (e) => e.status === 401);

const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
const msg = await anthropic.messages.create({ model, max_tokens: 5, messages: [{ role: "user", content: "hi" }] });
assert.equal(msg.type, "message");
assert.equal(msg.content[0].type, "text");

const s = anthropic.messages.stream({ model, max_tokens: 5, system: "terse", messages: [{ role: "user", content: "stream" }] });
let deltas = 0;
s.on("text", () => deltas++);
const final = await s.finalMessage();
assert.equal(final.role, "assistant");
// An answer may be empty if the simulator samples EOS first (1 in 256).
assert.ok(deltas >= 1 || final.stop_reason === "end_turn", "text deltas");
assert.equal(final.usage.output_tokens, final.stop_reason === "max_tokens" ? 5 : final.usage.output_tokens);

console.log("ok");
