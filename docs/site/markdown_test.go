package site

import (
	"regexp"
	"strings"
	"testing"
)

func TestMarkdown(t *testing.T) {
	for _, c := range []struct {
		name, src string
		shift     int
		want      string
	}{
		{"paragraphs", "one\ntwo\n\nthree", 0, "<p>one two</p>\n<p>three</p>\n"},
		{"heading shifted", "## Paging", 1, `<h3 id="paging">Paging</h3>` + "\n"},
		{"inline", "a `x<y` **b** *c* d*e", 0, "<p>a <code>x&lt;y</code> <strong>b</strong> <em>c</em> d*e</p>\n"},
		{"no markup from text", `<script>alert("x")</script> & <b>`, 0,
			"<p>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;b&gt;</p>\n"},
		{"list with continuation", "- one\n  more\n- two\nafter", 0,
			"<ul>\n<li>one more</li>\n<li>two</li>\n</ul>\n<p>after</p>\n"},
		{"ordered list", "1. a\n2. b", 0, "<ol>\n<li>a</li>\n<li>b</li>\n</ol>\n"},
		{"table with a pipe in code", "| a | b |\n|---|---|\n| `x|y` | 2 |", 0,
			"<div class=\"scroll\"><table>\n<tr><th>a</th><th>b</th></tr>\n<tr><td><code>x|y</code></td><td>2</td></tr>\n</table></div>\n"},
		{"unclosed code", "a `b", 0, "<p>a `b</p>\n"},
		{"code of several words", "`Retry-After: <seconds>`", 0, "<p><code class=\"words\">Retry-After: &lt;seconds&gt;</code></p>\n"},
	} {
		if got := string(markdown(c.src, c.shift)); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// allowedTag is every tag markdown may write; anything else in its output
// would be markup that came from the text.
var allowedTag = regexp.MustCompile(`</?(p|h[1-6]|ul|ol|li|table|tr|th|td|code|strong|em)( id="[a-z0-9-]*")?>|<code class="words">|<div class="scroll">|</div>`)

// FuzzMarkdown: whatever the text, the output holds only markdown's own
// tags (every '<' of the text is escaped), and every tag is closed.
func FuzzMarkdown(f *testing.F) {
	for _, s := range []string{"## A\n\n- x\n  y\n1. z\n\n| a | b |\n|---|---|\n| `c|d` | **e** *f* |", "<img src=x onerror=alert(1)>", "`<b>`", "*<i>*", "**"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out := string(markdown(src, 1))
		rest := allowedTag.ReplaceAllString(out, "")
		if strings.ContainsAny(rest, "<>") {
			t.Fatalf("markup not from markdown in %q (from %q)", out, src)
		}
		for _, tag := range []string{"div", "p", "ul", "ol", "li", "table", "tr", "code", "strong", "em"} {
			if strings.Count(out, "<"+tag+">")+strings.Count(out, "<"+tag+" ") != strings.Count(out, "</"+tag+">") {
				t.Fatalf("unbalanced <%s> in %q (from %q)", tag, out, src)
			}
		}
	})
}
