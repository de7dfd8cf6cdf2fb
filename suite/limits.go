package suite

import (
	"fmt"
	"reflect"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
)

// A suite file is a few kilobytes; these limits are hundreds of times that,
// and keep what a hostile or mistaken file can cost (memory, time) small:
// every file they refuse is refused before the YAML library reads it, or,
// for aliases, before anything is decoded. BenchmarkParseRefused measures it.
const (
	// MaxFileSize is the largest suite file read or parsed.
	MaxFileSize = 4 << 20
	// MaxDepth is how deeply collections may nest (a suite needs about 6).
	MaxDepth = 64
	// MaxValues caps the keys, values and collections of a file, counted
	// with every alias expanded: a billion-laughs file is a few hundred
	// bytes that expand to a billion values.
	MaxValues = 10_000
	// MaxRun caps one value, comment or stretch of blank text: past it, the
	// YAML library's buffers for one value grow to 100 bytes per byte.
	MaxRun = 256 << 10
	// MaxParseMemory caps what the YAML library may allocate to read a
	// file, as estimated from its text by the costs below (measured with
	// go-yaml v1.19: TestParseAtTheLimitsWithinMemory keeps them true).
	MaxParseMemory = 80 << 20
)

// What the YAML library allocates, in bytes, per value and per byte of
// each kind of text.
const (
	costPerValue      = 7 << 10
	costPerBlockByte  = 64
	costPerQuotedByte = 32
	costPerOtherByte  = 16
)

// limitError is where a file crossed a limit, and which.
type limitError struct {
	line, col int
	msg       string
}

// prescan checks data against MaxDepth, MaxValues (without aliases: they
// are counted on the syntax tree, see expansion) and MaxRun, and refuses
// control characters and invalid UTF-8, in one pass with no allocation per
// token. It follows YAML closely enough to over-count, never to
// under-count: flow brackets, block entries by their column, quoted and
// block scalars with their extent, comments. What is not valid YAML it
// leaves to the YAML library, which then only sees bounded input.
func prescan(data []byte) *limitError {
	p := &scanner{data: data, line: 1, col: 1, expectNode: true, weight: costPerOtherByte}
	return p.scan()
}

type blockEntry struct {
	col int
	seq bool // a "- " entry, else a mapping key
}

type scanner struct {
	data      []byte
	i         int
	line, col int
	flow      int
	block     []blockEntry
	values    int
	// expectNode: the next non-blank character starts a node (a quote, an
	// anchor or a bracket is an indicator there, and text elsewhere).
	expectNode bool
	// plain: the last token was plain text, which may go on over lines.
	plain bool
	// cost estimates the YAML library's memory for what was read; weight
	// is the cost of the next byte.
	cost, weight int
	// The current run (value, comment or blank stretch) started here.
	runAt               int
	runLine, runCol     int
	scalarLine, scalarC int
}

func (p *scanner) peek(k int) byte {
	if p.i+k < len(p.data) {
		return p.data[p.i+k]
	}
	return 0
}

// advance moves past one byte, checking that it is printable text.
func (p *scanner) advance() *limitError {
	c := p.data[p.i]
	switch {
	case c == '\n':
		p.i++
		p.line, p.col = p.line+1, 1
	case c < 0x20 && c != '\t' && c != '\r' || c == 0x7f:
		return p.errf("the file holds a control character (byte 0x%02x): a suite is UTF-8 text — write it as an escape (\"\\x%02x\") inside double quotes", c, c)
	case c < utf8.RuneSelf:
		p.i++
		p.col++
	default:
		r, n := utf8.DecodeRune(p.data[p.i:])
		if r == utf8.RuneError && n <= 1 {
			return p.errf("the file is not valid UTF-8 (byte 0x%02x): save it as UTF-8", c)
		}
		if r >= 0x80 && r <= 0x9f && r != 0x85 {
			return p.errf("the file holds a control character (U+%04X): write it as an escape inside double quotes", r)
		}
		p.i += n
		p.col++
	}
	if p.cost += p.weight; p.cost > MaxParseMemory {
		return p.tooCostly()
	}
	if p.i-p.runAt > MaxRun {
		return &limitError{line: p.runLine, col: p.runCol, msg: fmt.Sprintf(
			"more than %d KiB of one value, comment or blank text starts here: the YAML library needs about 100 times that in memory, so a suite file holds nothing that long (put a long HTTP body in body_file)", MaxRun>>10)}
	}
	return nil
}

func (p *scanner) errf(format string, a ...any) *limitError {
	return &limitError{line: p.line, col: p.col, msg: fmt.Sprintf(format, a...)}
}

// startRun marks the start of a new token for MaxRun.
func (p *scanner) startRun() { p.runAt, p.runLine, p.runCol = p.i, p.line, p.col }

func (p *scanner) tooCostly() *limitError {
	return p.errf("the YAML library would need more than %d MB of memory to read this file up to here (about %d bytes per byte of quoted text, %d per byte of a | or > block): a suite is a few kilobytes (put a long HTTP body in body_file)",
		MaxParseMemory>>20, costPerQuotedByte, costPerBlockByte)
}

