package site

import (
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"
)

// How a schema reads on the page: its type (references linked to their
// section) and the limits a value must keep.

// effective is s with a schema reference followed (a parameter's limits
// may live in the schema it names: Venue, UniversalID, Date).
func effective(s *schema, schemas map[string]*schema) *schema {
	for range 8 { // references chain at most this deep
		if s.Ref == "" || schemas == nil {
			return s
		}
		r, ok := schemas[schemaName(s.Ref)]
		if !ok {
			return s
		}
		s = r
	}
	return s
}

// typeHTML is a schema's type as the reader sees it, schema references
// linked to their section.
func typeHTML(s *schema) template.HTML {
	if s == nil {
		return "any"
	}
	if s.Ref != "" {
		n := schemaName(s.Ref)
		return template.HTML(`<a href="#schema-` + html.EscapeString(n) + `">` + html.EscapeString(n) + `</a>`) //nolint:gosec // escaped name
	}
	var parts []string
	for _, t := range s.Type {
		switch {
		case t == "array" && s.Items != nil:
			parts = append(parts, "array of "+string(typeHTML(s.Items)))
		case t == "object" && s.AdditionalProperties != nil:
			key := "string"
			if s.PropertyNames != nil {
				key = string(typeHTML(s.PropertyNames))
			}
			parts = append(parts, "map "+key+" → "+string(typeHTML(s.AdditionalProperties)))
		case t == "string" && s.Format != "":
			parts = append(parts, "string ("+html.EscapeString(s.Format)+")")
		default:
			parts = append(parts, html.EscapeString(t))
		}
	}
	for _, g := range []struct {
		alts []*schema
		sep  string
	}{{s.OneOf, " | "}, {s.AllOf, " & "}} {
		if len(g.alts) == 0 {
			continue
		}
		var alts []string
		for _, o := range g.alts {
			if g.sep == " & " && o.Ref == "" && len(o.Type) == 0 {
				// A part that only narrows the others (an error answer's
				// code): the response's description says it.
				continue
			}
			alts = append(alts, string(typeHTML(o)))
		}
		if len(alts) == 0 {
			continue
		}
		parts = append(parts, strings.Join(alts, g.sep))
	}
	if len(parts) == 0 {
		if s.Const.Kind != 0 {
			return template.HTML("<code>" + html.EscapeString(s.Const.Value) + "</code>") //nolint:gosec // escaped
		}
		return "object"
	}
	return template.HTML(strings.Join(parts, " | ")) //nolint:gosec // built from escaped parts
}

// limits lists what a value must be: range, length, items, pattern, enum,
// const, default. A referenced schema's limits are included when schemas
// is given.
func limits(s *schema, schemas map[string]*schema) []template.HTML {
	s = effective(s, schemas)
	var out []template.HTML
	add := func(text string) { out = append(out, template.HTML(text)) } //nolint:gosec // callers escape
	code := func(v string) string { return "<code>" + html.EscapeString(v) + "</code>" }
	switch {
	case s.Minimum != nil && s.Maximum != nil:
		add(num(*s.Minimum) + "–" + num(*s.Maximum))
	case s.Minimum != nil:
		add("≥ " + num(*s.Minimum))
	case s.Maximum != nil:
		add("≤ " + num(*s.Maximum))
	}
	if s.ExclusiveMinimum != nil {
		add("&gt; " + num(*s.ExclusiveMinimum))
	}
	switch {
	case s.MinLength != nil && s.MaxLength != nil:
		add(fmt.Sprintf("%d–%d characters", *s.MinLength, *s.MaxLength))
	case s.MaxLength != nil:
		add(fmt.Sprintf("at most %d characters", *s.MaxLength))
	}
	maxItems := s.MaxItems
	distinct := ""
	if s.MaxDistinctItems != nil {
		maxItems, distinct = s.MaxDistinctItems, " distinct"
	}
	switch {
	case s.MinItems != nil && maxItems != nil:
		add(fmt.Sprintf("%d–%d%s items", *s.MinItems, *maxItems, distinct))
	case maxItems != nil:
		add(fmt.Sprintf("at most %d%s items", *maxItems, distinct))
	case s.MinItems != nil:
		add(fmt.Sprintf("at least %d items", *s.MinItems))
	}
	if len(s.Enum) > 0 {
		var vals []string
		for _, e := range s.Enum {
			vals = append(vals, code(e.Value))
		}
		add("one of " + strings.Join(vals, ", "))
	}
	if s.Const.Kind != 0 {
		add("always " + code(s.Const.Value))
	}
	if s.Pattern != "" {
		add("pattern " + code(s.Pattern))
	}
	if s.Default.Kind != 0 {
		d := s.Default.Value
		if d == "" {
			d = `""`
		}
		add("default " + code(d))
	}
	if s.Items != nil {
		for _, l := range limits(s.Items, schemas) {
			add("each item: " + string(l))
		}
	}
	return out
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
