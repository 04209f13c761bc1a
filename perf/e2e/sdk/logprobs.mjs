// Logprobs through the official OpenAI Node SDK, unmodified, against
// kvgate's simulated engines (their deterministic sampler's logprobs,
// perf/sim/sampling.go): chat and completions, streamed and whole, and the
// 400s naming a field out of range or one Anthropic does not have; n
// choices.
// KVGATE_URL and KVGATE_KEY come from ../logprobs_test.go. Prints "ok" or
// throws.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";

const base = process.env.KVGATE_URL;
const key = process.env.KVGATE_KEY;
const model = "Qwen/Qwen3-8B";
const openai = new OpenAI({ baseURL: base + "/v1", apiKey: key, maxRetries: 0 });
const messages = [{ role: "user", content: "Count to ten." }];
const n = 8;

function checkChatEntry(e, top) {
  assert.equal(typeof e.token, "string");
  assert.ok(e.logprob < 0, `logprob ${e.logprob}`);
  assert.deepEqual(e.bytes, [...Buffer.from(e.token)]);
  assert.equal(e.top_logprobs.length, top);
  assert.equal(e.top_logprobs[0].token, e.token); // the sampler's choice is its best candidate
  for (let i = 1; i < top; i++) assert.ok(e.top_logprobs[i].logprob < e.top_logprobs[i - 1].logprob);
}

// Chat, whole: one entry per output token. ignore_eos (vLLM's) fixes the length.
const chat = await openai.chat.completions.create({ model, messages, max_tokens: n, seed: 1, logprobs: true, top_logprobs: 3, ignore_eos: true });
const content = chat.choices[0].logprobs.content;
assert.equal(content.length, chat.usage.completion_tokens);
assert.equal(content.length, n);
content.forEach((e) => checkChatEntry(e, 3));

// Chat, streamed through the SDK's helper, which assembles the chunks'
// logprobs: the same seed gives the same logprobs.
const stream = openai.chat.completions.stream({ model, messages, max_tokens: n, seed: 1, logprobs: true, top_logprobs: 3, ignore_eos: true });
let chunksWithLogprobs = 0;
stream.on("chunk", (c) => { if (c.choices[0]?.logprobs?.content?.length) chunksWithLogprobs++; });
const streamed = await stream.finalChatCompletion();
assert.deepEqual(streamed.choices[0].logprobs.content, content);
assert.ok(chunksWithLogprobs >= 1);

// Without logprobs they are null, as OpenAI sends them.
const plain = await openai.chat.completions.create({ model, messages, max_tokens: 2 });
assert.equal(plain.choices[0].logprobs, null);

// Completions: logprobs is the number of alternatives.
const cmpl = await openai.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, logprobs: 2, ignore_eos: true });
const lp = cmpl.choices[0].logprobs;
assert.equal(lp.tokens.length, 5);
assert.equal(lp.token_logprobs.length, 5);
assert.equal(lp.text_offset[0], 0);
lp.top_logprobs.forEach((top, i) => assert.equal(top[lp.tokens[i]], lp.token_logprobs[i]));
let streamedTokens = [];
for await (const c of await openai.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, logprobs: 2, ignore_eos: true, stream: true })) {
  streamedTokens = streamedTokens.concat(c.choices[0]?.logprobs?.tokens ?? []);
}
assert.equal(streamedTokens.length, 5);

// n choices fan out, each with its own logprobs; the streaming helper
// assembles each choice by its index.
const many = await openai.chat.completions.create({ model, messages, max_tokens: 3, n: 3, logprobs: true, ignore_eos: true });
assert.deepEqual(many.choices.map((c) => c.index), [0, 1, 2]);
many.choices.forEach((c) => assert.equal(c.logprobs.content.length, 3));
assert.equal(many.usage.completion_tokens, 9);
const manyStreamed = await openai.chat.completions.stream({ model, messages, max_tokens: 3, n: 2, ignore_eos: true }).finalChatCompletion();
assert.equal(manyStreamed.choices.length, 2);
manyStreamed.choices.forEach((c, i) => { assert.equal(c.index, i); assert.equal(c.finish_reason, "length"); });

// Out of range, and not Anthropic's: 400 naming the field.
await assert.rejects(openai.chat.completions.create({ model, messages, logprobs: true, top_logprobs: 21 }),
  (e) => e.status === 400 && e.param === "top_logprobs");
await assert.rejects(openai.completions.create({ model, prompt: "x", best_of: 3 }),
  (e) => e.status === 400 && e.param === "best_of");
const anthropic = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0 });
await assert.rejects(anthropic.messages.create({ model, max_tokens: 4, messages, logprobs: true }),
  (e) => e.status === 400 && /logprobs/.test(e.message));
console.log("ok");
