// Writes ../vision_chat_golden.json: every ../vision_chat_cases.json case
// (the chat templates of Qwen2-VL / Qwen2.5-VL, Gemma 3 and Llama 4, with
// content lists holding {"type": "image"} parts, as transformers'
// apply_chat_template passes them) rendered with @huggingface/jinja, and
// for the cases that name a tokenizer the ids of the rendering as Hugging
// Face's tokenizers give them (no special tokens added). Qwen2-VL's
// tokenizer is Qwen2's: the builtin Qwen3 tokenizer has the same
// vocabulary and the same vision tokens (<|vision_start|> 151652 ..
// <|image_pad|> 151655).
// Run: cd dataplane/tokenize/testdata/gen && npm install && node gen_vision.mjs
import fs from "node:fs";
import zlib from "node:zlib";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";

const td = new URL("../", import.meta.url);
const dir = new URL("../../builtin/qwen3/", import.meta.url);
const qwen3 = new Tokenizer(
  JSON.parse(zlib.gunzipSync(fs.readFileSync(new URL("tokenizer.json.gz", dir)))),
  JSON.parse(fs.readFileSync(new URL("tokenizer_config.json", dir))),
);
const tokenizers = { qwen3 };
const { templates, cases } = JSON.parse(fs.readFileSync(new URL("vision_chat_cases.json", td)));
const out = cases.map((c) => {
  const { name, template, tokenizer, source, differs, ...vars } = c;
  try {
    const text = new Template(templates[template]).render({ bos_token: "<bos>", eos_token: "<eos>", ...vars });
    const g = { name, text };
    if (tokenizer) g.ids = tokenizers[tokenizer].encode(text, { add_special_tokens: false }).ids;
    return g;
  } catch (e) {
    return { name, error: String(e.message ?? e) };
  }
});
fs.writeFileSync(new URL("vision_chat_golden.json", td), JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${out.length} vision chat renderings`);
