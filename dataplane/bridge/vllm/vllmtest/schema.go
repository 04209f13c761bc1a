package vllmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The fake checks request bodies field by field as vLLM's pydantic models
// declare them: a value of the wrong JSON type, a missing required field
// or a bound broken is a 400 naming the field, as vLLM's validation error
// handler answers. It refuses unknown fields too, which vLLM does not
// (its BaseModels ignore them, OpenAIBaseModel logs them): a misspelt
// field would be silently dropped by vLLM, so the fake makes it fail the
// test that sends it. Integers are JSON integer literals only (pydantic's
// lax mode would also take "5" or 5.0; nothing the bridge sends relies on
// that).

// check validates one decoded JSON value (json.Decoder.UseNumber).
type check func(v any) error

// decodeChecked reads body as JSON and validates it with c; on failure it
// answers w with vLLM's error body and reports false.
func decodeChecked(w http.ResponseWriter, r *http.Request, c check) (map[string]any, bool) {
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(r.Body)
	d := json.NewDecoder(&buf)
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	if err == nil {
		err = c(v)
	}
	if err != nil {
		badRequest(w, err.Error())
		return nil, false
	}
	return v.(map[string]any), true
}

// badRequest answers vLLM's ErrorResponse for a request it refuses (its
// handler of pydantic's validation errors answers 400, not FastAPI's 422).
func badRequest(w http.ResponseWriter, msg string) {
	vllmError(w, http.StatusBadRequest, "BadRequestError", msg)
}

// inField wraps a field's error with its name.
func inField(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// object checks a JSON object: the named fields only, required ones present.
func object(fields map[string]check, required ...string) check {
	return func(v any) error {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object, got %s", jsonType(v))
		}
		for _, name := range required {
			if _, ok := m[name]; !ok {
				return inField(name, fmt.Errorf("field required"))
			}
		}
		names := make([]string, 0, len(m))
		for name := range m {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			c, ok := fields[name]
			if !ok {
				return inField(name, fmt.Errorf("unknown field"))
			}
			if err := c(m[name]); err != nil {
				return inField(name, err)
			}
		}
		return nil
	}
}

// nullable admits null besides what c admits.
func nullable(c check) check {
	return func(v any) error {
		if v == nil {
			return nil
		}
		return c(v)
	}
}

func isString(v any) error {
	if _, ok := v.(string); !ok {
		return fmt.Errorf("want a string, got %s", jsonType(v))
	}
	return nil
}

func isBool(v any) error {
	if _, ok := v.(bool); !ok {
		return fmt.Errorf("want a boolean, got %s", jsonType(v))
	}
	return nil
}

func isNumber(v any) error {
	if _, ok := v.(json.Number); !ok {
		return fmt.Errorf("want a number, got %s", jsonType(v))
	}
	return nil
}

// intAtLeast checks an integer of at least lo.
func intAtLeast(lo int64) check {
	return func(v any) error {
		n, ok := v.(json.Number)
		i, err := n.Int64()
		if !ok || err != nil || strings.ContainsAny(string(n), ".eE") {
			return fmt.Errorf("want an integer, got %s %v", jsonType(v), v)
		}
		if i < lo {
			return fmt.Errorf("%d is below %d", i, lo)
		}
		return nil
	}
}

var isInt = intAtLeast(-1 << 63)

// listOf checks a JSON array of at least minLen elements, each with c.
func listOf(c check, minLen int) check {
	return func(v any) error {
		l, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want an array, got %s", jsonType(v))
		}
		if len(l) < minLen {
			return fmt.Errorf("%d elements, want at least %d", len(l), minLen)
		}
		for i, x := range l {
			if err := c(x); err != nil {
				return inField(fmt.Sprint(i), err)
			}
		}
		return nil
	}
}

// dictOf checks a JSON object of any keys, each value with c.
func dictOf(c check) check {
	return func(v any) error {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object, got %s", jsonType(v))
		}
		for k, x := range m {
			if err := c(x); err != nil {
				return inField(k, err)
			}
		}
		return nil
	}
}

// anyValue admits every JSON value (pydantic's Any).
func anyValue(any) error { return nil }

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}
