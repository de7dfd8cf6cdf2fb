package suite

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/racetest/racetest/scenarios"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Suite is a parsed suite file: what it says, and where it says it.
type Suite struct {
	// Name is the file's name as the user gave it; errors start with it.
	Name string
	File File
	ast  *ast.File
	// src is the text, its line breaks made \n, for error excerpts.
	src string
}

// Parse reads a suite: YAML syntax, unknown or repeated keys, value types,
// and ${ENV} expansion in every string (env looks variables up). Of the
// catalog it needs only the connections' keys (defaults.connections), which
// reg's backends declare; what else needs the catalog or a server is
// Plans's to check.
//
// A file past the limits (MaxFileSize, MaxDepth, MaxValues, MaxRun) is
// refused before the YAML library reads it, or for aliases before anything
// is decoded, so that no file can take the memory of the machine it is
// checked on.
func Parse(name string, data []byte, env LookupEnv, reg *scenarios.Registry) (s *Suite, err error) {
	s = &Suite{Name: name}
	if len(data) > MaxFileSize {
		return nil, Errors{s.errorf(0, 0, "%s", tooBig(len(data)))}
	}
	// YAML breaks lines at \r\n and a lone \r as at \n; the YAML library
	// miscounts lines after a comment ended by \r\n (found by FuzzParse),
	// so every line break is made \n first and positions stay true.
	s.src = normalizeBreaks(string(data))
	data = []byte(s.src)
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, Errors{s.errorf(0, 0, "the suite is empty: it needs a list of cases (see 'racetest suite --help')")}
	}
	if le := prescan(data); le != nil {
		return nil, Errors{s.errorf(le.line, le.col, "%s", le.msg)}
	}
	f, err := parseYAML(data)
	if err != nil {
		return nil, Errors{s.yamlError(err, reg)}
	}
	s.ast = f
	if over := countExpanded(f); over != nil {
		line, col := 0, 0
		if tk := over.GetToken(); tk != nil && tk.Position != nil {
			line, col = tk.Position.Line, tk.Position.Column
		}
		return nil, Errors{s.errorf(line, col, "with its aliases expanded the file holds more than %d keys and values, past this point (an alias bomb?): a suite file holds at most %d", MaxValues, MaxValues)}
	}
	if len(f.Docs) > 1 {
		line, col := 0, 0
		tk := f.Docs[1].Start
		if tk == nil {
			tk = f.Docs[1].GetToken()
		}
		if tk != nil && tk.Position != nil {
			line, col = tk.Position.Line, tk.Position.Column
		}
		return nil, Errors{s.errorf(line, col, "a suite is one YAML document; this file has %d (remove the extra ---)", len(f.Docs))}
	}
	if err := decodeYAML(data, &s.File, decoding{s: s, keys: connectionKeys(reg)}); err != nil {
		return nil, Errors{s.yamlError(err, reg)}
	}
	var errs Errors
	var conns []*Error // the errors of defaults.connections, a map
	expandStrings(reflect.ValueOf(&s.File), "$", env, func(path string, err error) {
		e := s.errorAt(path, "%v", err)
		if strings.HasPrefix(path, "$.defaults.connections.") {
			conns = append(conns, e)
		}
		errs = append(errs, e)
	})
	if len(conns) > 1 {
		// A map's keys are expanded in sorted order; tell them in the file's.
		start := slices.Index(errs, conns[0])
		slices.SortStableFunc(errs[start:start+len(conns)], func(a, b *Error) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
		})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

// parseYAML and decodeYAML turn a panic inside the YAML library into an
// error: a suite file is input, and no input should crash the gate.
func parseYAML(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("the YAML parser failed on this file (%v)", r)
		}
	}()
	return parser.ParseBytes(data, 0)
}

func decodeYAML(data []byte, v any, d decoding) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the YAML decoder failed on this file (%v)", r)
		}
	}()
	return yaml.UnmarshalContext(context.WithValue(context.Background(), decodingKey{}, d), data, v, yaml.Strict())
}

