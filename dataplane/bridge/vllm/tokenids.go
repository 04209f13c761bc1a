package vllm

import (
	"errors"
	"fmt"
	"regexp"
)

// ErrNoTokenIDs is a stream's error when the engine sent a chunk with text
// and no token ids: it does not honour return_token_ids (llama.cpp's
// /v1/completions never sends token_ids), and relaying the chunk's ids,
// none, would give the router the right token counts and empty text.
var ErrNoTokenIDs = errors.New("vllm: the engine streamed text without token ids (it ignores return_token_ids)")

// llamaBuild is how llama.cpp's server spells its build in
// system_fingerprint: "b" + build number + "-" + short commit.
var llamaBuild = regexp.MustCompile(`^b[0-9]+-[0-9a-f]+$`)

// noTokenIDs is the error for chunk c, naming llama.cpp and the flag that
// drives it when c looks like its server's (its build as the fingerprint,
// or its timings object).
func noTokenIDs(c *chunk) error {
	if llamaBuild.MatchString(c.SystemFingerprint) || len(c.Timings) > 0 {
		return fmt.Errorf("%w; the server looks like llama.cpp (system_fingerprint %q): run kvgate-bridge with --engine-kind llamacpp",
			ErrNoTokenIDs, c.SystemFingerprint)
	}
	return ErrNoTokenIDs
}
