package suite

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// LookupEnv reads one environment variable, as os.LookupEnv does. Tests
// pass a map's lookup instead of the process environment.
type LookupEnv func(name string) (string, bool)

// Expand replaces ${NAME} with the variable's value and ${NAME:-word} with
// the value, or word when the variable is unset or empty; $$ is a literal
// $. Any other $ is kept as written, so a password holding a $ needs no
// escaping. An unset variable without a default is an error: a suite that
// silently ran against an empty DSN would be worse than one that stops.
func Expand(s string, env LookupEnv) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '{':
		default:
			b.WriteByte('$')
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in %q: close it with } (write $$ for a literal $)", s)
		}
		expr := s[i+2 : i+2+end]
		name, fallback, hasFallback := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s}: %q is not an environment variable name (letters, digits and _, not starting with a digit)", expr, name)
		}
		v, ok := env(name)
		switch {
		case hasFallback && v == "":
			v = fallback
		case !ok:
			return "", fmt.Errorf("environment variable %s is not set (write ${%s:-value} to give a default)", name, name)
		}
		b.WriteString(v)
		i += 2 + end
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// expandStrings expands every string the file holds, in place, and calls
// fail with the YAML path of each one that cannot be expanded. Walking the
// decoded value rather than the text keeps a value's quoting and a
// variable's content (a DSN full of colons) out of the YAML parser.
func expandStrings(v reflect.Value, path string, env LookupEnv, fail func(path string, err error)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			expandStrings(v.Elem(), path, env, fail)
		}
	case reflect.String:
		out, err := Expand(v.String(), env)
		if err != nil {
			fail(path, err)
			return
		}
		v.SetString(out)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			key, inline := yamlKey(f)
			if key == "" && !inline {
				continue
			}
			p := path
			if !inline {
				p = path + "." + key
			}
			expandStrings(v.Field(i), p, env, fail)
		}
	case reflect.Slice:
		for i := range v.Len() {
			expandStrings(v.Index(i), path+"["+strconv.Itoa(i)+"]", env, fail)
		}
	case reflect.Map:
		if v.Type().Elem().Kind() != reflect.String {
			return
		}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			out, err := Expand(v.MapIndex(k).String(), env)
			if err != nil {
				fail(path+"."+k.String(), err)
				continue
			}
			v.SetMapIndex(k, reflect.ValueOf(out).Convert(v.Type().Elem()))
		}
	}
}

// yamlKey is a struct field's YAML key, or inline for an embedded one.
func yamlKey(f reflect.StructField) (key string, inline bool) {
	tag := f.Tag.Get("yaml")
	name, opts, _ := strings.Cut(tag, ",")
	if strings.Contains(opts, "inline") {
		return "", true
	}
	if name == "-" || !f.IsExported() {
		return "", false
	}
	return name, false
}