func (p *scanner) value() *limitError {
	p.values++
	if p.cost += costPerValue; p.cost > MaxParseMemory {
		return p.tooCostly()
	}
	if p.values > MaxValues {
		return p.errf("more than %d keys and values: a suite file holds at most %d (split it into several suites)", MaxValues, MaxValues)
	}
	return nil
}

func (p *scanner) depth(col int) *limitError {
	if d := p.flow + len(p.block); d > MaxDepth {
		return &limitError{line: p.line, col: col, msg: fmt.Sprintf("nested more than %d levels deep: a suite needs a handful, and the YAML library would recurse once per level", MaxDepth)}
	}
	return nil
}

// enterBlock records a block collection entry (a "- " or a key) at column
// col: entries at deeper columns have ended, one at the same column is a
// sibling, and anything else opens a collection one level deeper.
func (p *scanner) enterBlock(col int, seq bool) *limitError {
	for n := len(p.block); n > 0; n = len(p.block) {
		top := p.block[n-1]
		if top.col > col || top.col == col && top.seq && !seq {
			p.block = p.block[:n-1]
			continue
		}
		if top.col == col && top.seq == seq {
			return nil
		}
		break
	}
	p.block = append(p.block, blockEntry{col: col, seq: seq})
	if err := p.depth(col); err != nil {
		return err
	}
	return p.value()
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }

// ends reports whether the byte after an indicator ends it (so that "- x"
// is an entry and "-x" is text).
func (p *scanner) endsIndicator(k int) bool {
	c := p.peek(k)
	return c == 0 && p.i+k >= len(p.data) || isBlank(c) || c == '\n' ||
		p.flow > 0 && (c == ',' || c == ']' || c == '}' || c == '[' || c == '{')
}

func (p *scanner) scan() *limitError {
	for p.i < len(p.data) {
		c := p.data[p.i]
		if p.col == 1 && p.flow == 0 {
			// A line's indentation is not part of any value.
			if c == '%' {
				if err := p.skipLine(); err != nil {
					return err
				}
				continue
			}
			if (c == '-' || c == '.') && p.peek(1) == c && p.peek(2) == c && p.endsIndicator(3) {
				p.block = p.block[:0]
				p.startRun()
				for range 3 {
					if err := p.advance(); err != nil {
						return err
					}
				}
				p.expectNode = true
				continue
			}
		}
		switch {
		case c == '\n':
			if p.flow == 0 {
				p.expectNode = true
			}
			if err := p.advance(); err != nil {
				return err
			}
			continue
		case isBlank(c):
			if err := p.advance(); err != nil {
				return err
			}
			continue
		case c == '#' && (p.i == 0 || isBlank(p.data[p.i-1]) || p.data[p.i-1] == '\n'):
			p.startRun()
			if err := p.skipLine(); err != nil {
				return err
			}
			continue
		}
		if err := p.token(c); err != nil {
			return err
		}
	}
	return nil
}

// token reads one token starting at c, a character that is neither blank
// nor a line break.
func (p *scanner) token(c byte) *limitError {
	col := p.col
	switch {
	case c == '[' || c == '{':
		p.startRun()
		p.flow++
		p.plain, p.expectNode = false, true
		if err := p.depth(col); err != nil {
			return err
		}
		if err := p.value(); err != nil {
			return err
		}
		return p.advance()
	case (c == ']' || c == '}') && p.flow > 0:
		p.startRun()
		p.flow--
		p.plain, p.expectNode = false, false
		return p.advance()
	case c == ',' && p.flow > 0:
		p.startRun()
		p.plain, p.expectNode = false, true
		return p.advance()
	case (c == '-' || c == '?') && p.endsIndicator(1):
		p.startRun()
		p.plain, p.expectNode = false, true
		if p.flow == 0 {
			if err := p.enterBlock(col, c == '-'); err != nil {
				return err
			}
		}
		return p.advance()
	case c == ':' && (p.endsIndicator(1) || !p.plain && !p.expectNode):
		// A key ends here: the key began at the last scalar's column.
		p.startRun()
		if p.flow == 0 && p.scalarLine == p.line {
			if err := p.enterBlock(p.scalarC, false); err != nil {
				return err
			}
		}
		p.plain, p.expectNode = false, true
		return p.advance()
	case p.expectNode && (c == '&' || c == '!'):
		// An anchor or a tag is a property of the node that follows.
		p.startRun()
		return p.skipWord()
	case p.expectNode && c == '*':
		p.startRun()
		p.scalarLine, p.scalarC = p.line, col
		p.plain, p.expectNode = false, false
		if err := p.value(); err != nil {
			return err
		}
		return p.skipWord()
	case p.expectNode && (c == '"' || c == '\''):
		p.startRun()
		p.scalarLine, p.scalarC = p.line, col
		p.plain, p.expectNode = false, false
		if err := p.value(); err != nil {
			return err
		}
		return p.quoted(c)
	case p.expectNode && p.flow == 0 && (c == '|' || c == '>'):
		p.startRun()
		p.plain, p.expectNode = false, false
		if err := p.value(); err != nil {
			return err
		}
		return p.blockScalar()
	}
	// Plain text. Text that follows text, over lines, is one value to the
	// YAML library, so it stays one run.
	if !p.plain {
		p.startRun()
	}
	if err := p.value(); err != nil {
		return err
	}
	p.scalarLine, p.scalarC = p.line, col
	p.plain, p.expectNode = true, false
	for p.i < len(p.data) {
		c := p.data[p.i]
		if c == '\n' || c == ':' && p.endsIndicator(1) ||
			c == '#' && p.i > 0 && isBlank(p.data[p.i-1]) ||
			p.flow > 0 && (c == ',' || c == ']' || c == '}' || c == '[' || c == '{') {
			return nil
		}
		if err := p.advance(); err != nil {
			return err
		}
	}
	return nil
}

