package site

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// The parts of an OpenAPI 3.1 document the site renders. Maps whose order
// the reader sees (paths, properties, responses, headers) keep the
// document's order.

// document is an OpenAPI document.
type document struct {
	Info struct {
		Title       string `yaml:"title"`
		Version     string `yaml:"version"`
		Summary     string `yaml:"summary"`
		Description string `yaml:"description"`
	} `yaml:"info"`
	Servers []struct {
		URL       string `yaml:"url"`
		Variables map[string]struct {
			Default string `yaml:"default"`
		} `yaml:"variables"`
	} `yaml:"servers"`
	Tags []struct {
		Name        string `yaml:"name"`
		Description string `yaml:"description"`
	} `yaml:"tags"`
	Paths      ordered[pathItem] `yaml:"paths"`
	Components struct {
		SecuritySchemes map[string]struct {
			Description  string `yaml:"description"`
			BearerFormat string `yaml:"bearerFormat"`
		} `yaml:"securitySchemes"`
		Parameters map[string]*parameter `yaml:"parameters"`
		Headers    map[string]*header    `yaml:"headers"`
		Responses  map[string]*response  `yaml:"responses"`
		Schemas    ordered[*schema]      `yaml:"schemas"`
	} `yaml:"components"`
}

type pathItem struct {
	Get *operation `yaml:"get"`
}

type operation struct {
	OperationID string                `yaml:"operationId"`
	Tags        []string              `yaml:"tags"`
	Summary     string                `yaml:"summary"`
	Description string                `yaml:"description"`
	Security    []map[string][]string `yaml:"security"`
	Scope       *string               `yaml:"x-required-scope"`
	Parameters  []*parameter          `yaml:"parameters"`
	Responses   ordered[*response]    `yaml:"responses"`
	// WebSocket marks the stream route (its messages and close codes are
	// in its description too, which the page shows).
	WebSocket *yaml.Node `yaml:"x-websocket-messages"`
}

type parameter struct {
	Ref         string  `yaml:"$ref"`
	Name        string  `yaml:"name"`
	In          string  `yaml:"in"`
	Description string  `yaml:"description"`
	Required    bool    `yaml:"required"`
	Style       string  `yaml:"style"`
	Explode     *bool   `yaml:"explode"`
	Schema      *schema `yaml:"schema"`
}

type header struct {
	Ref         string  `yaml:"$ref"`
	Description string  `yaml:"description"`
	Required    bool    `yaml:"required"`
	Schema      *schema `yaml:"schema"`
}

type response struct {
	Ref         string              `yaml:"$ref"`
	Description string              `yaml:"description"`
	Headers     ordered[*header]    `yaml:"headers"`
	Content     ordered[*mediaType] `yaml:"content"`
}

type mediaType struct {
	Schema   *schema           `yaml:"schema"`
	Examples ordered[*example] `yaml:"examples"`
}

type example struct {
	Value yaml.Node `yaml:"value"`
}

// schema is a JSON Schema as OpenAPI 3.1 uses it (the keywords this
// document uses).
type schema struct {
	Ref                  string           `yaml:"$ref"`
	Type                 typeList         `yaml:"type"`
	Description          string           `yaml:"description"`
	Enum                 []yaml.Node      `yaml:"enum"`
	Const                yaml.Node        `yaml:"const"`
	Default              yaml.Node        `yaml:"default"`
	Pattern              string           `yaml:"pattern"`
	Format               string           `yaml:"format"`
	Minimum              *float64         `yaml:"minimum"`
	Maximum              *float64         `yaml:"maximum"`
	ExclusiveMinimum     *float64         `yaml:"exclusiveMinimum"`
	MinLength            *int             `yaml:"minLength"`
	MaxLength            *int             `yaml:"maxLength"`
	MinItems             *int             `yaml:"minItems"`
	MaxItems             *int             `yaml:"maxItems"`
	MaxDistinctItems     *int             `yaml:"x-max-distinct-items"`
	Required             []string         `yaml:"required"`
	Properties           ordered[*schema] `yaml:"properties"`
	Items                *schema          `yaml:"items"`
	AllOf                []*schema        `yaml:"allOf"`
	OneOf                []*schema        `yaml:"oneOf"`
	AdditionalProperties *schema          `yaml:"additionalProperties"`
	PropertyNames        *schema          `yaml:"propertyNames"`
	Examples             []yaml.Node      `yaml:"examples"`
}