// resolve is the node an alias names (its anchor's value), else n.
func (s *Suite) resolve(n ast.Node) ast.Node {
	alias, ok := n.(*ast.AliasNode)
	if !ok || alias.Value == nil || s.ast == nil {
		return n
	}
	for _, a := range ast.FilterFile(ast.AnchorType, s.ast) {
		if a, ok := a.(*ast.AnchorNode); ok && a.Name != nil && a.Name.GetToken() != nil &&
			a.Name.GetToken().Value == alias.Value.GetToken().Value {
			return a.Value
		}
	}
	return n
}

// decoding is what Connections needs to know while the file is decoded:
// the keys the registry's backends declare, and the file, to point at a
// key that is none of them.
type decoding struct {
	s    *Suite
	keys []string
}

type decodingKey struct{}

// UnmarshalYAML decodes defaults.connections, and refuses a key that no
// backend declares as the decoder refuses any unknown key: at the key,
// where the decoder would have met it (the first in the file's order).
func (c *Connections) UnmarshalYAML(ctx context.Context, unmarshal func(any) error) error {
	var m map[string]string
	if err := unmarshal(&m); err != nil {
		return err
	}
	*c = m
	d, ok := ctx.Value(decodingKey{}).(decoding)
	if !ok {
		return nil
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(d.keys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	const at = "$.defaults.connections"
	key, tk := unknown[0], d.s.tokenAt(at+"."+unknown[0])
	if n, ok := d.s.resolve(d.s.nodeAt(at)).(*ast.MappingNode); ok {
		for _, kv := range n.Values {
			if k := kv.Key.GetToken(); k != nil && slices.Contains(unknown, k.Value) {
				key, tk = k.Value, k
				break
			}
		}
	}
	if tk == nil {
		tk = d.s.tokenAt(at)
	}
	return &yaml.UnknownFieldError{Message: fmt.Sprintf("unknown field %q", key), Token: tk}
}

func (s *Suite) errorf(line, col int, format string, a ...any) *Error {
	e := &Error{File: s.Name, Line: line, Column: col, Msg: fmt.Sprintf(format, a...)}
	e.source = sourceLine(s.src, line)
	return e
}

// sourceLine returns line n (1-based) of src, or "" when there is none.
func sourceLine(src string, n int) string {
	if n < 1 {
		return ""
	}
	for ; n > 1; n-- {
		i := strings.IndexByte(src, '\n')
		if i < 0 {
			return ""
		}
		src = src[i+1:]
	}
	if i := strings.IndexByte(src, '\n'); i >= 0 {
		src = src[:i]
	}
	return src
}

// tooBig says that a file of size bytes is past MaxFileSize.
func tooBig(size int) string {
	return fmt.Sprintf("the file is %s; a suite file may be at most %d MiB (a suite is a few kilobytes: is this the right file?)",
		humanSize(int64(size)), MaxFileSize>>20)
}

func humanSize(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1<<20), n)
}

// errorAt is an error about the value at a YAML path ("$.cases[2].backend").
// When the path cannot be found (the value came through an alias or a
// merge key) it points at the nearest enclosing value that can.
func (s *Suite) errorAt(path string, format string, a ...any) *Error {
	line, col := s.position(path)
	return s.errorf(line, col, format, a...)
}

func (s *Suite) position(path string) (line, col int) {
	if s.ast == nil {
		return 0, 0
	}
	for p := path; p != "$" && p != ""; p = parentPath(p) {
		if tk := s.tokenAt(p); tk != nil && tk.Position != nil {
			return tk.Position.Line, tk.Position.Column
		}
	}
	return 0, 0
}

func (s *Suite) tokenAt(path string) *token.Token {
	if n := s.nodeAt(path); n != nil {
		return firstToken(n)
	}
	return nil
}

