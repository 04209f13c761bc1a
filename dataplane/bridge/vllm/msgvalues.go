package vllm

import (
	"fmt"
	"math"
)

// The readers below take msgpack values as the generic decoder returns them
// (any) and check their shapes: hashes in int or bytes form, token ids,
// integers of every msgpack width.

func hashes(v any) ([]Hash, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: block_hashes is %T", errSchema, v)
	}
	out := make([]Hash, len(l))
	for i, x := range l {
		h, err := hashOf(x)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

func hashOf(v any) (Hash, error) {
	switch t := v.(type) {
	case []byte:
		return Hash("b" + string(t)), nil
	case string: // some encoders send bytes as str
		return Hash("b" + t), nil
	}
	if n, ok := integer(v); ok {
		var b [9]byte
		b[0] = 'i'
		for i := range 8 {
			b[8-i] = byte(n >> (8 * i))
		}
		return Hash(b[:]), nil
	}
	return "", fmt.Errorf("%w: block hash is %T", errSchema, v)
}

func tokens(v any) ([]uint32, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: token_ids is %T", errSchema, v)
	}
	if len(l) == 0 {
		return nil, nil // an offloaded block's event
	}
	out := make([]uint32, len(l))
	for i, x := range l {
		n, ok := intOf(x)
		if !ok || n < 0 || n > math.MaxUint32 {
			return nil, fmt.Errorf("%w: token id %v", errSchema, x)
		}
		out[i] = uint32(n)
	}
	return out, nil
}

// integer reads any msgpack integer as its 64 bits (a uint64 block hash
// above 2^63 stays exact).
func integer(v any) (uint64, bool) {
	switch t := v.(type) {
	case int8:
		return uint64(t), true
	case int16:
		return uint64(t), true
	case int32:
		return uint64(t), true
	case int64:
		return uint64(t), true
	case uint8:
		return uint64(t), true
	case uint16:
		return uint64(t), true
	case uint32:
		return uint64(t), true
	case uint64:
		return t, true
	}
	return 0, false
}

func intOf(v any) (int, bool) {
	n, ok := integer(v)
	return int(int64(n)), ok
}

func number(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case float32:
		return float64(t), true
	}
	n, ok := integer(v)
	return float64(int64(n)), ok
}
