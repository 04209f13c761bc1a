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
// Byte-level families (gpt-oss, DeepSeek V3) keep every token spelled by a
// substring of the strings' ByteLevel forms and the 256 byte tokens, and
// also get pretokenize.json: random strings drawn to walk every branch of
// their pre-tokenizer patterns and where Hugging Face's pre-tokenizer
// (Oniguruma regexes) ends each piece, in characters.
// strftime_now reads the time as chatDate, so the renderings do not change
// with the day they are made.
// Run after `npm ci` in perf/e2e, which holds the tokenizer packages:
//   cd dataplane/tokenize/testdata/gen && npm ci && node gen_families.mjs
import fs from "node:fs";
import { createRequire } from "node:module";

const e2e = new URL("../../../../perf/e2e/", import.meta.url);
const require = createRequire(new URL("package.json", e2e));
const { Tokenizer } = require("tokenizers");
const { Template } = await import("@huggingface/jinja"); // this folder's own package.json
const { classPostProcessor } = await import(new URL("classpost.mjs", e2e)); // transformers' class post-processors
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
// chatDate is when strftime_now says it is (in UTC), for every Date made
// without arguments; the Go test sets the same clock.
const chatDate = Date.UTC(2026, 11, 1, 9, 30, 0);
process.env.TZ = "UTC";
globalThis.Date = class extends Date {
  constructor(...args) { super(...(args.length ? args : [chatDate])); }
  static now() { return chatDate; }
};

const families = [
  { name: "llama2", pkg: "tokenizer-llama2", extra: ["<s>Hello</s> world <unk>"],
    licence: "Llama 2 Community License Agreement, Copyright (c) Meta Platforms, Inc. All Rights Reserved." },
  { name: "gemma3", pkg: "tokenizer-gemma3", extra: ["<start_of_turn>user\nHi<end_of_turn>\n<bos>x<unused7>", "<b>bold</b> </i> x> </y"],
    licence: "Gemma Terms of Use (Google): https://ai.google.dev/gemma/terms" },
  { name: "gptoss", pkg: "tokenizer-gptoss", byteLevel: true,
    extra: ["<|start|>user<|message|>Hi<|end|><|start|>assistant", "HelloWorld don't DON'T I'M ſ 'll //path/\n", "1234567 ²³ ٣٤٥"],
    licence: "Apache License 2.0 (OpenAI gpt-oss)" },
  { name: "deepseek_v3", pkg: "tokenizer-deepseek_v3", byteLevel: true,
    extra: ["<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>", "日本語のテキスト、カタカナ。한국어 1234567", "x.Foo $bar 'quoted' \u0001x\u200dy"],
    licence: "DeepSeek V3: code under the MIT License, model under the DeepSeek Model License" },
];

// byteChar spells byte b as ByteLevel does (GPT-2's bytes_to_unicode).
const printable = (c) => (c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff);
const byteChar = (b) => {
  if (printable(b)) return String.fromCodePoint(b);
  let n = 0;
  for (let c = 0; c < b; c++) if (!printable(c)) n++;
  return String.fromCodePoint(0x100 + n);
};
const byteLevelForm = (s) => [...Buffer.from(s, "utf8")].map(byteChar).join("");

// randomTexts draws n strings from an alphabet made to walk the branches
// of o200k's and DeepSeek V3's patterns (the e2e test draws from the same
// kinds of characters with a new seed each run).
const alphabet = [..."AbZsStTdDlLmrevVx", "Hello", "WORLD", ..."ǅᾈʰー々中文あアกא", "𠀋", ..."龥龦㐀ſK", ..."129٣²Ⅻ", "𝟘", "123", "𐵐", "𐵰", "𐵀", "𮯰", ..."Ᲊᲊ", "𞗐", "\u0897",
  "'", "'", "'", "’", ..."./-$+<(\"@_`~。，€©?:", "//", "😀", "🦙", " ", " ", " ", "  ", "\t", "\n", "\r", "\r\n",
  "\u00a0", "\u3000", "\u2028", "\u0085", "\v", "\f", "\u0001", "\u200d", "\ufeff", "\u00ad", "\u0301", "\u0903",
  "\u20dd", "\u093f", "'s", "'T", "'ll", "'RE"];
function randomTexts(seed, n) {
  let x = seed;
  const rnd = (k) => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x % k; };
  const out = [];
  for (let i = 0; i < n; i++) {
    let s = "";
    for (let k = 1 + rnd(16); k > 0; k--) s += alphabet[rnd(alphabet.length)];
    out.push(s);
  }
  return out;
}

const byteTok = (b) => "<0x" + b.toString(16).toUpperCase().padStart(2, "0") + ">";
const byteTokens = new Set(Array.from({ length: 256 }, (_, b) => byteChar(b)));

