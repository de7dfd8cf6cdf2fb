package script

import (
	"fmt"
	"strconv"
	"strings"
)

// Cond is an \if or \elif condition: one operand read as a boolean, or two
// compared.
type Cond struct {
	Left  *Operand
	Op    string // "", "=", "!=", "<", "<=", ">", ">="
	Right *Operand
}

type operandKind uint8

const (
	literal  operandKind = iota // 0, 'issued', OK
	variable                    // :name or :'name'
	tmpl                        // {{.Token}}
)

// Operand is one side of a condition, or \sleep's amount.
type Operand struct {
	kind operandKind
	text string // the literal's value, or the variable's name
	pc   *piece
	unit string // \sleep only
}

func (o *Operand) String() string {
	switch o.kind {
	case variable:
		return ":" + o.text
	case tmpl:
		return o.pc.raw
	}
	return o.text
}

var operators = map[string]string{"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

// cond parses an \if condition.
func (p *parser) cond(arg string, line, col int) (*Cond, error) {
	toks, err := condTokens(arg)
	if err != nil {
		return nil, p.errf(line, col, `\if %s: %v`, arg, err)
	}
	bad := func() error {
		return p.errf(line, col, `\if %s: want one value (\if :flag) or a comparison (\if :used = 0; operators = != < <= > >=)`, arg)
	}
	switch len(toks) {
	case 1:
		if _, isOp := operators[toks[0]]; isOp {
			return nil, bad()
		}
		l, err := p.operand(toks[0], line, col)
		if err != nil {
			return nil, err
		}
		return &Cond{Left: l}, nil
	case 3:
		op, ok := operators[toks[1]]
		if !ok {
			return nil, bad()
		}
		l, err := p.operand(toks[0], line, col)
		if err != nil {
			return nil, err
		}
		r, err := p.operand(toks[2], line, col)
		if err != nil {
			return nil, err
		}
		return &Cond{Left: l, Op: op, Right: r}, nil
	}
	return nil, bad()
}

// condTokens splits a condition into operands and operators.
func condTokens(s string) ([]string, error) {
	var toks []string
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '\'':
			j := i + 1
			for ; j < len(s); j++ {
				if s[j] == '\'' {
					if j+1 < len(s) && s[j+1] == '\'' {
						j++
						continue
					}
					break
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated ' quote")
			}
			toks = append(toks, s[i:j+1])
			i = j + 1
		case strings.HasPrefix(s[i:], "{{"):
			end := strings.Index(s[i:], "}}")
			if end < 0 {
				return nil, fmt.Errorf("unterminated template: {{ without }}")
			}
			toks = append(toks, s[i:i+end+2])
			i += end + 2
		case strings.ContainsRune("=!<>", rune(c)):
			j := i + 1
			if j < len(s) && strings.ContainsRune("=>", rune(s[j])) {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t=!<>", rune(s[j])) {
				if s[j] == '\'' && j > i && s[j-1] == ':' { // :'name'
					k := strings.IndexByte(s[j+1:], '\'')
					if k < 0 {
						return nil, fmt.Errorf("unterminated ' quote")
					}
					j += k + 2
					continue
				}
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}

// operand reads one operand: :name, :'name', 'text', {{…}} or a bare word.
func (p *parser) operand(tok string, line, col int) (*Operand, error) {
	switch {
	case strings.HasPrefix(tok, ":'") && strings.HasSuffix(tok, "'") && len(tok) > 3:
		name := tok[2 : len(tok)-1]
		if !isIdent(name) {
			return nil, p.errf(line, col, "%s: a variable's name is letters, digits and '_'", tok)
		}
		return &Operand{kind: variable, text: name}, nil
	case strings.HasPrefix(tok, ":"):
		name := tok[1:]
		if !isIdent(name) {
			return nil, p.errf(line, col, "%s: a variable's name is letters, digits and '_'", tok)
		}
		return &Operand{kind: variable, text: name}, nil
	case strings.HasPrefix(tok, "'"):
		// \sleep splits its argument on blanks, not with the condition's
		// tokenizer: a quote can reach here unclosed.
		if len(tok) < 2 || !strings.HasSuffix(tok, "'") {
			return nil, p.errf(line, col, "%s: unterminated ' quote", tok)
		}
		return &Operand{kind: literal, text: strings.ReplaceAll(tok[1:len(tok)-1], "''", "'")}, nil
	case strings.Contains(tok, "{{"):
		pc, err := p.piece(tok, line, col)
		if err != nil {
			return nil, err
		}
		return &Operand{kind: tmpl, pc: pc}, nil
	}
	return &Operand{kind: literal, text: tok}, nil
}

// compare applies op to two values: as numbers when both are numbers, as
// text otherwise.
func compare(l, op, r string) bool {
	lf, lerr := strconv.ParseFloat(strings.TrimSpace(l), 64)
	rf, rerr := strconv.ParseFloat(strings.TrimSpace(r), 64)
	c := 0
	if lerr == nil && rerr == nil {
		switch {
		case lf < rf:
			c = -1
		case lf > rf:
			c = 1
		}
	} else {
		c = strings.Compare(l, r)
	}
	switch op {
	case "=":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

// boolean reads a value as psql's \if does: true, false, on, off, yes, no,
// 1, 0 (any case, and unique prefixes of the words).
func boolean(v string) (bool, bool) {
	s := strings.ToLower(strings.TrimSpace(v))
	if s == "" {
		return false, false
	}
	if s == "1" {
		return true, true
	}
	if s == "0" {
		return false, true
	}
	for _, w := range []string{"true", "yes", "on"} {
		if strings.HasPrefix(w, s) && s != "o" {
			return true, true
		}
	}
	for _, w := range []string{"false", "no", "off"} {
		if strings.HasPrefix(w, s) && s != "o" && (w != "off" || len(s) > 1) {
			return false, true
		}
	}
	return false, false
}