// nodeAt is the node at path ("$.defaults.connections"), or nil.
func (s *Suite) nodeAt(path string) (n ast.Node) {
	defer func() {
		if recover() != nil {
			n = nil
		}
	}()
	yp, err := yaml.PathString(path)
	if err != nil {
		return nil
	}
	n, err = yp.FilterFile(s.ast)
	if err != nil {
		return nil
	}
	return n
}

// firstToken is where a node starts as a reader sees it: a mapping's token
// is its first colon, but a reader looks for its first key.
func firstToken(n ast.Node) *token.Token {
	switch m := n.(type) {
	case *ast.MappingNode:
		if len(m.Values) > 0 && m.Start != nil && m.Start.Type == token.MappingStartType {
			return m.Start
		}
		if len(m.Values) > 0 {
			return firstToken(m.Values[0])
		}
	case *ast.MappingValueNode:
		return m.Key.GetToken()
	}
	return n.GetToken()
}

// parentPath drops a path's last step: "$.cases[2].backend" → "$.cases[2]"
// → "$.cases".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i > 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i > 0 {
		return p[:i]
	}
	return "$"
}

// yamlError rewrites the YAML library's error as one of ours: its position,
// and a message in the suite's words rather than Go's types.
func (s *Suite) yamlError(err error, reg *scenarios.Registry) *Error {
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil || ye.GetToken().Position == nil {
		return s.errorf(0, 0, "%v", err)
	}
	pos := ye.GetToken().Position
	msg := ye.GetMessage()
	var (
		unknown *yaml.UnknownFieldError
		typeErr *yaml.TypeError
	)
	switch {
	case errors.As(err, &unknown):
		key := ye.GetToken().Value
		msg = fmt.Sprintf("unknown key %q", key)
		if sug := suggest(key, knownKeys(reg)); sug != "" {
			msg += fmt.Sprintf(" — did you mean %q?", sug)
		}
	case errors.As(err, &typeErr):
		msg = fmt.Sprintf("%s is not %s", describeToken(ye.GetToken()), describeType(typeErr.DstType))
	}
	return s.errorf(pos.Line, pos.Column, "%s", msg)
}

func describeToken(tk *token.Token) string {
	if tk.Type == token.MappingStartType || tk.Type == token.MappingValueType {
		return "a mapping"
	}
	if tk.Type == token.SequenceStartType || tk.Type == token.SequenceEntryType {
		return "a list"
	}
	v := tk.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return fmt.Sprintf("%q", v)
}

func describeType(t reflect.Type) string {
	if t == nil {
		return "of the expected type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a single value (quote it if it is text)"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping of keys to values"
	}
	return "a " + t.String()
}

// knownKeys lists every key the schema has, and the connections' keys of
// reg's backends, for "did you mean".
func knownKeys(reg *scenarios.Registry) []string {
	seen := map[string]bool{}
	for _, k := range connectionKeys(reg) {
		seen[k] = true
	}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			key, inline := yamlKey(f)
			if key != "" {
				if seen[key] {
					continue
				}
				seen[key] = true
			}
			if key != "" || inline {
				walk(f.Type)
			}
		}
	}
	walk(reflect.TypeOf(File{}))
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// connectionKeys are the keys defaults.connections accepts: each of reg's
// server backends' connections, in the registry's order.
func connectionKeys(reg *scenarios.Registry) []string {
	var keys []string
	for _, b := range reg.Backends() {
		for _, c := range []*scenarios.Connection{b.Conn, b.ReadConn} {
			if c != nil {
				keys = append(keys, c.Key)
			}
		}
	}
	return keys
}

// suggest returns the known word closest to w, if it is close enough to be
// what was meant.
func suggest(w string, known []string) string { return scenarios.Suggest(strings.ToLower(w), known) }

// normalizeBreaks makes every line break \n: \r\n and a lone \r are
// line breaks to YAML too.
func normalizeBreaks(s string) string {
	return strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(s)
}
