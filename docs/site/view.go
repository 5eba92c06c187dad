package site

import (
	"fmt"
	"html/template"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/marketdata/marketdata/internal/yamljson"
)

// The view of the document the page template renders: every operation with
// its parameters (and the form fields of the try-it panel), responses and
// examples, and every schema.

type pageView struct {
	Title, Version, Summary string
	Overview                template.HTML
	Concepts                []link
	Groups                  []groupView
	Schemas                 []schemaView
	Auth                    template.HTML
	APIURLs                 []string
	DocsOrigin              string
}

type link struct{ ID, Text string }

type groupView struct {
	Tag         string
	Description string
	Ops         []*opView
}

type opView struct {
	ID, Method, Path, Summary string
	Description               template.HTML
	Scope                     string // "" when the route needs none
	NoKey                     bool   // the route needs no key at all
	WebSocket                 bool
	// Chart is what the try-it panel draws from the route's 200 answer:
	// "candles" when its body is a CandleList (assets/chart.js), else "".
	Chart     string
	Params    []paramView
	Responses []respView
}

type paramView struct {
	Name, In    string
	Required    bool
	Type        template.HTML
	Limits      []template.HTML
	Description template.HTML
	Field       fieldView
}

// fieldView is a parameter's input in the try-it panel.
type fieldView struct {
	Kind              string // "number", "text" or "select"
	Min, Max, Default string
	// Step and InputMode are a number field's: "1" and "numeric" for an
	// integer, "any" and "decimal" for a number with a fraction.
	Step, InputMode string
	MaxLength       string
	Placeholder     string
	Options         []string
}

type respView struct {
	Status      string
	Description template.HTML
	Headers     []headerView
	Schema      template.HTML
	Examples    []exampleView
}

type headerView struct {
	Name        string
	Required    bool
	Description string // plain text, shown as the name's tooltip
}

type exampleView struct{ Name, JSON string }

type schemaView struct {
	Name        string
	Description template.HTML
	Type        template.HTML
	Extends     []template.HTML // allOf references: "all fields of"
	OneOf       []template.HTML
	Props       []propView
	Limits      []template.HTML
	Examples    []exampleView
}

type propView struct {
	Name        string
	Required    bool
	Type        template.HTML
	Limits      []template.HTML
	Description template.HTML
}

// buildView turns the document into the page's view.
func buildView(d *document) (*pageView, error) {
	v := &pageView{Title: d.Info.Title, Version: d.Info.Version, Summary: d.Info.Summary}
	v.Overview = markdown(d.Info.Description, 0) // its "## " are the page's concept sections (h2)
	for _, line := range strings.Split(d.Info.Description, "\n") {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "## "); ok {
			v.Concepts = append(v.Concepts, link{anchor(t), t})
		}
	}
	if b, ok := d.Components.SecuritySchemes["bearer"]; ok {
		v.Auth = markdown(b.Description, 2)
	}
	schemas := map[string]*schema{}
	for _, s := range d.Components.Schemas {
		schemas[s.Key] = s.Value
	}
	byTag := map[string]*groupView{}
	for _, t := range d.Tags {
		v.Groups = append(v.Groups, groupView{Tag: t.Name, Description: t.Description})
	}
	for i := range v.Groups {
		byTag[v.Groups[i].Tag] = &v.Groups[i]
	}
	for _, p := range d.Paths {
		op := p.Value.Get
		if op == nil {
			return nil, fmt.Errorf("site: %s has no GET operation (every route of the API is a GET)", p.Key)
		}
		ov, err := buildOp(p.Key, op, schemas)
		if err != nil {
			return nil, err
		}
		tag := "other"
		if len(op.Tags) > 0 {
			tag = op.Tags[0]
		}
		g, ok := byTag[tag]
		if !ok {
			v.Groups = append(v.Groups, groupView{Tag: tag})
			g = &v.Groups[len(v.Groups)-1]
			// Appending may move the slice: rebuild the index.
			for i := range v.Groups {
				byTag[v.Groups[i].Tag] = &v.Groups[i]
			}
		}
		g.Ops = append(g.Ops, ov)
	}
	for _, s := range d.Components.Schemas {
		sv, err := buildSchema(s.Key, s.Value)
		if err != nil {
			return nil, err
		}
		v.Schemas = append(v.Schemas, sv)
	}
	return v, nil
}

func buildOp(path string, op *operation, schemas map[string]*schema) (*opView, error) {
	if op.OperationID == "" {
		return nil, fmt.Errorf("site: GET %s has no operationId", path)
	}
	ov := &opView{
		ID: op.OperationID, Method: "GET", Path: path, Summary: op.Summary,
		Description: markdown(op.Description, 3),
		NoKey:       op.Security != nil && len(op.Security) == 0,
		WebSocket:   op.WebSocket != nil,
	}
	if op.Scope != nil {
		ov.Scope = *op.Scope
	}
	for _, p := range op.Parameters {
		if p.Schema == nil {
			return nil, fmt.Errorf("site: GET %s: parameter %s has no schema", path, p.Name)
		}
		eff := effective(p.Schema, schemas)
		pv := paramView{
			Name: p.Name, In: p.In, Required: p.Required,
			Type:        typeHTML(p.Schema),
			Limits:      limits(p.Schema, schemas),
			Description: markdown(p.Description, 4),
			Field:       tryField(p, eff),
		}
		ov.Params = append(ov.Params, pv)
	}
	for _, r := range op.Responses {
		if r.Key == "200" && answersWith(r.Value, "CandleList") {
			ov.Chart = "candles"
		}
		rv, err := buildResponse(r.Key, r.Value, schemas)
		if err != nil {
			return nil, fmt.Errorf("site: GET %s %s: %w", path, r.Key, err)
		}
		ov.Responses = append(ov.Responses, rv)
	}
	return ov, nil
}

