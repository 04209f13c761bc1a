// Shared by tokenizer_families.mjs and dataplane/tokenize/testdata/gen.
import { templateProcessing } from "tokenizers";

// What transformers' LlamaTokenizerFast and GemmaTokenizerFast do in their
// constructor (update_post_processor): replace the post-processor with a
// TemplateProcessing of BOS (add_bos_token, default true) and EOS
// (add_eos_token, default false), as vLLM's tokenizer then encodes.
export function classPostProcessor(tok, cfg) {
  const classes = ["LlamaTokenizer", "LlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast"];
  if (!classes.includes(cfg.tokenizer_class)) return;
  const content = (t) => (typeof t === "string" ? t : t?.content);
  const bos = content(cfg.bos_token), eos = content(cfg.eos_token);
  const addBOS = cfg.add_bos_token ?? true, addEOS = cfg.add_eos_token ?? false;
  const single = `${addBOS ? bos + ":0 " : ""}$A:0${addEOS ? " " + eos + ":0" : ""}`;
  const pair = `${single}${addBOS ? " " + bos + ":1" : ""} $B:1${addEOS ? " " + eos + ":1" : ""}`;
  const specials = [];
  if (addBOS) specials.push([bos, tok.tokenToId(bos)]);
  if (addEOS) specials.push([eos, tok.tokenToId(eos)]);
  tok.setPostProcessor(templateProcessing(single, pair, specials));
}
