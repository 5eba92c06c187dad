package site

import (
	"html"
	"html/template"
	"regexp"
	"strings"
)

// markdown renders the subset of CommonMark the OpenAPI descriptions use:
// headings (##, ###), paragraphs, "- " and "1. " lists (with indented
// continuation lines), pipe tables, and inline `code`, **strong** and
// *emphasis*. Every character of the source is HTML-escaped before any
// markup is added, so no text of the document can become markup of the
// page; headings are shifted by shift levels (a "## " in a description
// sits under the page's own headings).
func markdown(src string, shift int) template.HTML {
	var b strings.Builder
	lines := strings.Split(strings.ReplaceAll(strings.TrimSpace(src), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			i++
		case strings.HasPrefix(trimmed, "#"):
			level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
			text := strings.TrimSpace(trimmed[level:])
			level = min(level+shift, 6)
			tag := "h" + string(rune('0'+level))
			b.WriteString("<" + tag + ` id="` + html.EscapeString(anchor(text)) + `">` + inline(text) + "</" + tag + ">\n")
			i++
		case strings.HasPrefix(trimmed, "|"):
			i = table(&b, lines, i)
		case listMarker(trimmed) != "":
			i = list(&b, lines, i)
		default:
			var para []string
			for ; i < len(lines); i++ {
				t := strings.TrimSpace(lines[i])
				if t == "" || strings.HasPrefix(t, "#") || strings.HasPrefix(t, "|") || listMarker(t) != "" {
					break
				}
				para = append(para, t)
			}
			b.WriteString("<p>" + inline(strings.Join(para, " ")) + "</p>\n")
		}
	}
	return template.HTML(b.String()) //nolint:gosec // built from escaped text and fixed tags only
}

var orderedItem = regexp.MustCompile(`^[0-9]{1,3}\. `)

// listMarker returns "ul" or "ol" when line starts a list item.
func listMarker(line string) string {
	switch {
	case strings.HasPrefix(line, "- "), strings.HasPrefix(line, "* "):
		return "ul"
	case orderedItem.MatchString(line):
		return "ol"
	}
	return ""
}

// list renders the list starting at lines[i] and returns the next line.
func list(b *strings.Builder, lines []string, i int) int {
	kind := listMarker(strings.TrimSpace(lines[i]))
	b.WriteString("<" + kind + ">\n")
	var item []string
	flush := func() {
		if item != nil {
			b.WriteString("<li>" + inline(strings.Join(item, " ")) + "</li>\n")
			item = nil
		}
	}
	for ; i < len(lines); i++ {
		line := lines[i]
		t := strings.TrimSpace(line)
		if t == "" {
			break
		}
		if m := listMarker(t); m != "" && !strings.HasPrefix(line, " ") {
			if m != kind {
				break
			}
			flush()
			if kind == "ul" {
				item = []string{t[2:]}
			} else {
				item = []string{strings.TrimSpace(t[strings.Index(t, ".")+1:])}
			}
			continue
		}
		if !strings.HasPrefix(line, " ") {
			break // a paragraph right after the list
		}
		item = append(item, t) // continuation of the item
	}
	flush()
	b.WriteString("</" + kind + ">\n")
	return i
}

// table renders the pipe table starting at lines[i] and returns the next
// line. The second row is the header separator. The table sits in a
// div.scroll: a table wider than a narrow screen scrolls by itself rather
// than breaking its code mid-word or widening the page.
func table(b *strings.Builder, lines []string, i int) int {
	var rows [][]string
	for ; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(t, "|") {
			break
		}
		rows = append(rows, cells(t))
	}
	b.WriteString("<div class=\"scroll\"><table>\n")
	for r, row := range rows {
		if r == 1 && isSeparator(row) {
			continue
		}
		cell := "td"
		if r == 0 {
			cell = "th"
		}
		b.WriteString("<tr>")
		for _, c := range row {
			b.WriteString("<" + cell + ">" + inline(c) + "</" + cell + ">")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table></div>\n")
	return i
}

// cells splits a table row on the pipes outside code spans.
func cells(row string) []string {
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	var out []string
	var cur strings.Builder
	code := false
	for _, r := range row {
		switch {
		case r == '`':
			code = !code
			cur.WriteRune(r)
		case r == '|' && !code:
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	return append(out, strings.TrimSpace(cur.String()))
}

func isSeparator(row []string) bool {
	for _, c := range row {
		if strings.Trim(c, "-: ") != "" {
			return false
		}
	}
	return true
}

var (
	strong   = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	emphasis = regexp.MustCompile(`(^|[^*\w])\*([^*\s][^*]*)\*`)
)

// inline renders code spans, strong and emphasis of one escaped line.
// Text inside a code span is taken literally.
func inline(s string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '`')
		if open < 0 {
			break
		}
		end := strings.IndexByte(s[open+1:], '`')
		if end < 0 {
			break
		}
		b.WriteString(emph(s[:open]))
		code := s[open+1 : open+1+end]
		if strings.Contains(code, " ") {
			// Several words may wrap between them in a narrow table
			// column; a single identifier never wraps (site.css).
			b.WriteString(`<code class="words">` + html.EscapeString(code) + "</code>")
		} else {
			b.WriteString("<code>" + html.EscapeString(code) + "</code>")
		}
		s = s[open+1+end+1:]
	}
	b.WriteString(emph(s))
	return b.String()
}

func emph(s string) string {
	s = html.EscapeString(s)
	s = strong.ReplaceAllString(s, "<strong>$1</strong>")
	return emphasis.ReplaceAllString(s, "$1<em>$2</em>")
}

var nonAnchor = regexp.MustCompile(`[^a-z0-9]+`)

// anchor is the fragment id of a heading or a name: lower case, words
// joined by '-'.
func anchor(text string) string {
	return strings.Trim(nonAnchor.ReplaceAllString(strings.ToLower(text), "-"), "-")
}