// typeList is a schema's type: one name or a list ([string, 'null']).
type typeList []string

func (t *typeList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*t = typeList{n.Value}
		return nil
	case yaml.SequenceNode:
		var l []string
		if err := n.Decode(&l); err != nil {
			return err
		}
		*t = l
		return nil
	}
	return fmt.Errorf("line %d: type is neither a name nor a list", n.Line)
}

// is reports whether name is one of the types.
func (t typeList) is(name string) bool { return slices.Contains(t, name) }

// entry is one key and value of an ordered mapping.
type entry[T any] struct {
	Key   string
	Value T
}

// ordered is a YAML mapping that keeps the document's key order.
type ordered[T any] []entry[T]

func (o *ordered[T]) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping", n.Line)
	}
	out := make(ordered[T], 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		var v T
		if err := n.Content[i+1].Decode(&v); err != nil {
			return fmt.Errorf("%s: %w", n.Content[i].Value, err)
		}
		out = append(out, entry[T]{n.Content[i].Value, v})
	}
	*o = out
	return nil
}

// get returns the value under key.
func (o ordered[T]) get(key string) (T, bool) {
	for _, e := range o {
		if e.Key == key {
			return e.Value, true
		}
	}
	var zero T
	return zero, false
}

// parseDocument reads an OpenAPI document and resolves the references of
// parameters, responses and headers (schemas keep theirs: the reference
// links to the schema's own section).
func parseDocument(src []byte) (*document, error) {
	var d document
	if err := yaml.Unmarshal(src, &d); err != nil {
		return nil, fmt.Errorf("site: parse OpenAPI document: %w", err)
	}
	for _, p := range d.Paths {
		op := p.Value.Get
		if op == nil {
			continue
		}
		for i, prm := range op.Parameters {
			r, err := resolve(prm.Ref, "#/components/parameters/", d.Components.Parameters)
			if err != nil {
				return nil, fmt.Errorf("site: %s: %w", p.Key, err)
			}
			if r != nil {
				op.Parameters[i] = r
			}
		}
		for i, rsp := range op.Responses {
			r, err := resolve(rsp.Value.Ref, "#/components/responses/", d.Components.Responses)
			if err != nil {
				return nil, fmt.Errorf("site: %s %s: %w", p.Key, rsp.Key, err)
			}
			if r != nil {
				op.Responses[i].Value = r
			}
			if err := resolveHeaders(op.Responses[i].Value, d.Components.Headers); err != nil {
				return nil, fmt.Errorf("site: %s %s: %w", p.Key, rsp.Key, err)
			}
		}
	}
	return &d, nil
}

// resolveHeaders replaces the header references of rsp by the headers.
func resolveHeaders(rsp *response, headers map[string]*header) error {
	for i, h := range rsp.Headers {
		r, err := resolve(h.Value.Ref, "#/components/headers/", headers)
		if err != nil {
			return fmt.Errorf("header %s: %w", h.Key, err)
		}
		if r != nil {
			rsp.Headers[i].Value = r
		}
	}
	return nil
}

// resolve follows ref under prefix in m; nil when ref is empty.
func resolve[T any](ref, prefix string, m map[string]*T) (*T, error) {
	if ref == "" {
		return nil, nil //nolint:nilnil // no reference: the caller keeps its own value
	}
	name, ok := strings.CutPrefix(ref, prefix)
	if !ok {
		return nil, fmt.Errorf("reference %q is not under %s", ref, prefix)
	}
	v, ok := m[name]
	if !ok {
		return nil, fmt.Errorf("reference %q names nothing", ref)
	}
	return v, nil
}

// schemaName is the component name a schema reference points to.
func schemaName(ref string) string {
	return strings.TrimPrefix(ref, "#/components/schemas/")
}
