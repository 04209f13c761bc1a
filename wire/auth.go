package wire

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
)

// Proof labels keep the two directions apart, so that neither side's proof
// can be reflected back as the other's.
const (
	labelAcceptor = "kvgate wire v1 acceptor"
	labelDialer   = "kvgate wire v1 dialer"
)

// AcceptorProof is the proof the acceptor puts in WELCOME:
// HMAC-SHA256(secret, "kvgate wire v1 acceptor" || dialer_nonce || acceptor_nonce).
func AcceptorProof(secret []byte, dialerNonce, acceptorNonce *[32]byte) [32]byte {
	return proof(secret, labelAcceptor, dialerNonce, acceptorNonce)
}

// DialerProof is the proof the dialer sends in AUTH:
// HMAC-SHA256(secret, "kvgate wire v1 dialer" || acceptor_nonce || dialer_nonce).
func DialerProof(secret []byte, dialerNonce, acceptorNonce *[32]byte) [32]byte {
	return proof(secret, labelDialer, acceptorNonce, dialerNonce)
}

func proof(secret []byte, label string, first, second *[32]byte) [32]byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(first[:])
	m.Write(second[:])
	var out [32]byte
	copy(out[:], m.Sum(nil))
	return out
}

// proofEqual compares in constant time.
func proofEqual(a, b [32]byte) bool { return hmac.Equal(a[:], b[:]) }

// NewNonce returns 32 random bytes.
func NewNonce() [32]byte {
	var n [32]byte
	_, _ = rand.Read(n[:]) // crypto/rand.Read never fails on supported platforms
	return n
}

// LoadSecret returns the shared secret from the environment variable env
// (when set) or, taking precedence, from file (when given; surrounding
// white space trimmed). Neither: nil, no authentication.
func LoadSecret(env, file string) ([]byte, error) {
	var secret []byte
	if s := os.Getenv(env); s != "" {
		secret = []byte(s)
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the secret: %w", err)
		}
		secret = []byte(strings.TrimSpace(string(b)))
	}
	return secret, nil
}
