package tokenize

// Byte-level BPE maps every byte to a printable Unicode character so that
// the vocabulary is a set of strings: printable ASCII and Latin-1 map to
// themselves, the other 68 bytes to U+0100 onwards, in byte order (the
// GPT-2 scheme that Qwen, Llama 3 and DeepSeek tokenizers share).

var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	next := rune(256)
	for b := range 256 {
		switch {
		case b >= '!' && b <= '~', b >= 0xA1 && b <= 0xAC, b >= 0xAE && b <= 0xFF:
			byteToRune[b] = rune(b)
		default:
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelString returns the vocabulary spelling of raw bytes.
func byteLevelString(b []byte) string {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = byteToRune[c]
	}
	return string(rs)
}

// appendRawBytes appends the bytes a vocabulary spelling stands for; ok is
// false if the spelling has a character outside the byte alphabet.
func appendRawBytes(dst []byte, spelling string) ([]byte, bool) {
	for _, r := range spelling {
		b, ok := runeToByte[r]
		if !ok {
			return dst, false
		}
		dst = append(dst, b)
	}
	return dst, true
}
