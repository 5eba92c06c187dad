// Package docs holds the API's documents that ship inside the binary: the
// OpenAPI description of the public API, served at /public/v1/openapi.json.
package docs

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/marketdata/marketdata/internal/yamljson"
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

// yamlToJSON converts one YAML document to compact JSON.
func yamlToJSON(src []byte) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("docs: parse openapi.yaml: %w", err)
	}
	b, err := yamljson.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("docs: convert openapi.yaml: %w", err)
	}
	if !json.Valid(b) {
		return nil, fmt.Errorf("docs: convert openapi.yaml: produced invalid JSON")
	}
	return b, nil
}
