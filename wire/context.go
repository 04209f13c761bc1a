package wire

// FeatureContext, in a HELLO, says the dialer reads a WELCOME's context
// section; in a WELCOME, that the section follows the tier costs (if any):
//
//	| max_model_len u32 | reserved [4] |
//
// max_model_len is the longest sequence the engine takes, prompt plus
// output, in tokens (vLLM's --max-model-len, SGLang's context_length,
// llama.cpp's n_ctx per slot). As with the tier costs (PROTOCOL.md 4.1), an
// acceptor sends the section only to a dialer whose HELLO set the bit, so
// peers from before it keep decoding every handshake.
const FeatureContext Feature = 1 << 13

func appendContext(e *encoder, maxModelLen uint32) {
	e.u32(maxModelLen)
	e.zero(4)
}

func decodeContext(c *cursor) uint32 {
	n := c.u32("max_model_len")
	c.zero(4, "reserved")
	return n
}
