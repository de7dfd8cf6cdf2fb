package script

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// mongo reads database commands written as JSON documents (MongoDB
// Extended JSON, relaxed), each spanning as many lines as it needs; a
// \gset may follow a document's closing brace on its line. Lines starting
// with '#' or '//' between documents are comments.
func (p *parser) mongo(src string) error {
	lines := strings.Split(src, "\n")
	var doc strings.Builder
	depth, startLine, startCol := 0, 0, 0
	inString, escaped := false, false
	for n, raw := range lines {
		line := n + 1
		text := strings.TrimRight(raw, " \t\r")
		if depth == 0 {
			trimmed := strings.TrimLeft(text, " \t")
			col := len(text) - len(trimmed) + 1
			switch {
			case trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "//"):
				continue
			case strings.HasPrefix(trimmed, `\`):
				name, arg := splitMeta(trimmed)
				if name == `\gset` {
					return p.errf(line, col, `\gset must follow a command's closing brace on its line: {"find": …} \gset`)
				}
				if err := p.meta(name, arg, line, col); err != nil {
					return err
				}
				continue
			case !strings.HasPrefix(trimmed, "{"):
				return p.errf(line, col, `a command is a JSON document: {"insert": "coupons", "documents": […]}`)
			}
			startLine, startCol = line, col
			text = trimmed
		}
		for i := 0; i < len(text); i++ {
			c := text[i]
			switch {
			case inString:
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' && strings.HasPrefix(text[i:], "{{"):
				end := strings.Index(text[i:], "}}")
				if end < 0 {
					return p.errf(line, i+1, "unterminated template: {{ without }}")
				}
				i += end + 1
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
				if depth == 0 {
					doc.WriteString(text[:i+1])
					rest := strings.TrimSpace(text[i+1:])
					gset, prefix := false, ""
					if rest != "" {
						name, arg := splitMeta(rest)
						if name != `\gset` {
							return p.errf(line, i+2, `only \gset may follow a command on its line (got %q)`, rest)
						}
						gset, prefix = true, arg
					}
					if err := p.mongoDoc(doc.String(), startLine, startCol, gset, prefix); err != nil {
						return err
					}
					doc.Reset()
					text = ""
				}
			}
		}
		if depth > 0 {
			doc.WriteString(text)
			doc.WriteByte('\n')
		}
	}
	if depth > 0 {
		return p.errf(startLine, startCol, "the document does not close: %d brace(s) or bracket(s) left open", depth)
	}
	return nil
}

// mongoDoc checks one document: with sample template values it must be a
// JSON document whose first key names the command.
func (p *parser) mongoDoc(text string, line, col int, gset bool, prefix string) error {
	if err := p.addStatement(text, []string{text}, line, col, gset, prefix); err != nil {
		return err
	}
	st := &p.s.Steps[len(p.s.Steps)-1]
	sampleText := text
	if pc := st.parts[0]; pc.tmpl != nil {
		var b strings.Builder
		if err := pc.tmpl.Execute(&b, sample(p.scope)); err != nil {
			return p.errf(line, col, "template: %s", templateReason(err))
		}
		sampleText = b.String()
	}
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(sampleText), false, &d); err != nil {
		return p.errf(line, col, "not a JSON document: %v", err)
	}
	if len(d) == 0 {
		return p.errf(line, col, `an empty document names no command: {"find": "coupons", "filter": {…}}`)
	}
	return nil
}

var mongoVar = regexp.MustCompile(`":'?([A-Za-z_][A-Za-z0-9_]*)'?"`)

// mongoVars replaces a JSON string that is exactly ":name" by the
// variable's value, as a JSON string.
func (e *Exec) mongoVars(text string) (string, error) {
	var missing string
	out := mongoVar.ReplaceAllStringFunc(text, func(m string) string {
		name := mongoVar.FindStringSubmatch(m)[1]
		v, ok := e.vars[name]
		if !ok {
			missing = name
			return m
		}
		b, _ := json.Marshal(v)
		return string(b)
	})
	if missing != "" {
		return "", fmt.Errorf("variable %s is not set — set it with \\gset on an earlier command", missing)
	}
	return out, nil
}
