// Images through the official OpenAI and Anthropic Node SDKs, unmodified,
// against kvgate with Qwen2.5-VL's image processor before kvgate-sim
// engines that take images (../sdk_images_test.go). For each SDK, streamed
// and not, a three-turn conversation about one image (each conversation
// its own): turns 2 and 3 are served by turn 1's engine (kvgate's
// x-kvgate-engine header, read from the raw response) with the cached
// tokens reaching past the image's last placeholder token. Undecodable
// image bytes are each SDK's own BadRequestError naming the part.
//
// From the Go test: KVGATE_URL, KVGATE_MODEL, KVGATE_IMAGES (four PNG
// paths, comma-separated), KVGATE_QUESTIONS (the three user turns, JSON)
// and KVGATE_THROUGH (the first turn's tokens through the image's last
// placeholder). Prints one line per turn, then "ok", or throws.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

const base = process.env.KVGATE_URL;
const model = process.env.KVGATE_MODEL;
const images = process.env.KVGATE_IMAGES.split(",").map((p) => readFileSync(p).toString("base64"));
const questions = JSON.parse(process.env.KVGATE_QUESTIONS);
const through = Number(process.env.KVGATE_THROUGH);
assert.equal(images.length, 4);
assert.equal(questions.length, 3);
assert.ok(through > 0);

const openai = new OpenAI({ baseURL: base + "/v1", apiKey: "unused", maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: base, apiKey: "unused", maxRetries: 0 });

// Each way of asking: a user message about img (the image first, when
// withImage), and one turn sent, answering { engine, cached, text }.
const ways = {
  "openai chat": {
    user: (img, text, withImage) => ({
      role: "user",
      content: [
        ...(withImage ? [{ type: "image_url", image_url: { url: "data:image/png;base64," + img } }] : []),
        { type: "text", text },
      ],
    }),
    async send(messages) {
      const { data, response } = await openai.chat.completions.create({ model, max_tokens: 8, messages }).withResponse();
      assert.equal(data.object, "chat.completion");
      return { engine: response.headers.get("x-kvgate-engine"), cached: data.usage.prompt_tokens_details?.cached_tokens ?? 0, text: data.choices[0].message.content };
    },
  },
  "openai chat streamed": {
    user: (...a) => ways["openai chat"].user(...a),
    async send(messages) {
      const { data: stream, response } = await openai.chat.completions
        .create({ model, max_tokens: 8, messages, stream: true, stream_options: { include_usage: true } })
        .withResponse();
      let text = "", usage = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? "";
        if (chunk.usage) usage = chunk.usage;
      }
      assert.ok(usage, "a usage chunk");
      return { engine: response.headers.get("x-kvgate-engine"), cached: usage.prompt_tokens_details?.cached_tokens ?? 0, text };
    },
  },
  "anthropic messages": {
    user: (img, text, withImage) => ({
      role: "user",
      content: [
        ...(withImage ? [{ type: "image", source: { type: "base64", media_type: "image/png", data: img } }] : []),
        { type: "text", text },
      ],
    }),
    async send(messages) {
      const { data, response } = await anthropic.messages.create({ model, max_tokens: 8, messages }).withResponse();
      assert.equal(data.type, "message");
      return { engine: response.headers.get("x-kvgate-engine"), cached: data.usage.cache_read_input_tokens ?? 0, text: textOf(data) };
    },
  },
  "anthropic messages streamed": {
    user: (...a) => ways["anthropic messages"].user(...a),
    async send(messages) {
      const stream = anthropic.messages.stream({ model, max_tokens: 8, messages });
      const { response } = await stream.withResponse();
      const final = await stream.finalMessage();
      return { engine: response.headers.get("x-kvgate-engine"), cached: final.usage.cache_read_input_tokens ?? 0, text: textOf(final) };
    },
  },
};

function textOf(msg) {
  return msg.content.filter((b) => b.type === "text").map((b) => b.text).join("");
}

let i = 0;
for (const [name, way] of Object.entries(ways)) {
  const img = images[i++];
  const messages = [];
  let engine = null;
  for (const [turn, q] of questions.entries()) {
    messages.push(way.user(img, q, turn === 0));
    const got = await way.send(messages);
    console.log(`${name} turn ${turn + 1}: engine ${got.engine}, ${got.cached} cached (the image ends at ${through})`);
    assert.ok(got.engine, `${name} turn ${turn + 1}: no x-kvgate-engine header`);
    if (turn === 0) {
      engine = got.engine;
      assert.ok(got.cached < through, `${name} turn 1: ${got.cached} cached of an image never sent before`);
    } else {
      assert.equal(got.engine, engine, `${name} turn ${turn + 1}: served by another engine than turn 1's`);
      assert.ok(got.cached >= through, `${name} turn ${turn + 1}: ${got.cached} cached, want at least ${through}`);
    }
    messages.push({ role: "assistant", content: got.text });
  }
}

// Undecodable image bytes: each SDK's own 400 error, naming the part.
const junk = Buffer.from("these bytes are not an image").toString("base64");
for (const stream of [false, true]) {
  const messages = [ways["openai chat"].user(junk, questions[0], true)];
  const req = stream ? { model, max_tokens: 8, messages, stream: true } : { model, max_tokens: 8, messages };
  await assert.rejects(openai.chat.completions.create(req), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, `openai (stream ${stream}): ${e}`);
    assert.equal(e.status, 400);
    assert.equal(e.param, "messages[0].content[0]");
    assert.match(e.message, /messages\[0\]\.content\[0\]/);
    return true;
  });
}
const badMessages = [ways["anthropic messages"].user(junk, questions[0], true)];
const isAnthropic400 = (what) => (e) => {
  assert.ok(e instanceof Anthropic.BadRequestError, `anthropic (${what}): ${e}`);
  assert.equal(e.status, 400);
  assert.equal(e.error?.error?.type, "invalid_request_error");
  assert.match(e.message, /messages\.0\.content\.0/);
  return true;
};
await assert.rejects(anthropic.messages.create({ model, max_tokens: 8, messages: badMessages }), isAnthropic400("create"));
await assert.rejects(anthropic.messages.stream({ model, max_tokens: 8, messages: badMessages }).finalMessage(), isAnthropic400("stream"));

console.log("ok");
