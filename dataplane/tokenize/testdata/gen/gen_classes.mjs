// Writes ../unicode/oniguruma_classes.json: for every code point, which of
// the character classes the pre-tokenizer patterns ask about Oniguruma
// (the regex engine of Hugging Face's Rust tokenizers, npm tokenizers as
// perf/e2e pins it) puts it in, as runs [first, last, bits] with the bits
// of charclass.go (letter 1, number 2, space 4, cased 8, uncased 16,
// mark 32, punct-or-symbol 64). Go's unicode tables are an older Unicode
// than Oniguruma's; charclass_test.go checks kvgate's classes against
// these and writes the differences into charclass_newer.go (-update).
// Each class is found with a Split pre-tokenizer that removes the class's
// characters from a text of every code point: what is left is outside it.
//   cd dataplane/tokenize/testdata/gen && node gen_classes.mjs
import fs from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(new URL("../../../../perf/e2e/package.json", import.meta.url));
const { Tokenizer } = require("tokenizers");

const classes = [
  [1, "\\p{L}"], [2, "\\p{N}"], [4, "\\s"], [8, "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"],
  [16, "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"], [32, "\\p{M}"], [64, "[\\p{P}\\p{S}]"],
];
const points = [];
for (let c = 0; c <= 0x10ffff; c++) if (c < 0xd800 || c > 0xdfff) points.push(c);
const text = points.map((c) => String.fromCodePoint(c)).join("");
const bits = new Uint8Array(0x110000);
for (const [bit, pattern] of classes) {
  const tok = Tokenizer.fromString(JSON.stringify({
    version: "1.0", truncation: null, padding: null, added_tokens: [], normalizer: null, post_processor: null, decoder: null,
    pre_tokenizer: { type: "Split", pattern: { Regex: pattern }, behavior: "Removed", invert: false },
    model: { type: "WordLevel", vocab: { "[UNK]": 0 }, unk_token: "[UNK]" },
  }));
  const outside = new Uint8Array(points.length);
  for (const [start, end] of (await tok.encode(text, null, { addSpecialTokens: false })).getOffsets()) {
    outside.fill(1, start, end);
  }
  points.forEach((c, i) => { if (!outside[i]) bits[c] |= bit; });
}
const runs = [];
for (let c = 0; c <= 0x10ffff; c++) {
  if (c >= 0xd800 && c <= 0xdfff) continue;
  const last = runs[runs.length - 1];
  if (last && last[1] === c - 1 && last[2] === bits[c]) last[1] = c;
  else if (last && last[1] === 0xd7ff && c === 0xe000 && last[2] === bits[c]) last[1] = c;
  else runs.push([c, c, bits[c]]);
}
fs.mkdirSync(new URL("../unicode/", import.meta.url), { recursive: true });
fs.writeFileSync(new URL("../unicode/oniguruma_classes.json", import.meta.url),
  JSON.stringify({ source: "tokenizers " + require("tokenizers/package.json").version, runs }).replace(/\],\[/g, "],\n[") + "\n");
console.log(runs.length, "runs");
