package namespace

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Error is one error of a configuration file: the line it is on and one
// sentence saying what is wrong.
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Errorf returns an Error at the line of n.
func Errorf(n *yaml.Node, format string, args ...any) *Error {
	return &Error{Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// NameRule says what a namespace's name may be.
const NameRule = "a namespace's name is 1 to 32 characters of A-Z a-z 0-9 . _ -"

// ValidName reports whether name can be a namespace's: 1 to 32 of the
// characters of a room name, without the colon that ends it.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > 32 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Parse reads the `namespaces:` section of a configuration file (n, a
// mapping of names to options) and returns the namespaces and every error
// found, each naming its line and namespace.
func Parse(n *yaml.Node) (Set, []error) {
	if n.Kind != yaml.MappingNode {
		return nil, []error{Errorf(n, "namespaces must be a mapping of names to options, got %s", kindOf(n))}
	}
	set := Set{}
	var errs []error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := k.Value
		switch {
		case !ValidName(name):
			errs = append(errs, Errorf(k, "namespace %q: %s", name, NameRule))
			continue
		case set[name] != nil:
			errs = append(errs, Errorf(k, "namespace %q is defined twice", name))
			continue
		}
		o, oerrs := parseOptions(name, v)
		errs = append(errs, oerrs...)
		set[name] = o
	}
	return set, errs
}

// parseOptions reads one namespace's options.
func parseOptions(name string, n *yaml.Node) (*Options, []error) {
	o := &Options{Name: name}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return o, nil // "chat:" alone: the defaults
	}
	if n.Kind != yaml.MappingNode {
		return o, []error{Errorf(n, "namespace %q: its options must be a mapping, got %s", name, kindOf(n))}
	}
	var errs []error
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			errs = append(errs, Errorf(k, "namespace %q: %s is set twice", name, k.Value))
			continue
		}
		seen[k.Value] = true
		f, ok := fields[k.Value]
		if !ok {
			errs = append(errs, Errorf(k, "namespace %q: unknown option %q (known: %s)", name, k.Value, strings.Join(fieldNames(), ", ")))
			continue
		}
		if msg := f(o, v); msg != "" {
			errs = append(errs, Errorf(v, "namespace %q: %s", name, msg))
		}
	}
	return o, errs
}

// fields are the options of a namespace, by key: each sets its field from
// the value's node, or says in one sentence (without the namespace) why it
// cannot.
var fields = map[string]func(o *Options, v *yaml.Node) string{
	"history": func(o *Options, v *yaml.Node) string {
		n, msg := intIn(v, "history", 0, MaxHistory)
		o.History, o.HistorySet = n, msg == ""
		return msg
	},
	"history_ttl": func(o *Options, v *yaml.Node) string {
		d, msg := duration(v, "history_ttl")
		if msg == "" && (d < 0 || d > MaxHistoryTTL || d > 0 && d < time.Second) {
			msg = fmt.Sprintf("history_ttl must be 0 (the server's default) or between 1s and %s, got %s", fmtDuration(MaxHistoryTTL), v.Value)
		}
		o.HistoryTTL = d
		return msg
	},
	"presence": func(o *Options, v *yaml.Node) string {
		b, msg := boolean(v, "presence")
		o.NoPresence = !b
		return msg
	},
	"join_leave_events": func(o *Options, v *yaml.Node) string {
		b, msg := boolean(v, "join_leave_events")
		o.NoJoinLeave = !b
		return msg
	},
	"publish": func(o *Options, v *yaml.Node) string {
		switch {
		case v.Kind == yaml.ScalarNode && v.Value == "clients":
			o.Publish = PublishClients
		case v.Kind == yaml.ScalarNode && v.Value == "backend":
			o.Publish = PublishBackend
		default:
			return fmt.Sprintf("publish must be clients or backend, got %s", valueOf(v))
		}
		return ""
	},
	"join_token": func(o *Options, v *yaml.Node) string {
		b, msg := boolean(v, "join_token")
		o.JoinToken = b
		return msg
	},
	"join_hook": func(o *Options, v *yaml.Node) string {
		b, msg := boolean(v, "join_hook")
		o.JoinHook = b
		return msg
	},
	"max_members": func(o *Options, v *yaml.Node) string {
		n, msg := intIn(v, "max_members", 0, MaxMembersCap)
		o.MaxMembers = n
		return msg
	},
	"hooks": func(o *Options, v *yaml.Node) string {
		names, msg := namesIn(v, "hooks", HookNames)
		o.Hooks, o.HooksSet = names, msg == ""
		return msg
	},
	"webhooks": func(o *Options, v *yaml.Node) string {
		names, msg := namesIn(v, "webhooks", WebhookEvents)
		o.Webhooks, o.WebhooksSet = names, msg == ""
		return msg
	},
}

// OptionKeys returns the keys of a namespace's options, sorted.
func OptionKeys() []string { return fieldNames() }

func fieldNames() []string {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

// intIn reads an integer between lo and hi.
func intIn(v *yaml.Node, key string, lo, hi int) (int, string) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
		return 0, fmt.Sprintf("%s must be a whole number, got %s", key, valueOf(v))
	}
	n, err := strconv.Atoi(v.Value)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Sprintf("%s must be between %d and %d, got %s", key, lo, hi, v.Value)
	}
	return n, ""
}

// boolean reads true or false.
func boolean(v *yaml.Node, key string) (bool, string) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
		return false, fmt.Sprintf("%s must be true or false, got %s", key, valueOf(v))
	}
	var b bool
	if err := v.Decode(&b); err != nil {
		return false, fmt.Sprintf("%s must be true or false, got %s", key, valueOf(v))
	}
	return b, ""
}

// duration reads a Go duration such as 90s or 10m; a bare 0 is 0.
func duration(v *yaml.Node, key string) (time.Duration, string) {
	if v.Kind == yaml.ScalarNode && v.Value == "0" {
		return 0, ""
	}
	if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
		return 0, fmt.Sprintf("%s must be a duration such as 90s or 10m, got %s", key, valueOf(v))
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil {
		return 0, fmt.Sprintf("%s must be a duration such as 90s or 10m, got %s", key, valueOf(v))
	}
	return d, ""
}

// namesIn reads a list of distinct names, each one of known.
func namesIn(v *yaml.Node, key string, known []string) ([]string, string) {
	if v.Kind != yaml.SequenceNode {
		return nil, fmt.Sprintf("%s must be a list of %s, got %s", key, strings.Join(known, ", "), valueOf(v))
	}
	names := []string{} // an empty list is not an absent key
	for _, e := range v.Content {
		switch {
		case e.Kind != yaml.ScalarNode || !slices.Contains(known, e.Value):
			return nil, fmt.Sprintf("%s: %s is not one of %s", key, valueOf(e), strings.Join(known, ", "))
		case slices.Contains(names, e.Value):
			return nil, fmt.Sprintf("%s: %s is listed twice", key, e.Value)
		}
		names = append(names, e.Value)
	}
	return names, ""
}

// valueOf shows a value in an error: a scalar as written, quoted when it
// is a string, else what kind of value it is.
func valueOf(v *yaml.Node) string {
	if v.Kind != yaml.ScalarNode {
		return kindOf(v)
	}
	if v.Tag == "!!str" {
		return strconv.Quote(v.Value)
	}
	return v.Value
}

func kindOf(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a value"
}

// fmtDuration writes whole days as hours, as time.Duration does, but
// without zero minutes and seconds.
func fmtDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}