// skipWord moves past an anchor, alias or tag name.
func (p *scanner) skipWord() *limitError {
	for p.i < len(p.data) {
		c := p.data[p.i]
		if isBlank(c) || c == '\n' || p.flow > 0 && (c == ',' || c == ']' || c == '}' || c == '[' || c == '{') {
			return nil
		}
		if err := p.advance(); err != nil {
			return err
		}
	}
	return nil
}

func (p *scanner) skipLine() *limitError {
	for p.i < len(p.data) && p.data[p.i] != '\n' {
		if err := p.advance(); err != nil {
			return err
		}
	}
	return nil
}

// quoted moves past a single- or double-quoted scalar, over lines.
func (p *scanner) quoted(q byte) *limitError {
	p.weight = costPerQuotedByte
	defer func() { p.weight = costPerOtherByte }()
	if err := p.advance(); err != nil {
		return err
	}
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case q == '"' && c == '\\' && p.i+1 < len(p.data):
			if err := p.advance(); err != nil {
				return err
			}
		case c == q && q == '\'' && p.peek(1) == '\'':
			if err := p.advance(); err != nil {
				return err
			}
		case c == q:
			return p.advance()
		}
		if err := p.advance(); err != nil {
			return err
		}
	}
	return nil
}

// blockScalar moves past a literal (|) or folded (>) scalar: its header
// line, then every line that is blank or indented deeper than the entry
// that holds it.
func (p *scanner) blockScalar() *limitError {
	p.weight = costPerBlockByte
	defer func() { p.weight = costPerOtherByte }()
	parent := 0
	if n := len(p.block); n > 0 {
		parent = p.block[n-1].col
	}
	if err := p.skipLine(); err != nil {
		return err
	}
	for p.i < len(p.data) {
		// p.data[p.i] is the line break before the next line.
		j := p.i + 1
		for j < len(p.data) && p.data[j] == ' ' {
			j++
		}
		indentCol := j - p.i
		blank := j == len(p.data) || p.data[j] == '\n' || p.data[j] == '\r'
		if !blank && indentCol <= parent {
			return nil
		}
		if err := p.advance(); err != nil { // the line break
			return err
		}
		if err := p.skipLine(); err != nil {
			return err
		}
	}
	return nil
}

// expansion counts a parsed file's values with every alias expanded, as
// the decoder would build them, and stops at the first alias that takes
// the count past MaxValues.
type expansion struct {
	total   int
	anchors map[string]int
	over    ast.Node
}

func countExpanded(f *ast.File) (over ast.Node) {
	e := &expansion{anchors: map[string]int{}}
	for _, doc := range f.Docs {
		if e.count(doc) > MaxValues {
			break
		}
	}
	return e.over
}

// count returns the expanded size of n and adds it to the running total;
// once the total is past MaxValues it returns at once.
func (e *expansion) count(n ast.Node) int {
	if e.over != nil || n == nil {
		return 0
	}
	if v := reflect.ValueOf(n); v.Kind() == reflect.Pointer && v.IsNil() {
		return 0
	}
	start := e.total
	switch n := n.(type) {
	case *ast.DocumentNode:
		e.count(n.Body)
	case *ast.MappingNode:
		e.total++
		for _, v := range n.Values {
			e.count(v)
		}
	case *ast.MappingValueNode:
		e.count(n.Key)
		e.count(n.Value)
	case *ast.MappingKeyNode:
		e.count(n.Value)
	case *ast.SequenceNode:
		e.total++
		for _, v := range n.Values {
			e.count(v)
		}
	case *ast.TagNode:
		e.count(n.Value)
	case *ast.AnchorNode:
		e.count(n.Value)
		if n.Name != nil {
			e.anchors[n.Name.GetToken().Value] = e.total - start
		}
	case *ast.AliasNode:
		size := 1
		if n.Value != nil && n.Value.GetToken() != nil {
			if k, ok := e.anchors[n.Value.GetToken().Value]; ok {
				size = k
			}
		}
		e.total += size
		if e.total > MaxValues {
			e.over = n
		}
	default:
		e.total++
	}
	if e.total > MaxValues && e.over == nil {
		e.over = n
	}
	return e.total - start
}