func buildSchema(name string, s *schema) (schemaView, error) {
	sv := schemaView{Name: name, Description: markdown(s.Description, 4)}
	if len(s.Type) > 0 && !s.Type.is("object") {
		sv.Type = typeHTML(s)
		sv.Limits = limits(s, nil)
	}
	parts := []*schema{s}
	for _, a := range s.AllOf {
		if a.Ref != "" {
			sv.Extends = append(sv.Extends, typeHTML(a))
			continue
		}
		parts = append(parts, a)
	}
	for _, o := range s.OneOf {
		sv.OneOf = append(sv.OneOf, typeHTML(o))
	}
	for _, part := range parts {
		for _, p := range part.Properties {
			sv.Props = append(sv.Props, propView{
				Name: p.Key, Required: slices.Contains(part.Required, p.Key),
				Type: typeHTML(p.Value), Limits: limits(p.Value, nil),
				Description: markdown(p.Value.Description, 4),
			})
		}
	}
	ex, err := schemaExamples(s)
	if err != nil {
		return sv, fmt.Errorf("site: schema %s: %w", name, err)
	}
	sv.Examples = ex
	return sv, nil
}

// tryField is the try-it panel's input for parameter p, whose schema with
// its reference followed is eff.
func tryField(p *parameter, eff *schema) fieldView {
	var f fieldView
	switch {
	case len(eff.Enum) > 0:
		f.Kind = "select"
		for _, e := range eff.Enum {
			f.Options = append(f.Options, e.Value)
		}
	case eff.Type.is("integer"), eff.Type.is("number"):
		f.Kind, f.Step, f.InputMode = "number", "1", "numeric"
		if eff.Type.is("number") {
			f.Step, f.InputMode = "any", "decimal"
		}
		if eff.Minimum != nil {
			f.Min = num(*eff.Minimum)
		}
		if eff.Maximum != nil {
			f.Max = num(*eff.Maximum)
		}
	default:
		f.Kind = "text"
		if eff.MaxLength != nil {
			f.MaxLength = strconv.Itoa(*eff.MaxLength)
		}
	}
	if eff.Default.Kind != 0 {
		f.Default = eff.Default.Value
	}
	if eff.Type.is("array") {
		// Sent as typed: the API takes the form style, comma-separated.
		f.Placeholder = "id-1,id-2"
	}
	if p.In == "path" {
		f.Placeholder = "an id from a listing"
	}
	if eff.Format == "date" {
		f.Placeholder = "YYYY-MM-DD"
	}
	return f
}

// buildResponse is the view of the response under status: its headers, its
// JSON body's type, and the examples of that type's schema followed by the
// response's own.
func buildResponse(status string, r *response, schemas map[string]*schema) (respView, error) {
	rv := respView{Status: status, Description: markdown(r.Description, 4)}
	for _, h := range r.Headers {
		rv.Headers = append(rv.Headers, headerView{Name: h.Key, Required: h.Value.Required, Description: strings.TrimSpace(h.Value.Description)})
	}
	mt, ok := r.Content.get("application/json")
	if !ok || mt.Schema == nil {
		return rv, nil
	}
	rv.Schema = typeHTML(mt.Schema)
	if mt.Schema.Ref != "" {
		if s := schemas[schemaName(mt.Schema.Ref)]; s != nil {
			ex, err := schemaExamples(s)
			if err != nil {
				return rv, err
			}
			rv.Examples = ex
		}
	}
	for _, e := range mt.Examples {
		j, err := exampleJSON(&e.Value.Value)
		if err != nil {
			return rv, fmt.Errorf("example %s: %w", e.Key, err)
		}
		rv.Examples = append(rv.Examples, exampleView{Name: e.Key, JSON: j})
	}
	return rv, nil
}

// schemaExamples are the examples of schema s, each named "example".
func schemaExamples(s *schema) ([]exampleView, error) {
	var out []exampleView
	for i := range s.Examples {
		j, err := exampleJSON(&s.Examples[i])
		if err != nil {
			return nil, fmt.Errorf("example: %w", err)
		}
		out = append(out, exampleView{Name: "example", JSON: j})
	}
	return out, nil
}

// exampleJSON writes a YAML example as indented JSON, keeping key order.
func exampleJSON(n *yaml.Node) (string, error) {
	b, err := yamljson.MarshalIndent(n, "  ")
	return string(b), err
}

// answersWith reports whether r's JSON body is the named schema of
// components.
func answersWith(r *response, name string) bool {
	for _, c := range r.Content {
		if c.Key == "application/json" && c.Value.Schema != nil && c.Value.Schema.Ref == "#/components/schemas/"+name {
			return true
		}
	}
	return false
}
