// Package docs holds the API's documents that ship inside the binary: the
// OpenAPI description of the public API, served at /public/v1/openapi.json.
package docs

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"gopkg.in/yaml.v3"
)

// OpenAPIYAML is the OpenAPI 3.1 document of the public API (openapi.yaml),
// the one source of truth for what /public/v1 offers. Do not modify it.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// openAPIJSON converts OpenAPIYAML once; the document never changes at run time.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(OpenAPIYAML) })

// OpenAPIJSON returns OpenAPIYAML as compact JSON, keeping the document's key
// order (so schema properties read in contract order). Every mapping key
// becomes a JSON string, including unquoted status codes such as 200. The
// caller owns the returned slice.
func OpenAPIJSON() ([]byte, error) {
	b, err := openAPIJSON()
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

// yamlToJSON converts one YAML document to JSON. It walks the node tree
// rather than decoding into Go maps, which would lose key order and can yield
// non-string keys that encoding/json refuses.
func yamlToJSON(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("docs: parse openapi.yaml: %w", err)
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, &doc, "$"); err != nil {
		return nil, fmt.Errorf("docs: convert openapi.yaml: %w", err)
	}
	if !json.Valid(buf.Bytes()) {
		return nil, fmt.Errorf("docs: convert openapi.yaml: produced invalid JSON")
	}
	return buf.Bytes(), nil
}

// writeJSON writes n as JSON; at names the position for error messages.
func writeJSON(buf *bytes.Buffer, n *yaml.Node, at string) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return fmt.Errorf("%s: want one document, got %d nodes", at, len(n.Content))
		}
		return writeJSON(buf, n.Content[0], at)
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias, at)
	case yaml.MappingNode:
		buf.WriteByte('{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
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
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeScalar(buf, k.Value); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := writeJSON(buf, v, at+"."+k.Value); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
		return nil
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, v, at+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case yaml.ScalarNode:
		// Decode resolves the tag (!!str, !!int, !!float, !!bool, !!null);
		// json.Marshal then refuses what JSON cannot hold (.inf, .nan).
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("%s: line %d: %w", at, n.Line, err)
		}
		if err := writeScalar(buf, v); err != nil {
			return fmt.Errorf("%s: line %d: %w", at, n.Line, err)
		}
		return nil
	}
	return fmt.Errorf("%s: unexpected YAML node kind %d on line %d", at, n.Kind, n.Line)
}

// writeScalar writes v as JSON without HTML escaping, so "<secret>" and
// "→" stay readable in the served document.
func writeScalar(buf *bytes.Buffer, v any) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}
