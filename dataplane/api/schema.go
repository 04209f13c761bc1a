package api

import (
	"encoding/json"
	"fmt"
)

// fieldError is a decoding error that names the request field at fault.
type fieldError struct {
	field, msg string
}

func (e *fieldError) Error() string { return e.msg }

func fieldErrorf(field, format string, args ...any) error {
	return &fieldError{field: field, msg: field + ": " + fmt.Sprintf(format, args...)}
}

// badRequestOf is the 400 of a decoding error, naming its field (or
// field when the error names none).
func badRequestOf(field string, err error) *Error {
	if fe, ok := err.(*fieldError); ok {
		return BadRequest(fe.field, fe.msg)
	}
	return BadRequest(field, err.Error())
}

var schemaTypes = map[string]bool{"object": true, "array": true, "string": true, "number": true,
	"integer": true, "boolean": true, "null": true}

// checkSchema checks that raw is structurally a JSON Schema (draft 2020-12
// and the OpenAPI subset tools use): an object whose type names JSON
// Schema types, whose properties, items and combinators are schemas,
// whose required is a list of strings. It does not resolve $ref.
func checkSchema(field string, raw json.RawMessage, depth int) error {
	if string(raw) == "true" || string(raw) == "false" {
		return nil // a boolean schema
	}
	if depth > maxScanDepth {
		return fieldErrorf(field, "schema nested deeper than %d", maxScanDepth)
	}
	var s map[string]json.RawMessage
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &s) != nil {
		return fieldErrorf(field, "must be a JSON Schema object")
	}
	if t, ok := s["type"]; ok {
		if err := checkSchemaType(field+".type", t); err != nil {
			return err
		}
	}
	if p, ok := s["properties"]; ok {
		var props map[string]json.RawMessage
		if json.Unmarshal(p, &props) != nil || p[0] != '{' {
			return fieldErrorf(field+".properties", "must be an object of schemas")
		}
		for name, sub := range props {
			if err := checkSchema(field+".properties."+name, sub, depth+1); err != nil {
				return err
			}
		}
	}
	if r, ok := s["required"]; ok {
		var names []string
		if json.Unmarshal(r, &names) != nil {
			return fieldErrorf(field+".required", "must be a list of property names")
		}
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		if sub, ok := s[k]; ok && sub[0] != '[' {
			if err := checkSchema(field+"."+k, sub, depth+1); err != nil {
				return err
			}
		}
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf", "prefixItems"} {
		if list, ok := s[k]; ok {
			var subs []json.RawMessage
			if json.Unmarshal(list, &subs) != nil {
				return fieldErrorf(field+"."+k, "must be a list of schemas")
			}
			for i, sub := range subs {
				if err := checkSchema(fmt.Sprintf("%s.%s[%d]", field, k, i), sub, depth+1); err != nil {
					return err
				}
			}
		}
	}
	if e, ok := s["enum"]; ok && e[0] != '[' {
		return fieldErrorf(field+".enum", "must be a list")
	}
	return nil
}

func checkSchemaType(field string, t json.RawMessage) error {
	var one string
	if json.Unmarshal(t, &one) == nil {
		if !schemaTypes[one] {
			return fieldErrorf(field, "%q is not a JSON Schema type", one)
		}
		return nil
	}
	var many []string
	if json.Unmarshal(t, &many) != nil {
		return fieldErrorf(field, "must be a type name or a list of them")
	}
	for _, m := range many {
		if !schemaTypes[m] {
			return fieldErrorf(field, "%q is not a JSON Schema type", m)
		}
	}
	return nil
}

// checkParameters checks a tool's parameters: a schema of an object.
func checkParameters(field string, raw json.RawMessage) error {
	if err := checkSchema(field, raw, 0); err != nil {
		return err
	}
	var top struct {
		Type json.RawMessage `json:"type"`
	}
	_ = json.Unmarshal(raw, &top)
	if len(top.Type) > 0 && string(top.Type) != `"object"` {
		return fieldErrorf(field+".type", "must be \"object\": a tool takes an object of arguments")
	}
	return nil
}
