// Package yamljson writes a YAML node tree as JSON, keeping the document's
// key order. It walks the nodes rather than decoding into Go maps, which
// would lose that order and can yield non-string keys that encoding/json
// refuses. The docs package serves openapi.yaml this way as
// /public/v1/openapi.json, and the documentation site shows the document's
// examples this way.
package yamljson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"gopkg.in/yaml.v3"
)

// Marshal returns n (a document or any node under one) as compact JSON.
//
// Every mapping key becomes a JSON string, including unquoted ones such as
// 200 or true; aliases are expanded. A duplicate key, a merge key (<<), a
// key that is not a scalar and a value JSON cannot hold (.inf, .nan) are
// errors, which name the node's path ($.a.b[2]) and line. Strings are not
// HTML-escaped, so "<secret>" and "→" stay readable.
func Marshal(n *yaml.Node) ([]byte, error) {
	return MarshalIndent(n, "")
}

// MarshalIndent is Marshal with each member of a non-empty mapping or
// sequence on its own line, indented one more indent than its parent, and
// a space after each key's colon, as json.MarshalIndent lays it out.
// An empty indent gives Marshal's compact form.
func MarshalIndent(n *yaml.Node, indent string) ([]byte, error) {
	w := writer{indent: indent}
	if err := w.node(n, "$", ""); err != nil {
		return nil, err
	}
	return w.buf.Bytes(), nil
}

type writer struct {
	buf    bytes.Buffer
	indent string
}

// node writes n; at names its position for error messages and prefix is
// the indentation of the line it starts on.
func (w *writer) node(n *yaml.Node, at, prefix string) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("%s: want one document, got %d nodes", at, len(n.Content))
		}
		return w.node(n.Content[0], at, prefix)
	case yaml.AliasNode:
		return w.node(n.Alias, at, prefix)
	case yaml.MappingNode:
		seen := make(map[string]bool, len(n.Content)/2)
		return w.members(n, "{", "}", 2, prefix, func(i int, inner string) error {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s: mapping key on line %d is not a scalar", at, k.Line)
			}
			if k.Tag == "!!merge" {
				return fmt.Errorf("%s: merge key on line %d is not supported", at, k.Line)
			}
			// Any scalar key (200, true, 1.5) becomes its literal text.
			if seen[k.Value] {
				return fmt.Errorf("%s: duplicate key %q on line %d", at, k.Value, k.Line)
			}
			seen[k.Value] = true
			if err := w.scalar(k.Value); err != nil {
				return err
			}
			w.buf.WriteByte(':')
			if w.indent != "" {
				w.buf.WriteByte(' ')
			}
			return w.node(v, at+"."+k.Value, inner)
		})
	case yaml.SequenceNode:
		return w.members(n, "[", "]", 1, prefix, func(i int, inner string) error {
			return w.node(n.Content[i], at+"["+strconv.Itoa(i)+"]", inner)
		})
	case yaml.ScalarNode:
		// Decode resolves the tag (!!str, !!int, !!float, !!bool, !!null);
		// encoding/json then refuses what JSON cannot hold (.inf, .nan).
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("%s: line %d: %w", at, n.Line, err)
		}
		if err := w.scalar(v); err != nil {
			return fmt.Errorf("%s: line %d: %w", at, n.Line, err)
		}
		return nil
	}
	return fmt.Errorf("%s: unexpected YAML node kind %d on line %d", at, n.Kind, n.Line)
}

// members writes the members of a mapping (step 2: key and value) or a
// sequence (step 1) between open and end, one member a call of member with
// the member's index in n.Content and the indentation of its line.
func (w *writer) members(n *yaml.Node, open, end string, step int, prefix string, member func(i int, inner string) error) error {
	w.buf.WriteString(open)
	if len(n.Content) == 0 {
		w.buf.WriteString(end)
		return nil
	}
	inner := prefix + w.indent
	for i := 0; i+step-1 < len(n.Content); i += step {
		if i > 0 {
			w.buf.WriteByte(',')
		}
		if w.indent != "" {
			w.buf.WriteString("\n" + inner)
		}
		if err := member(i, inner); err != nil {
			return err
		}
	}
	if w.indent != "" {
		w.buf.WriteString("\n" + prefix)
	}
	w.buf.WriteString(end)
	return nil
}

// scalar writes v without HTML escaping.
func (w *writer) scalar(v any) error {
	enc := json.NewEncoder(&w.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	w.buf.Truncate(w.buf.Len() - 1) // Encode's newline
	return nil
}
