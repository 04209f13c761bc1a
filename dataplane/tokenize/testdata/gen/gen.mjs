// Writes the golden files the Go tests compare against:
//   ../qwen3_ids.json   ids of every corpus.json entry
//   ../chat_golden.json rendered text and ids of every chat_cases.json entry
// Run: cd dataplane/tokenize/testdata/gen && npm install && node gen.mjs
import fs from "node:fs";
import zlib from "node:zlib";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";

const dir = new URL("../../builtin/qwen3/", import.meta.url);
const tokJSON = JSON.parse(zlib.gunzipSync(fs.readFileSync(new URL("tokenizer.json.gz", dir))));
const cfg = JSON.parse(fs.readFileSync(new URL("tokenizer_config.json", dir)));
const tok = new Tokenizer(tokJSON, cfg);
const td = new URL("../", import.meta.url);

const corpus = JSON.parse(fs.readFileSync(new URL("corpus.json", td)));
const ids = corpus.map((c) => {
  const text = c.hex !== undefined ? new TextDecoder("utf-8").decode(Buffer.from(c.hex, "hex")) : c.text;
  return { name: c.name, ids: tok.encode(text, { add_special_tokens: false }).ids };
});
fs.writeFileSync(new URL("qwen3_ids.json", td), JSON.stringify(ids, null, 0).replaceAll("},{", "},\n{") + "\n");

const tmpl = new Template(cfg.chat_template);
const chats = JSON.parse(fs.readFileSync(new URL("chat_cases.json", td))).map((c) => {
  const { name, ...vars } = c;
  const text = tmpl.render({ bos_token: "", eos_token: cfg.eos_token, ...vars });
  return { name, text, ids: tok.encode(text, { add_special_tokens: false }).ids };
});
fs.writeFileSync(new URL("chat_golden.json", td), JSON.stringify(chats, null, 1) + "\n");
console.log(`wrote ${ids.length} id vectors and ${chats.length} chat renderings`);
