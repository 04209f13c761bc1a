// The reference side of tokenizer_families_test.go: Hugging Face's Rust
// tokenizers through its Node binding (npm tokenizers, as pinned in
// package.json). Reads one JSON request on stdin:
//   {"file": path of a tokenizer.json, or "json": its text,
//    "config": tokenizer_config.json's text (optional),
//    "encode": [{"text", "addSpecial"}], "decode": [{"ids", "skip"}],
//    "bench": {"texts": {name: text}, "seconds": s}}
// and writes {"encode": [ids], "decode": [text], "bench": {name: MB/s}}.
import fs from "node:fs";
import { Tokenizer } from "tokenizers";
import { classPostProcessor } from "./classpost.mjs";

const req = JSON.parse(fs.readFileSync(0, "utf8"));
const tok = req.file ? Tokenizer.fromFile(req.file) : Tokenizer.fromString(req.json);
if (req.config) classPostProcessor(tok, JSON.parse(req.config));

const out = { encode: [], decode: [], bench: {} };
for (const e of req.encode ?? []) {
  const enc = await tok.encode(e.text, null, { addSpecialTokens: !!e.addSpecial });
  out.encode.push(enc.getIds());
}
for (const d of req.decode ?? []) {
  out.decode.push(await tok.decode(d.ids, !!d.skip));
}
if (req.bench) {
  for (const [name, text] of Object.entries(req.bench.texts)) {
    await tok.encode(text, null, { addSpecialTokens: false }); // warm up
    const bytes = Buffer.byteLength(text, "utf8");
    let n = 0;
    const start = process.hrtime.bigint();
    let elapsed = 0;
    while (elapsed < req.bench.seconds) {
      await tok.encode(text, null, { addSpecialTokens: false });
      n++;
      elapsed = Number(process.hrtime.bigint() - start) / 1e9;
    }
    out.bench[name] = (n * bytes) / elapsed / 1e6;
  }
}
process.stdout.write(JSON.stringify(out));