for (const fam of families) {
  const dir = new URL(`node_modules/@lenml/${fam.pkg}/models/`, e2e);
  const full = JSON.parse(fs.readFileSync(new URL("tokenizer.json", dir)));
  const config = JSON.parse(fs.readFileSync(new URL("tokenizer_config.json", dir)));
  const out = new URL(`../families/${fam.name}/`, import.meta.url);
  const jinjaFile = new URL("chat_template.jinja", out); // beside the excerpt, when the package has none
  const fileTemplate = fs.existsSync(jinjaFile) ? fs.readFileSync(jinjaFile, "utf8") : undefined;
  // Chat templates rendered as @huggingface/jinja does; the renderings are
  // tokenized too (as EncodeChat does, without the post-processor).
  const chats = [];
  for (const c of chatCases.filter((c) => c.family === fam.name)) {
    const { name, family, source, template, ...vars } = c;
    const src = template === "config" ? fileTemplate ?? config.chat_template : template;
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
    if (fam.byteLevel) return [byteLevelForm(s)];
    const m = s.replaceAll(" ", "\u2581");
    return [s, m, "\u2581" + m];
  });
  const used = (tok) => forms.some((f) => f.includes(tok));
  const byteToken = fam.byteLevel ? (tok) => byteTokens.has(tok)
    : (tok) => /^<0x[0-9A-F]{2}>$/.test(tok);
  const vocab = {};
  for (const [tok, id] of Object.entries(full.model.vocab)) {
    if (used(tok) || byteToken(tok)) vocab[tok] = id;
  }
  const named = new Set([config.bos_token, config.eos_token, config.unk_token, config.pad_token, full.model.unk_token]
    .map((t) => (typeof t === "object" && t ? t.content : t)).filter(Boolean));
  const added = full.added_tokens.filter((a) => used(a.content) || texts.some((s) => s.includes(a.content)) || named.has(a.content));
  // An added token outside the model's vocabulary would get a new id in
  // the excerpt (tokenizers numbers them after the vocabulary), so the
  // excerpt's vocabulary holds them all with their ids.
  for (const a of added) vocab[a.content] = full.model.vocab[a.content] ?? a.id;
  const merges = full.model.merges.filter((m) => {
    const [a, b] = Array.isArray(m) ? m : m.split(" ");
    return a in vocab && b in vocab && a + b in vocab;
  });
  const part = { ...full, added_tokens: added, model: { ...full.model, vocab, merges } };
  const { added_tokens_decoder, ...cfg } = config;

  const whole = Tokenizer.fromString(JSON.stringify(full));
  const small = Tokenizer.fromString(JSON.stringify(part));
  classPostProcessor(whole, config);
  classPostProcessor(small, config);
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
      if (JSON.stringify(ids) !== JSON.stringify(again)) throw new Error(`${fam.name}: part differs on ${text}: ${ids} vs ${again}`);
      golden.encode.push({ text, addSpecial, ids });
      if (addSpecial) decodeCases.push(ids);
    }
  }
  const b = (x) => full.model.vocab[fam.byteLevel ? byteChar(x) : byteTok(x)];
  decodeCases.push([b(0xe4), b(0xb8), b(0xad)], [b(0xe4), b(0xb8)], [b(0xe4), b(0xb8), b(0xad), b(0xff)],
    [...golden.encode[1].ids, b(0x80), b(0x41)]);
  for (const ids of decodeCases) {
    for (const skip of [false, true]) {
      const text = await whole.decode(ids, skip);
      if (text !== (await small.decode(ids, skip))) throw new Error(`${fam.name}: part decodes ${ids} differently`);
      golden.decode.push({ ids, skip, text });
    }
  }
  fs.mkdirSync(out, { recursive: true });
  if (fam.byteLevel) {
    const pre = Tokenizer.fromString(JSON.stringify({
      version: "1.0", truncation: null, padding: null, added_tokens: [], normalizer: full.normalizer,
      pre_tokenizer: full.pre_tokenizer, post_processor: null, decoder: null,
      model: { type: "WordLevel", vocab: { "[UNK]": 0 }, unk_token: "[UNK]" },
    }));
    const cases = [];
    for (const text of randomTexts(2026, 3000)) {
      cases.push({ text, ends: (await pre.encode(text, null, { addSpecialTokens: false })).getOffsets().map((o) => o[1]) });
    }
    fs.writeFileSync(new URL("pretokenize.json", out), JSON.stringify({ licence: fam.licence,
      normalizer: full.normalizer, pre_tokenizer: full.pre_tokenizer, cases }).replace(/\},\{"text"/g, '},\n{"text"') + "\n");
  }
  fs.writeFileSync(new URL("tokenizer.json", out), JSON.stringify(part) + "\n");
  fs.writeFileSync(new URL("tokenizer_config.json", out), JSON.stringify(cfg, null, 1) + "\n");
  fs.writeFileSync(new URL("golden.json", out), JSON.stringify(golden, null, 1).replace(/\[[\d,\s]*\]/g, (a) => a.replace(/\s+/g, "")) + "\n");
  console.log(`${fam.name}: ${Object.keys(vocab).length} tokens, ${merges.length} merges, ${golden.encode.length} encodings`);
}
