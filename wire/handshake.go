package wire

import (
	"fmt"
)

// HandshakeConfig is one side's part of a handshake.
type HandshakeConfig struct {
	// Local describes this side; versions, nonce and auth fields are filled in.
	Local Handshake
	// Secret, when set, makes this side require and give challenge-response proof.
	Secret []byte
	// Check, when set, vets the peer's handshake (role, block size, hash scheme)
	// before the connection is accepted; its error is sent as ERROR CodeHashScheme
	// unless it wraps a RemoteError-like code via CheckError.
	Check func(peer *Handshake) error
}

// CheckError is returned by a Check function to choose the ERROR code sent.
type CheckError struct {
	Code ErrorCode
	Err  error
}

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }

// DialHandshake runs the dialer's side: send HELLO, read WELCOME, verify the
// acceptor's proof and send AUTH when a secret is used. It returns the peer's
// WELCOME. On failure it sends an ERROR when the peer deserves one; the caller
// closes the connection.
func DialHandshake(r *Reader, w *Writer, cfg *HandshakeConfig) (*Welcome, error) {
	hello := Hello{cfg.Local}
	hello.MinVersion, hello.MaxVersion = MinVersion, MaxVersion
	hello.Nonce = NewNonce()
	hello.AuthRequired, hello.HasProof, hello.Proof = false, false, [32]byte{}
	hello.Features |= FeatureTierCosts | FeatureContext // this package reads a WELCOME's tier costs and context
	if err := w.Send(0, &hello); err != nil {
		return nil, fmt.Errorf("sending HELLO: %w", err)
	}
	f, err := r.ReadFrame()
	if err != nil {
		return nil, fmt.Errorf("reading WELCOME: %w", err)
	}
	if f.Type == TypeError {
		var e Error
		if err := DecodeFrame(f, &e, r.Limits()); err != nil {
			return nil, err
		}
		return nil, e.AsError(0)
	}
	var wel Welcome
	if err := DecodeFrame(f, &wel, r.Limits()); err != nil {
		return nil, refuse(w, err)
	}
	if wel.Version() < MinVersion || wel.Version() > MaxVersion {
		return nil, refuse(w, fmt.Errorf("peer chose version %d: %w", wel.Version(), ErrVersion))
	}
	if len(cfg.Secret) > 0 {
		if !wel.HasProof || !proofEqual(wel.Proof, AcceptorProof(cfg.Secret, &hello.Nonce, &wel.Nonce)) {
			return nil, refuse(w, fmt.Errorf("acceptor %q gave no valid proof: %w", wel.ID, ErrAuth))
		}
	}
	if wel.AuthRequired {
		if len(cfg.Secret) == 0 {
			return nil, refuse(w, fmt.Errorf("acceptor %q requires a secret and none is configured: %w", wel.ID, ErrAuth))
		}
		if err := w.Send(0, &Auth{Proof: DialerProof(cfg.Secret, &hello.Nonce, &wel.Nonce)}); err != nil {
			return nil, fmt.Errorf("sending AUTH: %w", err)
		}
	}
	if cfg.Check != nil {
		if err := cfg.Check(&wel.Handshake); err != nil {
			return nil, refuseCheck(w, err)
		}
	}
	return &wel, nil
}

// AcceptHandshake runs the acceptor's side: read HELLO, negotiate the version,
// send WELCOME (with proof and challenge when a secret is used), and verify
// AUTH. No other frame is accepted before it returns successfully, so an
// unauthenticated peer cannot inject a single frame, and none larger than
// MaxHandshakeFrame: a peer that announces more gets ERROR FRAME_TOO_LARGE
// before the reader holds any of it.
func AcceptHandshake(r *Reader, w *Writer, cfg *HandshakeConfig) (*Hello, error) {
	defer r.capFrames(MaxHandshakeFrame)()
	f, err := r.ReadFrame()
	if err != nil {
		return nil, refuse(w, fmt.Errorf("reading HELLO: %w", err))
	}
	var hello Hello
	if err := DecodeFrame(f, &hello, r.Limits()); err != nil {
		return nil, refuse(w, err)
	}
	version, err := NegotiateVersion(hello.MinVersion, hello.MaxVersion)
	if err != nil {
		return nil, refuse(w, err)
	}
	if cfg.Check != nil {
		if err := cfg.Check(&hello.Handshake); err != nil {
			return nil, refuseCheck(w, err)
		}
	}
	wel := Welcome{cfg.Local}
	wel.MinVersion, wel.MaxVersion = version, version
	wel.Nonce = NewNonce()
	wel.AuthRequired, wel.HasProof, wel.Proof = false, false, [32]byte{}
	// Tier costs go only to a dialer that reads them (older ones refuse the bytes).
	wel.Features &^= FeatureTierCosts
	if hello.Features&FeatureTierCosts != 0 && !wel.TierCosts.empty() {
		wel.Features |= FeatureTierCosts
	}
	wel.Features &^= FeatureContext
	if hello.Features&FeatureContext != 0 && wel.MaxModelLen > 0 {
		wel.Features |= FeatureContext
	}
	wel.Features &^= FeatureHybridGroups // groups go only to a dialer that keeps them apart
	if hello.Features&FeatureHybridGroups != 0 && len(wel.Groups) > 0 {
		wel.Features |= FeatureHybridGroups
	}
	if hello.Features&FeatureAdapters == 0 {
		wel.Features &^= FeatureAdapters // the dialer reads no ADAPTERS frames: none come
	}
	if len(cfg.Secret) > 0 {
		wel.AuthRequired, wel.HasProof = true, true
		wel.Proof = AcceptorProof(cfg.Secret, &hello.Nonce, &wel.Nonce)
	}
	if err := w.Send(0, &wel); err != nil {
		return nil, fmt.Errorf("sending WELCOME: %w", err)
	}
	if len(cfg.Secret) == 0 {
		return &hello, nil
	}
	f, err = r.ReadFrame()
	if err != nil {
		return nil, fmt.Errorf("reading AUTH: %w", err)
	}
	if f.Type != TypeAuth {
		return nil, refuse(w, fmt.Errorf("%s before AUTH: %w", f.Type, ErrAuth))
	}
	var auth Auth
	if err := DecodeFrame(f, &auth, r.Limits()); err != nil {
		return nil, refuse(w, fmt.Errorf("%w: %w", ErrAuth, err))
	}
	if !proofEqual(auth.Proof, DialerProof(cfg.Secret, &hello.Nonce, &wel.Nonce)) {
		return nil, refuse(w, fmt.Errorf("dialer %q gave a wrong proof: %w", hello.ID, ErrAuth))
	}
	return &hello, nil
}

// refuse tells the peer why (best effort) and returns err.
func refuse(w *Writer, err error) error {
	_ = w.Send(0, &Error{Code: CodeOf(err), Message: err.Error()})
	return err
}

func refuseCheck(w *Writer, err error) error {
	code := CodeHashScheme
	if ce, ok := err.(*CheckError); ok {
		code = ce.Code
	}
	_ = w.Send(0, &Error{Code: code, Message: err.Error()})
	return fmt.Errorf("checking peer handshake: %w", err)
}
